// materialize(CaseSpec): builds the x view, the weight and eps of a case, bit-identically on every
// machine (only IEEE basic arithmetic on the PRNG's output; no libm transcendental functions).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/rmsnorm/cases.h"

namespace kloop::rmsnorm {

namespace {

// Exact decimal powers as double literals (deterministic, no pow()).
constexpr double kPow10[] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6};

double sign(Rng& rng) {
  return (rng.next() & 1) ? -1.0 : 1.0;
}

using op::fill_storage_nan;
using op::mix64;

double subnormal_magnitude(Rng& rng, DType dtype) {
  // Largest subnormal: float32/bfloat16 2^-126 (1.18e-38), float16 2^-14 (6.1e-5).
  const double top = dtype == DType::kFloat16 ? 0x1.0p-14 : 0x1.0p-126;
  return top * (0.01 + 0.98 * rng.uniform());
}

float value_at(const CaseSpec& s, Rng& rng, std::int64_t r, std::int64_t j,
               std::int64_t storage_pos, const std::vector<std::int64_t>& special_cols) {
  const bool special = [&] {
    for (auto c : special_cols) {
      if (c == j) return true;
    }
    return false;
  }();
  switch (s.values) {
  case ValueFamily::kNormal:
    return static_cast<float>(rng.normal());
  case ValueFamily::kZeros:
    return 0.0f;
  case ValueFamily::kSubnormals:
    // Even rows: subnormals only; odd rows: one ordinary value among subnormals.
    if (r % 2 == 1 && special) return static_cast<float>(rng.normal());
    return static_cast<float>(sign(rng) * subnormal_magnitude(rng, s.dtype));
  case ValueFamily::kMixedMagnitudes: {
    const int span = s.dtype == DType::kFloat16 ? 4 : 6; // fp16 max is 65504
    const int k = static_cast<int>(rng.next() % static_cast<std::uint64_t>(2 * span + 1)) - span;
    return static_cast<float>(sign(rng) * (1.0 + 9.0 * rng.uniform()) * kPow10[k + 6]);
  }
  case ValueFamily::kBig1e19:
    return special ? static_cast<float>(sign(rng) * 1e19) : static_cast<float>(rng.normal());
  case ValueFamily::kBig2e19:
    return special ? static_cast<float>(sign(rng) * 2e19) : static_cast<float>(rng.normal());
  case ValueFamily::kNanInf:
    if (special) {
      switch (r % 4) {
      case 0:
        return std::numeric_limits<float>::quiet_NaN();
      case 1:
        return std::numeric_limits<float>::infinity();
      case 2:
        return -std::numeric_limits<float>::infinity();
      default:
        break;
      }
    }
    return static_cast<float>(rng.normal());
  case ValueFamily::kConstantRows:
    return 0.0f; // replaced per row by the caller
  case ValueFamily::kHeavyTailed: {
    const double denom = rng.uniform() + (s.dtype == DType::kFloat16 ? 1e-2 : 1e-4);
    return static_cast<float>(rng.normal() / denom);
  }
  case ValueFamily::kTinyRow:
    return (j % 2 == 0) ? 1e-8f : -1e-8f;
  case ValueFamily::kConstant300:
    return 300.0f;
  case ValueFamily::kZeroAndSmallRow:
    return (r % 2 == 0) ? 0.0f : 1e-3f;
  case ValueFamily::kArange:
    return static_cast<float>(storage_pos) + 0.5f;
  case ValueFamily::kOutlierChannels: {
    const bool outlier = (mix64(s.seed ^ static_cast<std::uint64_t>(j)) & 63) == 0;
    return static_cast<float>(rng.normal() * (outlier ? 300.0 : 1.0));
  }
  case ValueFamily::kRowScales: {
    const int lo = s.dtype == DType::kFloat16 ? -7 : -30, hi = s.dtype == DType::kFloat16 ? 4 : 19;
    const int k = lo + static_cast<int>(mix64(s.seed + 0x9e37u * static_cast<std::uint64_t>(r)) %
                                        static_cast<std::uint64_t>(hi - lo + 1));
    return static_cast<float>(rng.normal() * std::pow(10.0, k));
  }
  }
  return 0.0f;
}

// Per-row columns that get the family's special value: {1, 2, 8} entries by row for big_1e19
// (sums of squares finite for 1 or 2 entries of 1e38, Inf in every order for 8), one otherwise.
std::vector<std::int64_t> special_columns(const CaseSpec& s, Rng& rng, std::int64_t r) {
  std::int64_t count = 1;
  if (s.values == ValueFamily::kBig1e19) count = std::array<std::int64_t, 3>{1, 2, 8}[r % 3];
  std::vector<std::int64_t> cols;
  for (std::int64_t i = 0; i < count && i < s.h; ++i) {
    cols.push_back(static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(s.h)));
  }
  return cols;
}

