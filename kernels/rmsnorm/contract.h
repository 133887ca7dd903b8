// The machine-readable contract of weighted_rmsnorm version 1: signature, dtypes, the formula as
// ordered steps (the seed's reference), declared errors, the per-dtype tolerance policy, the exact
// kernel signature and manifest schema (../shared/docs/DESIGN.md) and the benchmark shape sweep.
// The contract is a JSON document hashed canonically; the tolerance constants live here so that
// they are fixed before any candidate runs and are covered by the contract hash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/call.h"
#include "kernels/dtype.h"
#include "kernels/operator.h"

namespace kloop::rmsnorm {

inline constexpr std::string_view kOperatorName = "weighted_rmsnorm";
inline constexpr int kContractVersion = 1;

// Acceptance policy for one output dtype (kernels/call.h: the rule and its denominator policy).
// The row check is what rejects an all-zero output on the tiny row [1e-8, -1e-8], eps 1 (CASES.md
// P5): there the error norm equals the expected norm, ratio 1 > row_rtol; an all-zero expected
// row (the zero row of CASES.md P12) needs essentially exact zeros.
using Tolerance = op::Tolerance;

// The declared tolerance of `dtype` (constants justified in contract.cpp).
Tolerance tolerance_for(DType dtype);

// The spacing of a dtype's values (kernels/dtype.h), the unit the contract states bounds in.
using kloop::output_ulp;

// One benchmark shape: x is [rows, h] contiguous of `dtype`, weight [h].
struct BenchShape {
  std::int64_t rows = 0;
  std::int64_t h = 0;
  DType dtype = DType::kFloat32;
  nlohmann::json to_json() const;
};

// The benchmark sweep: 8x4096 .. 65536x4096 plus 32768x1009, 4096x4099, 65536x128, 16384x4096,
// 4096x8192, 2048x16384, for all three dtypes.
std::vector<BenchShape> benchmark_shapes();

// The contract document (stable key order comes from nlohmann's sorted object keys).
const nlohmann::json& contract_json();
// Canonical serialisation: contract_json().dump() (sorted keys, no whitespace, UTF-8).
std::string contract_canonical_text();
// Lower-case hex SHA-256 of contract_canonical_text(); changes whenever any policy changes.
std::string contract_sha256();
// "weighted_rmsnorm/1".
std::string contract_id();

// The contract prompt's weighted_rmsnorm/1 paragraphs (kernels/operator.h, PromptText).
op::PromptText prompt_text();

} // namespace kloop::rmsnorm
