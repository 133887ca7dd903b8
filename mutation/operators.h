// Source mutation operators for checker coverage (`kloop checker-coverage`; seed, closing section:
// "Measuring the Checker"). Each operator is a named, documented rule that models one thing a
// kernel generator gets wrong (a missing barrier, an off-by-one bound, the width where the row
// stride belongs, ...). Sites are found by line-wise regular expressions over the source with
// comments stripped, so the enumeration is deterministic for given bytes: a mutant is named by
// its operator and site index and carries the line edits that produce it. Each rule is written for
// the source idioms of one or more kloop operators' in-tree baselines (kernels/<name>/baseline):
// an operator's vocabulary (vocabulary()) is what `kloop checker-coverage <name>` applies by
// default; any source works, and a rule without sites in a source simply yields none.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::mutation {

// One changed line: line `line` (1-based) with text `before` becomes `after`; `after` may hold
// several lines separated by '\n' (an inserted statement) or be empty (the line is deleted).
struct LineEdit {
  int line = 0;
  std::string before, after;
};

// One mutant of a source.
struct Mutant {
  std::string op; // operator name, e.g. "barrier-remove"
  int site = 0;   // index among the operator's sites in the source (0-based)
  int line = 0;   // first edited line (1-based)
  std::string id; // "<op>#<site>"
  std::vector<LineEdit> edits;
  std::string source;             // the whole mutated source
  std::string diff() const;       // "L87: -<before>\nL87: +<after>" per edit
  nlohmann::json to_json() const; // {"id","op","site","line","diff"} (no source)
};

// A named rule. `doc` says what it changes and which defect class it models.
struct OperatorInfo {
  std::string_view name;
  std::string_view doc;
};

// Every operator of every vocabulary, in report order (names are unique).
const std::vector<OperatorInfo>& operators();
// The names of the rules written for the operator with contract id `contract_id` (in report
// order): weighted_rmsnorm/1's are the rules of issue 9 (this file's history), row_softmax/1's the
// shared ones (barriers, bounds, 32-bit offsets, non-finite scrubbing, module state, a hard-coded
// width) plus its own (max, shift guard, rescaling, 16-bit sum, tail, masked rows, stride, row
// and vector overruns). Empty for an operator without one.
std::vector<std::string> vocabulary(std::string_view contract_id);
// True when `name` is an operator name.
bool is_operator(std::string_view name);

// All mutants of `source` for operator `op`, in site order (site i is the i-th match scanning
// lines top to bottom, matches within a line left to right). Throws std::invalid_argument naming
// the operator when `op` is unknown.
std::vector<Mutant> mutants_of(std::string_view source, std::string_view op);

// Selection used by the analysis: for each operator in `ops` (empty: all, in operators() order)
// at most `max_per_operator` sites, spread evenly over its sites (site indices i * n / k); then
// round-robin over operators up to `max_total` mutants (<= 0: no cap). Mutants whose source equals
// the original or an earlier mutant's are dropped. Deterministic.
std::vector<Mutant> select_mutants(std::string_view source, const std::vector<std::string>& ops,
                                   int max_per_operator, int max_total);

// Applies `edits` (any order, distinct lines) to `source`. Throws std::invalid_argument when a
// line is out of range or its text differs from `before`.
std::string apply_edits(std::string_view source, const std::vector<LineEdit>& edits);

} // namespace kloop::mutation
