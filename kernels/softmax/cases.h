// Case families of row_softmax/1: serialisable, seeded case descriptions (CaseSpec) and a
// deterministic materializer giving bit-identical inputs on every machine (the shared PRNG and
// row layouts of kernels/case_layout.h; no libm transcendental function). The families: the
// seed's widths (tile boundaries, primes, odd widths and widths that are no multiple of any vector
// width, N = 1) and layouts (transposed, sliced with gaps, storage offsets, expanded, 3-D outer,
// empty batches and N = 0), and the values softmax is sensitive to: large magnitudes (|x| ~ 1e4
// and up to the dtype's max: no max subtraction overflows exp), all-equal rows (exact 1/N),
// -inf elements (masks), all -inf rows, NaN and +inf rows, monotone rows (a running max that
// changes at every element), peaked and one-hot rows (outputs far below 1/N); plus invalid calls
// that must raise a declared error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/call.h"
#include "kernels/case_layout.h"
#include "kernels/tensor.h"

namespace kloop::softmax {

using op::LayoutKind;

enum class ValueFamily {
  kNormal,          // N(0, 1) approximately
  kLogits,          // N(0, 1) * 8: peaked rows (attention-logit scale), many outputs tiny
  kLargePositive,   // 1e4 + 4 N(0, 1): exp(x) overflows without the max subtraction
  kLargeNegative,   // -1e4 + 4 N(0, 1): a running max started at 0 underflows every term
  kNearMax,         // +-(0.5..1) x the dtype's largest finite value: x - max overflows to -inf
  kConstantRows,    // each row one value (0, 1, -1e4, 1e4 or a normal by row): exactly 1/N
  kCausalMask,      // row r: elements j > r mod N are -inf (a causal attention mask)
  kNegInfElements,  // normals with about one element in four -inf, at hashed positions
  kAllNegInf,       // even rows entirely -inf (NaN rows), odd rows normals
  kNanInf,          // row r mod 4: one NaN; one +inf; a +inf and a -inf; finite with one -inf
  kAscending,       // x[j] = j * step - offset: the running max grows at every element
  kDescending,      // x[j] = -j * step + offset
  kOneHot,          // one element 30 (float16: 12) among 0.1 N(0, 1): the others ~1e-13 or less
  kSubnormals,      // the dtype's subnormal magnitudes, signed: every output about 1/N
  kMixedMagnitudes, // sign * (1..10) * 10^k, k in [-6, 4] (float16: [-4, 4])
  kHeavyTailed,     // normal / uniform ratios (Cauchy-like)
  kRowScales,       // normals times a per-row scale 10^k, k in [-3, 3]
  kRowRamp,         // a row constant plus (j mod 16) / 4: cheap to draw (the large cases)
};

// Invalid calls (each must raise its declared error, reference.h).
enum class InvalidKind {
  kNone,
  kNonStrided,        // x labelled sparse
  kScalarX,           // x 0-d
  kFloat64,           // x float64
  kInt32,             // x int32
  kUnsupportedDevice, // x labelled with a DLPack device that is neither cpu nor cuda (Metal)
};

std::string_view value_family_name(ValueFamily family);
std::string_view invalid_kind_name(InvalidKind kind);

struct CaseSpec {
  std::string name;   // unique within a suite, e.g. "width-1009-normal-bfloat16"
  std::string family; // grouping for reports: "widths", "views", "values", "invalid", ...
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> outer; // outer shape; x is [outer..., n]
  std::int64_t n = 1;
  LayoutKind layout = LayoutKind::kContiguous;
  std::int64_t gap = 0;    // kSlicedGaps: extra elements after each first-outer-dim block
  std::int64_t offset = 0; // storage offset of x in elements (any layout)
  ValueFamily values = ValueFamily::kNormal;
  InvalidKind invalid = InvalidKind::kNone;
  std::uint64_t seed = 0;

  std::int64_t rows() const;  // product of outer (1 when outer is empty)
  std::int64_t numel() const; // rows() * n
  nlohmann::json to_json() const;
  // Throws std::invalid_argument naming the field on a missing key, a mistyped value or an
  // unknown enum name.
  static CaseSpec from_json(const nlohmann::json& j);
  bool operator==(const CaseSpec& other) const = default;
};

// The call a spec describes: x laid out per the spec (gaps and offsets NaN). Deterministic: the
// same spec gives the same bytes on every machine. Throws std::invalid_argument for a negative
// n, offset, gap or outer dim.
op::CallArgs materialize(const CaseSpec& spec);

// The inputs of a case in words (the feedback on a failing case, op::Operator::describe_case):
// "  x: bfloat16, outer shape [3], N 129, layout sliced_gaps: shape [3, 129], strides [132, 1]
// (elements), storage offset 0, gap 3", then the value family and, for an invalid call, its kind.
std::string describe_inputs(const CaseSpec& spec);

// The public suite for all three dtypes (about 3e7 elements, so the float64 CPU reference runs in
// seconds), including the invalid calls.
std::vector<CaseSpec> public_cases(std::uint64_t seed);
// Invalid calls for each dtype.
std::vector<CaseSpec> invalid_cases(std::uint64_t seed);
// Cases for the GPU machine only: more than 65535 rows, tensors over 2^31 bytes, the target shape
// 16384 x 32768 and, per dtype, a call past 2^31 elements (a kernel indexing with 32-bit element
// offsets must declare max_elements and leave these to the reference).
std::vector<CaseSpec> large_cases(std::uint64_t seed);

// The holdout families (holdout_families.cpp): `cases` cases of random widths in [1, 20000] (a
// third of them primes) and a few past 32768, random outer shapes, gaps and storage offsets,
// peaked, masked, non-finite, large-magnitude, monotone and heavy-tailed rows, per-row scales from
// 1e-3 to 1e3; all three dtypes; their elements total at most about `max_elements`. Drawn from
// `seed` through a stream no public suite uses.
std::vector<CaseSpec> holdout_cases(std::uint64_t seed, int cases, std::int64_t max_elements);

// The checker-coverage search pool (search_pool.cpp): random widths (tiny, primes, powers of two
// and their neighbours, uniform up to 16384), one row to a few thousand, every layout and value
// family; one own case in four 16-byte aligned with a gap that keeps the row stride a multiple of
// 16 bytes, 513-4096 wide and 600-5000 rows, so vectorised multi-row paths see strided rows; then
// `holdout_style_cases` holdout-style cases. Named "pool-<i>" / "pool-h<i>".
std::vector<CaseSpec> search_pool_cases(std::uint64_t seed, int cases, int holdout_style_cases,
                                        std::int64_t max_case_elements);

} // namespace kloop::softmax
