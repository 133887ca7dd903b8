// Public case families of weighted_rmsnorm/1: serialisable, seeded case descriptions (CaseSpec)
// and a deterministic materializer that produces bit-identical inputs on any machine (own PRNG:
// splitmix64 + xoshiro256**, normals from an Irwin-Hall sum, no libm transcendental functions).
// Families follow the seed and ../shared/docs/CASES.md: tile-boundary and prime widths, empty
// outer dims, 3-D outer, transposed / sliced-with-gaps / storage-offset / expanded views, zeros,
// subnormals, mixed magnitudes, 1e19 and 2e19, NaN/Inf placements, constant and heavy-tailed
// rows, several eps; plus invalid calls that must raise a declared error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/case_layout.h"
#include "kernels/rmsnorm/reference.h"
#include "kernels/tensor.h"

namespace kloop::rmsnorm {

// How x is laid out in its storage (shared with every operator's cases: kernels/case_layout.h).
using LayoutKind = op::LayoutKind;
enum class ValueFamily {
  kNormal,          // N(0, 1) approximately
  kZeros,           // all zeros
  kSubnormals,      // float32 subnormal magnitudes (or dtype subnormals), signed
  kMixedMagnitudes, // per-element magnitude 10^k, k in [-6, 6] (clamped to the dtype range)
  kBig1e19,         // +-1e19 entries mixed with normals (fp32: squares finite)
  kBig2e19,         // +-2e19 entries (fp32: squares overflow to Inf, rows become 0 or NaN)
  kNanInf,          // normals with NaN, +Inf, -Inf in some rows at seeded positions
  kConstantRows,    // each row one repeated value
  kHeavyTailed,     // normal / uniform ratios (Cauchy-like)
  kTinyRow,         // CASES.md P5: rows [1e-8, -1e-8, ...] alternating signs
  kConstant300,     // CASES.md P11: all 300.0
  kZeroAndSmallRow, // CASES.md P12: even rows zero, odd rows 1e-3
  kArange,          // element i = i + 0.5 (the seed's hidden-shape example)
  kOutlierChannels, // normals with a few fixed channels (about 1 in 64) scaled by 300 (LLM-like)
  kRowScales,       // normals times a per-row scale 10^k, k in [-30, 19] ([-7, 4] for fp16)
};
enum class WeightFamily {
  kRandomSigned, // signed, magnitudes 1e-3..10 (log-uniform), exact zeros in some lanes
  kOnes,         // all 1.0 (CASES.md P11 only)
};
// Invalid calls (the candidate must raise the declared error; the reference does).
enum class InvalidKind {
  kNone,
  kWeightShape,      // weight [H + 1]
  kDtypeMismatch,    // weight in another dtype
  kUnsupportedDtype, // x and weight float64
  kDeviceMismatch,   // weight labelled cuda:1 while x is cuda:0
  kNonStrided,       // x labelled sparse
  kZeroWidth,        // x [R, 0], weight [0]
  kScalarX,          // x 0-d
  kEpsZero,
  kEpsNegative,
  kEpsNan,
  kEpsInf,
  kEpsUnderflowFp32,
  kEpsOverflowFp32,
  kEpsBool,
  kEpsHugeInt,
};

using op::layout_kind_name;
std::string_view value_family_name(ValueFamily family);
std::string_view weight_family_name(WeightFamily family);
std::string_view invalid_kind_name(InvalidKind kind);

struct CaseSpec {
  std::string name;   // unique within a suite, e.g. "width-1009-normal-bf16"
  std::string family; // grouping for reports, e.g. "widths", "views", "values", "cases_md"
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> outer; // outer shape; x is [outer..., h]
  std::int64_t h = 1;
  LayoutKind layout = LayoutKind::kContiguous;
  std::int64_t gap = 0;           // kSlicedGaps: extra elements after each first-outer-dim block
  std::int64_t offset = 0;        // storage offset of x in elements (any layout)
  std::int64_t weight_offset = 0; // storage offset of weight in elements
  ValueFamily values = ValueFamily::kNormal;
  WeightFamily weight = WeightFamily::kRandomSigned;
  EpsScalar eps = EpsScalar::of(1e-5);
  InvalidKind invalid = InvalidKind::kNone;
  std::uint64_t seed = 0;

