// CPU reference of weighted_rmsnorm/1: the seed's validation order and float32 arithmetic.
#include "kernels/rmsnorm/reference.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace kloop::rmsnorm {

namespace {

constexpr std::array<std::string_view, 13> kErrorNames = {
    "",
    "non_strided_layout",
    "bad_rank",
    "bad_width",
    "weight_shape",
    "unsupported_dtype",
    "dtype_mismatch",
    "device_mismatch",
    "unsupported_device",
    "eps_not_number",
    "eps_too_large",
    "eps_not_finite_positive",
    "eps_fp32_not_finite_positive",
};

DeclaredError err(ErrorCode code, std::string message) {
  return {code, std::move(message)};
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return nlohmann::json(shape).dump();
}

} // namespace

std::string_view error_code_name(ErrorCode code) {
  const int c = static_cast<int>(code);
  return c >= 1 && c < static_cast<int>(kErrorNames.size()) ? kErrorNames[c] : "unknown";
}

std::optional<ErrorCode> parse_error_code(std::string_view name) {
  for (std::size_t c = 1; c < kErrorNames.size(); ++c) {
    if (kErrorNames[c] == name) return static_cast<ErrorCode>(c);
  }
  return std::nullopt;
}

nlohmann::json DeclaredError::to_json() const {
  return {{"code", error_code_name(code)}, {"message", message}};
}

Validation validate(const HostTensor& x, const HostTensor& weight, const EpsScalar& eps) {
  Validation v;
  auto fail = [&](ErrorCode code, std::string message) {
    v.error = err(code, std::move(message));
    return v;
  };
  if (x.layout() != TensorLayout::kStrided || weight.layout() != TensorLayout::kStrided) {
    return fail(ErrorCode::kNonStridedLayout,
                "weighted_rmsnorm: x and weight must be ordinary strided tensors; convert sparse "
                "inputs with to_dense() first");
  }
  if (x.ndim() < 1) {
    return fail(ErrorCode::kBadRank,
                "weighted_rmsnorm: x must have at least 1 dimension [..., H]; got a 0-d tensor");
  }
  const std::int64_t h = x.width();
  if (h <= 0) {
    return fail(ErrorCode::kBadWidth,
                fmt::format("weighted_rmsnorm: x's last dimension H must be > 0; x has shape {}",
                            shape_text(x.shape())));
  }
  if (weight.shape() != std::vector<std::int64_t>{h}) {
    return fail(ErrorCode::kWeightShape,
                fmt::format("weighted_rmsnorm: weight must have shape [{}] (x's last dimension); "
                            "got {}",
                            h, shape_text(weight.shape())));
  }
  if (!x.has_contract_dtype()) {
    return fail(ErrorCode::kUnsupportedDtype,
                fmt::format("weighted_rmsnorm: x dtype {} is not supported; use float16, "
                            "bfloat16 or float32",
                            dl_type_name(x.dl_type())));
  }
  if (!weight.has_contract_dtype() || weight.dtype() != x.dtype()) {
    return fail(ErrorCode::kDtypeMismatch,
                fmt::format("weighted_rmsnorm: weight dtype {} differs from x dtype {}; cast "
                            "weight to x's dtype",
                            dl_type_name(weight.dl_type()), dl_type_name(x.dl_type())));
  }
  if (!same_device(x.device(), weight.device())) {
    return fail(ErrorCode::kDeviceMismatch,
                fmt::format("weighted_rmsnorm: x is on {} but weight is on {}; move both to one "
                            "device",
                            device_name(x.device()), device_name(weight.device())));
  }
  if (x.device().device_type != kDLCPU && x.device().device_type != kDLCUDA) {
    return fail(ErrorCode::kUnsupportedDevice,
                fmt::format("weighted_rmsnorm: device {} is not supported; use cpu or cuda",
                            device_name(x.device())));
  }
  double eps_value = 0;
  switch (eps.kind) {
  case EpsScalar::Kind::kOther:
    return fail(ErrorCode::kEpsNotNumber,
                fmt::format("weighted_rmsnorm: eps must be an ordinary numeric scalar (float or "
                            "int); got {}",
                            eps.text));
  case EpsScalar::Kind::kInt: {
    errno = 0;
    eps_value = std::strtod(eps.text.c_str(), nullptr);
    if (std::isinf(eps_value)) {
      return fail(ErrorCode::kEpsTooLarge,
                  fmt::format("weighted_rmsnorm: eps is too large to convert to float ({} "
                              "digits); pass a small positive number",
                              eps.text.size()));
    }
    break;
  }
  case EpsScalar::Kind::kFloat:
    eps_value = eps.value;
    break;
  }
  if (!std::isfinite(eps_value) || eps_value <= 0) {
    return fail(
        ErrorCode::kEpsNotFinitePositive,
        fmt::format("weighted_rmsnorm: eps must be finite and positive; got {}", eps.describe()));
  }
  const float eps32 = static_cast<float>(eps_value); // round to nearest even
  if (!std::isfinite(eps32) || eps32 <= 0) {
    return fail(ErrorCode::kEpsFp32NotFinitePositive,
                fmt::format("weighted_rmsnorm: eps {} must stay finite and positive in float32 "
                            "(it rounds to {}); use a value between about 1.4e-45 and 3.4e38",
                            eps.describe(), eps32));
  }
  v.eps32 = eps32;
  v.h = h;
  v.rows = x.rows();
  return v;
}

float row_sum_of_squares(const float* values, std::int64_t n) {
  if (n <= 8) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      s += values[i] * values[i];
    return s;
  }
  const std::int64_t half = n / 2;
  return row_sum_of_squares(values, half) + row_sum_of_squares(values + half, n - half);
}

HostTensor reference_compute(const HostTensor& x, const HostTensor& weight, float eps32) {
  HostTensor y = HostTensor::zeros(x.shape(), x.dl_type()).with_device(x.device());
  const std::int64_t rows = x.rows();
  const std::int64_t h = x.width();
  std::vector<float> wf(static_cast<std::size_t>(h));
  for (std::int64_t j = 0; j < h; ++j)
    wf[j] = weight.get(j);
  std::vector<float> xf(static_cast<std::size_t>(h));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < h; ++j)
      xf[j] = x.get(r * h + j);
    const float ms = row_sum_of_squares(xf.data(), h) / static_cast<float>(h);
    const float scale = 1.0f / std::sqrt(ms + eps32);
    for (std::int64_t j = 0; j < h; ++j)
      y.set(r * h + j, (xf[j] * scale) * wf[j]);
  }
  return y;
}

ReferenceResult reference(const HostTensor& x, const HostTensor& weight, const EpsScalar& eps) {
  Validation v = validate(x, weight, eps);
  if (!v.ok()) return {std::nullopt, std::move(v.error)};
  return {reference_compute(x, weight, v.eps32), std::nullopt};
}

} // namespace kloop::rmsnorm
