// materialize(CaseSpec) of row_softmax/1: the x view of a case, bit-identically on every machine
// (IEEE basic arithmetic on the shared PRNG's output; decimal powers from literals, no libm).
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/softmax/cases.h"

namespace kloop::softmax {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
// Exact decimal powers 1e-6 .. 1e6 as double literals (deterministic, no pow()).
constexpr double kPow10[] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6};

double pow10(int k) { // k in [-6, 6]
  return kPow10[k + 6];
}

double sign(op::Rng& rng) {
  return (rng.next() & 1) ? -1.0 : 1.0;
}

// The largest finite value of the dtype.
double dtype_max(DType dtype) {
  switch (dtype) {
  case DType::kFloat16:
    return 65504.0;
  case DType::kBFloat16:
    return 0x1.fep127; // 3.3895e38
  case DType::kFloat32:
    break;
  }
  return std::numeric_limits<float>::max();
}

// What one row's values share, drawn before its elements.
struct RowDraw {
  std::int64_t row = 0;
  std::int64_t special = 0;  // a column of the row (NaN, +inf, the hot element, ...)
  std::int64_t special2 = 0; // another one (the -inf beside a +inf)
  double constant = 0;       // the row's normal
  double span = 0;           // ascending / descending rows: x spans this much
  int scale_k = 0;           // kRowScales: the row's decade
};

RowDraw draw_row(const CaseSpec& s, op::Rng& rng, std::int64_t r) {
  RowDraw d;
  d.row = r;
  d.special = s.n > 0 ? rng.between(0, s.n - 1) : 0;
  d.special2 = s.n > 0 ? rng.between(0, s.n - 1) : 0;
  d.constant = rng.normal();
  d.span = 4.0 + 12.0 * rng.uniform();
  d.scale_k = static_cast<int>(op::mix64(s.seed + 0x9e37u * static_cast<std::uint64_t>(r)) % 7) - 3;
  return d;
}

double subnormal_magnitude(op::Rng& rng, DType dtype) {
  // Largest subnormal: float32/bfloat16 2^-126 (1.18e-38), float16 2^-14 (6.1e-5).
  const double top = dtype == DType::kFloat16 ? 0x1.0p-14 : 0x1.0p-126;
  return top * (0.01 + 0.98 * rng.uniform());
}

// Row r mod 5: 0, 1, -1e4, 1e4, or the row's normal.
double constant_of(const RowDraw& d) {
  switch (d.row % 5) {
  case 0:
    return 0.0;
  case 1:
    return 1.0;
  case 2:
    return -1e4;
  case 3:
    return 1e4;
  default:
    return d.constant;
  }
}

// The non-finite placements of kNanInf by row r mod 4 (elements not placed: normals).
float nan_inf_at(const RowDraw& d, std::int64_t j, double normal) {
  switch (d.row % 4) {
  case 0:
    if (j == d.special) return kNan;
    break;
  case 1:
    if (j == d.special) return kInf;
    break;
  case 2:
    if (j == d.special) return kInf;
    if (j == d.special2) return -kInf;
    break;
  default:
    if (j == d.special) return -kInf;
    break;
  }
  return static_cast<float>(normal);
}