  std::int64_t rows() const;  // product of outer (1 when outer is empty)
  std::int64_t numel() const; // rows() * h
  nlohmann::json to_json() const;
  // Throws std::invalid_argument naming the field on a missing key or an unknown enum name.
  static CaseSpec from_json(const nlohmann::json& j);
  bool operator==(const CaseSpec& other) const = default;
};

struct CaseInputs {
  HostTensor x;      // layout per spec; unused storage (gaps) filled with NaN
  HostTensor weight; // [h], contiguous at weight_offset
  EpsScalar eps;
};

// Deterministic: the same spec gives the same bytes on every machine and every call.
CaseInputs materialize(const CaseSpec& spec);

// The view of x that materialize() builds for `spec`, in elements: shape [outer..., h], strides
// (kTransposed: the h dim's stride is rows; kSlicedGaps: the first outer dim's stride has `gap`
// extra elements; kExpanded: the first outer dim's stride is 0), storage offset, and the storage
// length it needs. Pure arithmetic on the spec; allocates nothing.
using XViewLayout = op::RowsViewLayout;
XViewLayout x_view_layout(const CaseSpec& spec);

// The inputs of a case in words (the feedback on a failing case, op::Operator::describe_case):
// "  x: bfloat16, outer shape [3], H 129, layout sliced_gaps: shape [3, 129], strides [132, 1]
// (elements), storage offset 0, gap 3", then the values, weight and eps line and, for an invalid
// call, its kind.
std::string describe_inputs(const CaseSpec& spec);

// The public suite for all three dtypes (a few tens of millions of elements in total, so the CPU
// reference runs in seconds). Includes the CASES.md inputs (P5, P7-P12, P15) and invalid calls.
std::vector<CaseSpec> public_cases(std::uint64_t seed);
// Only the CASES.md and seed inputs (small; used by unit tests and the CPU audit).
std::vector<CaseSpec> cases_md_cases();
// Invalid calls for each dtype (each must raise its declared error).
std::vector<CaseSpec> invalid_cases(std::uint64_t seed);
// Cases for the GPU machine only: a tensor over 2^31 bytes and more than 65535 rows.
std::vector<CaseSpec> large_cases(std::uint64_t seed);

// The holdout families (holdout_families.cpp): `cases` cases of random widths in [1, 20000] (a
// third of them primes), outer shapes up to four dimensions in total, gaps and storage offsets,
// heavy-tailed rows with outlier channels, per-row scales from 1e-30 to 1e19, NaN and Inf at
// random positions and random eps; all three dtypes; their elements total at most about
// `max_elements`. Drawn from `seed` through a stream no public suite uses.
std::vector<CaseSpec> holdout_cases(std::uint64_t seed, int cases, std::int64_t max_elements);

// The checker-coverage search pool (search_pool.cpp): random widths (tiny, primes, powers of two
// and their neighbours, uniform up to 16384), outer shapes from one row to a few thousand,
// sliced rows with gaps, storage offsets on x and weight, every value family and several eps;
// one own case in four is 16-byte aligned (x, weight, row stride) with a gap, 513-4096 wide, with
// 600-5000 rows (up to 4 x max_case_elements), so vectorised multi-row paths see strided rows;
// then `holdout_style_cases` holdout-style cases. Cases are named "pool-<i>" / "pool-h<i>".
std::vector<CaseSpec> search_pool_cases(std::uint64_t seed, int cases, int holdout_style_cases,
                                        std::int64_t max_case_elements);

// The deterministic PRNG (kernels/case_layout.h).
using Rng = op::Rng;

} // namespace kloop::rmsnorm
