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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/declaration.h"
#include "kernels/dtype.h"

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
  bool operator==(const BenchShape&) const = default;
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