HostTensor make_weight(const CaseSpec& s, Rng& rng) {
  const std::int64_t h = std::max<std::int64_t>(s.h, 0);
  HostTensor w = HostTensor::strided(static_cast<std::size_t>(s.weight_offset + h), to_dl(s.dtype),
                                     {h}, {1}, s.weight_offset);
  fill_storage_nan(w);
  for (std::int64_t j = 0; j < h; ++j) {
    if (s.weight == WeightFamily::kOnes) {
      w.set(j, 1.0f);
      continue;
    }
    // Signed, log-uniform magnitudes 1e-3..10 (decade then mantissa), exact zeros in some lanes.
    const bool zero = j % 16 == 5 || rng.uniform() < 0.05;
    const double decade = std::array<double, 4>{1e-3, 1e-2, 1e-1, 1.0}[rng.next() % 4];
    const double v = sign(rng) * decade * (1.0 + 9.0 * rng.uniform());
    w.set(j, zero ? 0.0f : static_cast<float>(v));
  }
  return w;
}

} // namespace

XViewLayout x_view_layout(const CaseSpec& s) {
  return op::rows_view_layout(s.outer, s.h, s.layout, s.gap, s.offset);
}

CaseInputs materialize(const CaseSpec& s) {
  if (s.h < 0 || s.offset < 0 || s.weight_offset < 0 || s.gap < 0) {
    throw std::invalid_argument(
        fmt::format("case '{}': h, offset, weight_offset and gap must be >= 0", s.name));
  }
  for (auto d : s.outer) {
    if (d < 0) throw std::invalid_argument(fmt::format("case '{}': negative outer dim", s.name));
  }
  Rng rng(s.seed);
  CaseInputs in{op::make_rows_view(s.dtype, s.outer, s.h, s.layout, s.gap, s.offset), HostTensor{},
                s.eps};
  const std::int64_t rows = s.rows();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto cols = special_columns(s, rng, r);
    const float row_const = static_cast<float>(rng.normal());
    for (std::int64_t j = 0; j < s.h; ++j) {
      const std::int64_t flat = r * s.h + j;
      const float v = s.values == ValueFamily::kConstantRows
                          ? row_const
                          : value_at(s, rng, r, j, in.x.element_offset(flat) - s.offset, cols);
      in.x.set(flat, v);
    }
  }
  in.weight = make_weight(s, rng);
  const DType other = s.dtype == DType::kFloat32 ? DType::kFloat16 : DType::kFloat32;
  switch (s.invalid) {
  case InvalidKind::kNone:
  case InvalidKind::kZeroWidth: // the spec itself has h == 0
    break;
  case InvalidKind::kWeightShape:
    in.weight = HostTensor::zeros({s.h + 1}, s.dtype);
    break;
  case InvalidKind::kDtypeMismatch:
    in.weight = in.weight.to(to_dl(other));
    break;
  case InvalidKind::kUnsupportedDtype:
    in.x = in.x.to(kDLFloat64Type);
    in.weight = in.weight.to(kDLFloat64Type);
    break;
  case InvalidKind::kDeviceMismatch:
    in.x = in.x.with_device(cuda_device(0));
    in.weight = in.weight.with_device(cuda_device(1));
    break;
  case InvalidKind::kNonStrided:
    in.x = in.x.with_layout(TensorLayout::kSparse);
    break;
  case InvalidKind::kScalarX:
    in.x = HostTensor::zeros({}, s.dtype);
    break;
  case InvalidKind::kEpsZero:
    in.eps = EpsScalar::of(0.0);
    break;
  case InvalidKind::kEpsNegative:
    in.eps = EpsScalar::of(-1e-5);
    break;
  case InvalidKind::kEpsNan:
    in.eps = EpsScalar::of(std::numeric_limits<double>::quiet_NaN());
    break;
  case InvalidKind::kEpsInf:
    in.eps = EpsScalar::of(std::numeric_limits<double>::infinity());
    break;
  case InvalidKind::kEpsUnderflowFp32:
    in.eps = EpsScalar::of(1e-50);
    break;
  case InvalidKind::kEpsOverflowFp32:
    in.eps = EpsScalar::of(1e39);
    break;
  case InvalidKind::kEpsBool:
    in.eps = EpsScalar::other("bool");
    break;
  case InvalidKind::kEpsHugeInt:
    in.eps = EpsScalar::integer_text("1" + std::string(400, '0'));
    break;
  }
  return in;
}

} // namespace kloop::rmsnorm
