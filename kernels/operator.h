// The operator interface (issue 25): everything kloop needs to know about one operator, read by
// every layer above kernels/, so that adding an operator means adding a folder under kernels/ and
// nothing else. Each folder kernels/<name>/ that holds an operator.cpp defines
// `const op::Operator& kloop::<name>::operator_instance()`; the build generates the registry
// (kernels/registry.h) from that folder list, so an operator cannot be dropped at link time.
// Beside the declaration (declaration.h) each operator owns its contract document and hash, the
// CPU reference with its declared errors, the tolerance policy, the case suites and their
// materializer, the holdout families, the benchmark shapes, and the paths of its in-tree baseline
// and defect corpus.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/call.h"
#include "kernels/declaration.h"
#include "kernels/dtype.h"
#include "kernels/offline_generator.h"

namespace kloop::op {

// One benchmark shape: `rows` rows of the batched tensors, every variable axis's value (indexed
// like Declaration::axes; fixed axes hold their value) and the call's dtype. JSON: {"rows",
// "dtype", and one key per variable axis, its name in lower case} ({"rows","h","dtype"} for
// weighted_rmsnorm/1).
struct BenchShape {
  std::int64_t rows = 0;
  std::vector<std::int64_t> axes;
  DType dtype = DType::kFloat32;
  nlohmann::json to_json(const Declaration& decl) const;
  // Reads to_json()'s layout; throws std::invalid_argument naming a missing or mistyped key.
  static BenchShape from_json(const Declaration& decl, const nlohmann::json& j);
  // Innermost axis value (the row width of RMSNorm and softmax).
  std::int64_t width(const Declaration& decl) const;
  // "65536x4096 bfloat16": rows, then the variable axes in declaration order, then the dtype.
  std::string label(const Declaration& decl) const;
  bool operator==(const BenchShape&) const = default;
};

// The operator's own paragraphs of the contract prompt (prompts/templates/contract.txt); the
// rest of that prompt comes from the contract document and the declaration.
struct PromptText {
  // Follows "Accuracy: " and precedes the tolerance: what the outputs are compared against.
  std::string accuracy_intro;
  // Follows the tolerance: what it accepts from honest kernels and what it rejects, and how a
  // failure is reported.
  std::string accuracy_notes;
  // An example manifest.json for this operator (JSON text, the keys its manifest schema names).
  std::string example_manifest;
};

// One case of a suite in words, for the feedback on a failing case (feedback/sections.cpp).
struct CaseDescription {
  std::string family; // the spec's grouping, e.g. "widths"
  DType dtype = DType::kFloat32;
  std::int64_t width = 0; // the row axis's value: a flat output index is row * width + column
  // Lines (two-space indent, each ending in '\n') naming the inputs: shapes, layout with strides
  // and offset, value family, scalars, and an invalid call's kind.
  std::string inputs;
};

class Operator {
public:
  virtual ~Operator() = default;

  virtual const Declaration& declaration() const = 0;
  // The name `kloop optimize NAME` takes ("rmsnorm"); also the folder name under kernels/.
  virtual std::string_view cli_name() const = 0;
  // One line for `kloop operators`.
  virtual std::string_view summary() const = 0;
  // The contract document (sorted keys); its canonical dump is what contract_sha256() hashes.
  virtual const nlohmann::json& contract() const = 0;
  // The benchmark sweep (also listed in the contract document).
  virtual std::vector<BenchShape> benchmark_shapes() const = 0;
  // The scalar arguments of every benchmark, sanitize and pcsample call (declaration order).
  virtual std::vector<ScalarArg> benchmark_scalars() const = 0;

  // --- semantics: the CPU reference and its declared errors ---
  // The contract's checks in the contract's order; never throws for bad input.
  virtual Validated validate(const CallArgs& call) const = 0;
  // The reference computation of a validated call (also an empty one): one fresh contiguous
  // tensor per
  // written tensor (written_tensors(), declaration order) with the call's device label; for an
  // input-output tensor, its expected final value.
  virtual std::vector<HostTensor> reference(const CallArgs& call, const Validated& v) const = 0;
  // The declared tolerance of written tensor `tensor` (declaration index) for call dtype `dtype`.
  virtual Tolerance tolerance(DType dtype, int tensor) const = 0;

  // --- cases: serialisable, seeded specs (JSON objects with at least "name" and "family") ---
  // Suite names the GPU worker's "cases.suite" accepts ("public", "large", "cases_md",
  // "invalid" for weighted_rmsnorm).
  virtual std::vector<std::string> suite_names() const = 0;
  // The suite `name` for `seed`; throws std::invalid_argument naming the known suites.
  virtual std::vector<nlohmann::json> suite(std::string_view name, std::uint64_t seed) const = 0;
  // The call a spec describes, bit-identical on every machine; throws std::invalid_argument
  // naming the field of a malformed spec.
  virtual CallArgs materialize(const nlohmann::json& spec) const = 0;
  // Elements of the batched tensors of a spec's call (rows times row width), for ordering
  // cases by size; throws std::invalid_argument like materialize().
  virtual std::int64_t case_elements(const nlohmann::json& spec) const = 0;

  // --- holdout and the checker-coverage search pool ---
  // Version of the holdout generation rules (part of the commitment).
  virtual std::string_view holdout_version() const = 0;
  // The holdout suite for `seed`: about `cases` cases whose elements total at most
  // `max_elements`, from families that differ from the public ones. Deterministic.
  virtual std::vector<nlohmann::json> holdout_suite(std::uint64_t seed, int cases,
                                                    std::int64_t max_elements) const = 0;
  // The random pool the checker-coverage analysis searches for a killing input of a mutant that
  // every gate passed: `cases` own cases of at most `max_case_elements` elements (wider than the
  // public suite and the holdout), plus `holdout_style_cases` drawn like the holdout from another
  // seed. Deterministic; no invalid calls.
  virtual std::vector<nlohmann::json> search_pool(std::uint64_t seed, int cases,
                                                  int holdout_style_cases,
                                                  std::int64_t max_case_elements) const = 0;

  // The case a spec describes, in words (feedback); throws std::invalid_argument like
  // materialize() for a spec that is not one of this operator's.
  virtual CaseDescription describe_case(const nlohmann::json& spec) const = 0;

  // The operator's paragraphs of the contract prompt.
  virtual PromptText prompt_text() const = 0;

  // --- the offline generator (`--provider offline`) ---
  // A fresh generator of this operator's offline family seeded with `seed`, or nullptr when the
  // operator has none (the offline provider then refuses the operator, naming it).
  virtual std::unique_ptr<OfflineGenerator> offline_generator(std::uint64_t seed) const {
    (void)seed;
    return nullptr;
  }

  std::string_view name() const { return declaration().name; }   // "weighted_rmsnorm"
  std::string contract_id() const { return declaration().id(); } // "weighted_rmsnorm/1"
  std::string contract_canonical_text() const { return contract().dump(); }
  // Lower-case hex SHA-256 of contract_canonical_text().
  std::string contract_sha256() const;
  // Source folder relative to the project root ("kernels/rmsnorm") and its in-tree baseline.
  std::string folder() const { return "kernels/" + std::string(cli_name()); }
  std::string baseline_folder() const { return folder() + "/baseline"; }
};

// SHA-256 of `text` as lower-case hex (libsodium); the contract hash's function.
std::string sha256_text_hex(std::string_view text);

} // namespace kloop::op
