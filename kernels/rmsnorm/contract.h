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

#include "kernels/dtype.h"

namespace kloop::rmsnorm {

inline constexpr std::string_view kOperatorName = "weighted_rmsnorm";
inline constexpr int kContractVersion = 1;

// Acceptance policy for one output dtype. An output passes when, on every element whose expected
// value is finite, |actual - expected| <= atol + rtol * |expected| (torch.testing.assert_close's
// rule), non-finite positions match exactly (NaN where NaN, same-signed Inf where Inf), AND every
// row satisfies the per-row relative check
//     ||actual_row - expected_row||_2 <= row_rtol * max(||expected_row||_2, row_floor)
// over the row's finite-expected entries. Denominator policy: the expected row norm, floored at
// row_floor so that an all-zero expected row (e.g. the zero row of CASES.md P12) demands an
// error norm of at most row_rtol * row_floor (i.e. essentially exact zeros) instead of dividing by
// zero. The row check is what rejects an all-zero output on the tiny row [1e-8, -1e-8], eps 1
// (CASES.md P5): there the error norm equals the expected norm, ratio 1 > row_rtol.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double row_rtol = 0;
  double row_floor = 0;
  nlohmann::json to_json() const;
};

// The declared tolerance of `dtype` (constants justified in contract.cpp).
Tolerance tolerance_for(DType dtype);

// The spacing of `dtype`'s values at |value| (one ulp): 2^(e - p + 1) for |value| in [2^e, 2^(e+1))
// with p = 24 (float32), 11 (float16), 8 (bfloat16) significand bits, and the subnormal spacing
// below the smallest normal (2^-149, 2^-24, 2^-133). For a non-finite value: the largest normal
// binade's spacing. The unit in which the correctness gate reports an error.
double output_ulp(DType dtype, double value);

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

} // namespace kloop::rmsnorm
