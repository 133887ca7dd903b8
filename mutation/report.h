// The checker-coverage report: what happened to each mutant and the mutation score (seed,
// closing section: a defect enters the denominator only with a concrete input that exposes it,
// and inputs that also fail the unmodified kernel are discarded). A mutant is `killed` (the first
// gate that rejected it, or the holdout), `admissible-missed` (every gate passed it but a
// searched input shows it wrong while the baseline is right: an evaluator gap, kept with the
// smallest such input), `not-shown-killable` (no exposing input found: possibly equivalent;
// listed separately, never counted as killed) or `not-run` (a gate it needed could not run here,
// e.g. no device). score = killed / admissible, admissible = killed + admissible-missed. The
// record file (--record / --check-record) holds the score so that a weaker evaluator fails.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutation/operators.h"

#include "mutation/operators.h"

namespace kloop::mutation {

enum class MutantStatus { kKilled, kAdmissibleMissed, kNotShownKillable, kNotRun };
std::string_view status_name(MutantStatus s); // "killed", "admissible-missed", ...

// The gate names a mutant can be killed by, in pipeline order ("holdout" last).
const std::vector<std::string>& kill_gates();
// True for the gates that run without a device (contract, build, static).
bool is_cpu_gate(std::string_view gate);

struct MutantOutcome {
  std::string id, op; // Mutant::id, Mutant::op
  int site = 0, line = 0;
  std::string diff; // Mutant::diff()
  MutantStatus status = MutantStatus::kNotRun;
  std::string gate;   // killed: the rejecting gate (kill_gates()); else empty
  std::string detail; // killed: the gate's reason; not-run: why; missed: the failure on the input
  nlohmann::json killing_input; // admissible-missed: the smallest exposing CaseSpec JSON; else null
  double wall_ms = 0;
  // Wall time per phase in ms ("gates": the public gates incl. the sanitizer and the wait for a
  // sanitizer slot; "holdout"; "search": pool batch plus the baseline re-run), only the phases
  // this mutant reached.
  std::map<std::string, double> phase_ms;
  nlohmann::json to_json() const;
};

// Killed / missed / not-shown / not-run counts of one group (an operator, or everything).
struct Tally {
  int killed = 0, missed = 0, not_shown = 0, not_run = 0;
  int admissible() const { return killed + missed; }
  std::optional<double> score() const; // killed / admissible; nullopt when admissible == 0
  void add(MutantStatus s);
};

struct CoverageReport {
  std::vector<MutantOutcome> outcomes;
  nlohmann::json selection = nlohmann::json::object(); // operators, caps, seeds (for the record)
  std::string device;                                  // device name, "" when none
  double wall_ms = 0;

  Tally total() const;
  std::map<std::string, Tally> per_operator() const; // by operator name
  std::map<std::string, int> per_gate() const;       // killed count by gate (every kill gate)
  int cpu_killed() const;                            // killed by contract, build or static
  // True when no mutant is not-run: the score covers every selected mutant.
  bool complete() const { return total().not_run == 0; }
  std::vector<const MutantOutcome*> gaps() const; // admissible-missed, in mutant order
  // {"score","killed","admissible","admissible_missed","not_shown_killable","not_run",
  //  "complete","cpu_killed","per_operator":{op:{...}},"per_gate":{gate:n},"gaps":[...],
  //  "not_shown_killable_mutants":[ids],"mutants":[MutantOutcome...],"selection","device"}
  nlohmann::json to_json() const;
  std::string table() const; // human-readable summary (per operator, per gate, gaps)
};

// The record kept in the repository (tests/gpu/checker_coverage_record.json).
struct CoverageRecord {
  std::optional<double> score; // null when the recorded run was incomplete
  int killed = 0, admissible = 0, cpu_killed = 0, mutants = 0;
  nlohmann::json selection = nlohmann::json::object();
  nlohmann::json to_json() const;
  // Throws std::invalid_argument naming the field on a malformed record.
  static CoverageRecord from_json(const nlohmann::json& j);
  static CoverageRecord of(const CoverageReport& report);
};

// The mutants a record's selection names, of `source` (the in-tree baseline of the operator with
// contract id `contract_id`): its "operators" list, or for "all" that operator's vocabulary (what
// `kloop checker-coverage OP` selects without --operators), with the recorded max_per_operator and
// max_mutants. Throws nlohmann::json::exception when the selection lacks one of those fields.
std::vector<Mutant> select_recorded(const CoverageRecord& record, std::string_view contract_id,
                                    std::string_view source);

// Compares a report with a record. Returns an empty string when the evaluator is at least as
// strong, else the reason (score fell; or CPU-killed count fell when the report is incomplete).
// A record made with a different selection is a usage problem: `selection_mismatch` is set.
std::string compare_to_record(const CoverageReport& report, const CoverageRecord& record,
                              bool* selection_mismatch);

} // namespace kloop::mutation
