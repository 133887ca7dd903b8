// CaseSpec serialisation and description (the PRNG and the layouts are kernels/case_layout.h's).
#include "kernels/rmsnorm/cases.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "kernels/case_layout.h"

namespace kloop::rmsnorm {

namespace {

using op::enum_name;
constexpr std::array<std::pair<ValueFamily, std::string_view>, 15> kValues{{
    {ValueFamily::kNormal, "normal"},
    {ValueFamily::kZeros, "zeros"},
    {ValueFamily::kSubnormals, "subnormals"},
    {ValueFamily::kMixedMagnitudes, "mixed_magnitudes"},
    {ValueFamily::kBig1e19, "big_1e19"},
    {ValueFamily::kBig2e19, "big_2e19"},
    {ValueFamily::kNanInf, "nan_inf"},
    {ValueFamily::kConstantRows, "constant_rows"},
    {ValueFamily::kHeavyTailed, "heavy_tailed"},
    {ValueFamily::kTinyRow, "tiny_row"},
    {ValueFamily::kConstant300, "constant_300"},
    {ValueFamily::kZeroAndSmallRow, "zero_and_small_row"},
    {ValueFamily::kArange, "arange"},
    {ValueFamily::kOutlierChannels, "outlier_channels"},
    {ValueFamily::kRowScales, "row_scales"},
}};
constexpr std::array<std::pair<WeightFamily, std::string_view>, 2> kWeights{{
    {WeightFamily::kRandomSigned, "random_signed"},
    {WeightFamily::kOnes, "ones"},
}};
constexpr std::array<std::pair<InvalidKind, std::string_view>, 16> kInvalids{{
    {InvalidKind::kNone, "none"},
    {InvalidKind::kWeightShape, "weight_shape"},
    {InvalidKind::kDtypeMismatch, "dtype_mismatch"},
    {InvalidKind::kUnsupportedDtype, "unsupported_dtype"},
    {InvalidKind::kDeviceMismatch, "device_mismatch"},
    {InvalidKind::kNonStrided, "non_strided"},
    {InvalidKind::kZeroWidth, "zero_width"},
    {InvalidKind::kScalarX, "scalar_x"},
    {InvalidKind::kEpsZero, "eps_zero"},
    {InvalidKind::kEpsNegative, "eps_negative"},
    {InvalidKind::kEpsNan, "eps_nan"},
    {InvalidKind::kEpsInf, "eps_inf"},
    {InvalidKind::kEpsUnderflowFp32, "eps_underflow_fp32"},
    {InvalidKind::kEpsOverflowFp32, "eps_overflow_fp32"},
    {InvalidKind::kEpsBool, "eps_bool"},
    {InvalidKind::kEpsHugeInt, "eps_huge_int"},
}};

} // namespace

std::string_view value_family_name(ValueFamily family) {
  return enum_name(kValues, family);
}
std::string_view weight_family_name(WeightFamily family) {
  return enum_name(kWeights, family);
}
std::string_view invalid_kind_name(InvalidKind kind) {
  return enum_name(kInvalids, kind);
}

std::int64_t CaseSpec::rows() const {
  std::int64_t r = 1;
  for (auto d : outer)
    r *= d;
  return r;
}

std::int64_t CaseSpec::numel() const {
  return rows() * h;
}

nlohmann::json CaseSpec::to_json() const {
  return {{"name", name},
          {"family", family},
          {"dtype", dtype_name(dtype)},
          {"outer", outer},
          {"h", h},
          {"layout", layout_kind_name(layout)},
          {"gap", gap},
          {"offset", offset},
          {"weight_offset", weight_offset},
          {"values", value_family_name(values)},
          {"weight", weight_family_name(weight)},
          {"eps", eps.to_json()},
          {"invalid", invalid_kind_name(invalid)},
          {"seed", seed}};
}

CaseSpec CaseSpec::from_json(const nlohmann::json& j) {
  const op::SpecFields f(j);
  CaseSpec s;
  s.name = f.text("name");
  s.family = f.text("family");
  s.outer = f.dims("outer");
  s.dtype = f.dtype("dtype");
  s.h = f.integer("h");
  s.layout = f.choice(op::kLayoutKindNames, "layout");
  s.gap = f.integer("gap");
  s.offset = f.integer("offset");
  s.weight_offset = f.integer("weight_offset");
  s.values = f.choice(kValues, "values");
  s.weight = f.choice(kWeights, "weight");
  s.eps = EpsScalar::from_json(f.at("eps"));
  s.invalid = f.choice(kInvalids, "invalid");
  s.seed = f.seed("seed");
  return s;
}

namespace {

std::string eps_text(const EpsScalar& e) {
  switch (e.kind) {
  case EpsScalar::Kind::kFloat:
    return op::value_text(e.value);
  case EpsScalar::Kind::kInt:
    return "the integer " + e.text;
  case EpsScalar::Kind::kOther:
    return "a " + e.text;
  }
  return "?";
}

} // namespace

std::string describe_inputs(const CaseSpec& s) {
  const XViewLayout v = x_view_layout(s);
  std::string out = fmt::format(
      "  x: {}, outer shape {}, H {}, layout {}: shape {}, strides {} (elements), storage offset "
      "{}",
      dtype_name(s.dtype), op::dims_text(s.outer), s.h, layout_kind_name(s.layout),
      op::dims_text(v.shape), op::dims_text(v.strides), v.offset);
  if (s.layout == LayoutKind::kSlicedGaps) out += fmt::format(", gap {}", s.gap);
  out += "\n";
  out += fmt::format("  values: {}; weight: {} (storage offset {}); eps {}\n",
                     value_family_name(s.values), weight_family_name(s.weight), s.weight_offset,
                     eps_text(s.eps));
  if (s.invalid != InvalidKind::kNone)
    out += fmt::format("  an invalid call ({}): it must raise the declared error\n",
                       invalid_kind_name(s.invalid));
  return out;
}

} // namespace kloop::rmsnorm