float value_at(const CaseSpec& s, op::Rng& rng, const RowDraw& d, std::int64_t j) {
  const std::uint64_t flat = static_cast<std::uint64_t>(d.row * s.n + j);
  switch (s.values) {
  case ValueFamily::kNormal:
    return static_cast<float>(rng.normal());
  case ValueFamily::kLogits:
    return static_cast<float>(8.0 * rng.normal());
  case ValueFamily::kLargePositive:
    return static_cast<float>(1e4 + 4.0 * rng.normal());
  case ValueFamily::kLargeNegative:
    return static_cast<float>(-1e4 + 4.0 * rng.normal());
  case ValueFamily::kNearMax:
    return static_cast<float>(sign(rng) * (0.5 + 0.5 * rng.uniform()) * dtype_max(s.dtype));
  case ValueFamily::kConstantRows:
    return static_cast<float>(constant_of(d));
  case ValueFamily::kCausalMask:
    return j > d.row % s.n ? -kInf : static_cast<float>(rng.normal());
  case ValueFamily::kNegInfElements:
    return (op::mix64(s.seed ^ op::mix64(flat)) & 3) == 0 ? -kInf
                                                          : static_cast<float>(rng.normal());
  case ValueFamily::kAllNegInf:
    return d.row % 2 == 0 ? -kInf : static_cast<float>(rng.normal());
  case ValueFamily::kNanInf:
    return nan_inf_at(d, j, rng.normal());
  case ValueFamily::kAscending:
    return static_cast<float>(d.span * (static_cast<double>(j) / static_cast<double>(s.n) - 0.5));
  case ValueFamily::kDescending:
    return static_cast<float>(d.span * (0.5 - static_cast<double>(j) / static_cast<double>(s.n)));
  case ValueFamily::kOneHot:
    if (j == d.special) return s.dtype == DType::kFloat16 ? 12.0f : 30.0f;
    return static_cast<float>(0.1 * rng.normal());
  case ValueFamily::kSubnormals:
    return static_cast<float>(sign(rng) * subnormal_magnitude(rng, s.dtype));
  case ValueFamily::kMixedMagnitudes: {
    const int lo = s.dtype == DType::kFloat16 ? -4 : -6, hi = s.dtype == DType::kFloat16 ? 3 : 4;
    const int k = static_cast<int>(rng.between(lo, hi));
    return static_cast<float>(sign(rng) * (1.0 + 9.0 * rng.uniform()) * pow10(k));
  }
  case ValueFamily::kHeavyTailed: {
    const double denom = rng.uniform() + (s.dtype == DType::kFloat16 ? 1e-2 : 1e-4);
    return static_cast<float>(rng.normal() / denom);
  }
  case ValueFamily::kRowScales:
    return static_cast<float>(rng.normal() * pow10(d.scale_k));
  case ValueFamily::kRowRamp:
    return static_cast<float>(d.constant + static_cast<double>(j % 16) * 0.25);
  }
  return 0.0f;
}

} // namespace

op::CallArgs materialize(const CaseSpec& s) {
  if (s.n < 0 || s.offset < 0 || s.gap < 0)
    throw std::invalid_argument(fmt::format("case '{}': n, offset and gap must be >= 0", s.name));
  for (auto d : s.outer)
    if (d < 0) throw std::invalid_argument(fmt::format("case '{}': negative outer dim", s.name));
  op::Rng rng(s.seed);
  HostTensor x = op::make_rows_view(s.dtype, s.outer, s.n, s.layout, s.gap, s.offset);
  const std::int64_t rows = s.rows();
  for (std::int64_t r = 0; r < rows && s.n > 0; ++r) {
    const RowDraw d = draw_row(s, rng, r);
    HostTensor xr = x.as_strided({s.n}, {x.strides().back()}, x.row_col_offset(r, 0));
    for (std::int64_t j = 0; j < s.n; ++j)
      xr.set(j, value_at(s, rng, d, j));
  }
  switch (s.invalid) {
  case InvalidKind::kNone:
    break;
  case InvalidKind::kNonStrided:
    x = x.with_layout(TensorLayout::kSparse);
    break;
  case InvalidKind::kScalarX:
    x = HostTensor::zeros({}, s.dtype);
    break;
  case InvalidKind::kFloat64:
    x = x.to(kDLFloat64Type);
    break;
  case InvalidKind::kInt32:
    x = HostTensor::zeros(x.shape(), kDLInt32Type);
    break;
  case InvalidKind::kUnsupportedDevice:
    x = x.with_device(DLDevice{kDLMetal, 0});
    break;
  }
  return {{std::move(x)}, {}};
}

} // namespace kloop::softmax
