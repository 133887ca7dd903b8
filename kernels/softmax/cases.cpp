// CaseSpec serialisation of row_softmax/1 (the PRNG and the layouts are kernels/case_layout.h's).
#include "kernels/softmax/cases.h"

#include <array>
#include <utility>

#include <fmt/format.h>

namespace kloop::softmax {

namespace {

constexpr std::array<std::pair<ValueFamily, std::string_view>, 18> kValues{{
    {ValueFamily::kNormal, "normal"},
    {ValueFamily::kLogits, "logits"},
    {ValueFamily::kLargePositive, "large_positive"},
    {ValueFamily::kLargeNegative, "large_negative"},
    {ValueFamily::kNearMax, "near_max"},
    {ValueFamily::kConstantRows, "constant_rows"},
    {ValueFamily::kCausalMask, "causal_mask"},
    {ValueFamily::kNegInfElements, "neg_inf_elements"},
    {ValueFamily::kAllNegInf, "all_neg_inf"},
    {ValueFamily::kNanInf, "nan_inf"},
    {ValueFamily::kAscending, "ascending"},
    {ValueFamily::kDescending, "descending"},
    {ValueFamily::kOneHot, "one_hot"},
    {ValueFamily::kSubnormals, "subnormals"},
    {ValueFamily::kMixedMagnitudes, "mixed_magnitudes"},
    {ValueFamily::kHeavyTailed, "heavy_tailed"},
    {ValueFamily::kRowScales, "row_scales"},
    {ValueFamily::kRowRamp, "row_ramp"},
}};
constexpr std::array<std::pair<InvalidKind, std::string_view>, 6> kInvalids{{
    {InvalidKind::kNone, "none"},
    {InvalidKind::kNonStrided, "non_strided"},
    {InvalidKind::kScalarX, "scalar_x"},
    {InvalidKind::kFloat64, "float64"},
    {InvalidKind::kInt32, "int32"},
    {InvalidKind::kUnsupportedDevice, "unsupported_device"},
}};

} // namespace

std::string_view value_family_name(ValueFamily family) {
  return op::enum_name(kValues, family);
}
std::string_view invalid_kind_name(InvalidKind kind) {
  return op::enum_name(kInvalids, kind);
}

std::int64_t CaseSpec::rows() const {
  std::int64_t r = 1;
  for (auto d : outer)
    r *= d;
  return r;
}

std::int64_t CaseSpec::numel() const {
  return rows() * n;
}

nlohmann::json CaseSpec::to_json() const {
  return {{"name", name},
          {"family", family},
          {"dtype", dtype_name(dtype)},
          {"outer", outer},
          {"n", n},
          {"layout", op::layout_kind_name(layout)},
          {"gap", gap},
          {"offset", offset},
          {"values", value_family_name(values)},
          {"invalid", invalid_kind_name(invalid)},
          {"seed", seed}};
}

CaseSpec CaseSpec::from_json(const nlohmann::json& j) {
  const op::SpecFields f(j);
  CaseSpec s;
  s.name = f.text("name");
  s.family = f.text("family");
  s.dtype = f.dtype("dtype");
  s.outer = f.dims("outer");
  s.n = f.integer("n");
  s.layout = f.choice(op::kLayoutKindNames, "layout");
  s.gap = f.integer("gap");
  s.offset = f.integer("offset");
  s.values = f.choice(kValues, "values");
  s.invalid = f.choice(kInvalids, "invalid");
  s.seed = f.seed("seed");
  return s;
}

std::string describe_inputs(const CaseSpec& s) {
  const op::RowsViewLayout v = op::rows_view_layout(s.outer, s.n, s.layout, s.gap, s.offset);
  std::string out = fmt::format(
      "  x: {}, outer shape {}, N {}, layout {}: shape {}, strides {} (elements), storage offset "
      "{}",
      dtype_name(s.dtype), op::dims_text(s.outer), s.n, op::layout_kind_name(s.layout),
      op::dims_text(v.shape), op::dims_text(v.strides), v.offset);
  if (s.layout == LayoutKind::kSlicedGaps) out += fmt::format(", gap {}", s.gap);
  out += fmt::format("\n  values: {}\n", value_family_name(s.values));
  if (s.invalid != InvalidKind::kNone)
    out += fmt::format("  an invalid call ({}): it must raise the declared error\n",
                       invalid_kind_name(s.invalid));
  return out;
}

} // namespace kloop::softmax
