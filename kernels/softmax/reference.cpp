// CPU reference of row_softmax/1 (reference.h): validation in the contract's order and the row
// softmax in float64.
#include "kernels/softmax/reference.h"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace kloop::softmax {

namespace {

constexpr std::array<std::string_view, kErrorCodes + 1> kErrorNames = {
    "", "non_strided_layout", "bad_rank", "unsupported_dtype", "unsupported_device",
};

op::DeclaredError err(ErrorCode code, std::string message) {
  return {std::string(error_code_name(code)), std::move(message)};
}

} // namespace

std::string_view error_code_name(ErrorCode code) {
  const int c = static_cast<int>(code);
  return c >= 1 && c <= kErrorCodes ? kErrorNames[c] : "unknown";
}

std::optional<ErrorCode> parse_error_code(std::string_view name) {
  for (int c = 1; c <= kErrorCodes; ++c)
    if (kErrorNames[c] == name) return static_cast<ErrorCode>(c);
  return std::nullopt;
}

Validation validate(const HostTensor& x) {
  Validation v;
  if (x.layout() != TensorLayout::kStrided) {
    v.error = err(ErrorCode::kNonStridedLayout,
                  "row_softmax: x must be an ordinary strided tensor; convert a sparse input with "
                  "to_dense() first");
    return v;
  }
  if (x.ndim() < 1) {
    v.error = err(ErrorCode::kBadRank,
                  "row_softmax: x must have at least 1 dimension [..., N] (softmax over the last "
                  "one); got a 0-d tensor: reshape it to [1]");
    return v;
  }
  if (!x.has_contract_dtype()) {
    v.error = err(ErrorCode::kUnsupportedDtype,
                  fmt::format("row_softmax: x dtype {} is not supported; use float16, bfloat16 or "
                              "float32",
                              dl_type_name(x.dl_type())));
    return v;
  }
  if (x.device().device_type != kDLCPU && x.device().device_type != kDLCUDA) {
    v.error = err(ErrorCode::kUnsupportedDevice,
                  fmt::format("row_softmax: device {} is not supported; use cpu or cuda",
                              device_name(x.device())));
    return v;
  }
  v.n = x.width();
  v.rows = x.rows();
  return v;
}

void softmax_row(const double* values, std::int64_t n, double* out) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  // The row max with NaN propagating (vec::maximum's rule; any NaN makes the row NaN anyway).
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isnan(values[j])) {
      m = kNan;
      break;
    }
    if (values[j] > m) m = values[j];
  }
  // exp(x - max) and the sum: NaN, +inf and all--inf rows come out NaN from the arithmetic itself
  // (NaN - m, inf - inf and -inf - (-inf) are NaN), a -inf element of a finite row exactly 0.
  double sum = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    out[j] = std::exp(values[j] - m);
    sum += out[j];
  }
  for (std::int64_t j = 0; j < n; ++j)
    out[j] /= sum;
}

HostTensor reference_compute(const HostTensor& x) {
  HostTensor y = HostTensor::zeros(x.shape(), x.dl_type()).with_device(x.device());
  const std::int64_t rows = x.rows();
  const std::int64_t n = x.width();
  if (rows == 0 || n == 0) return y;
  std::vector<double> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  const std::int64_t last_stride = x.strides().back();
  for (std::int64_t r = 0; r < rows; ++r) {
    // Row r as a 1-d view (x.get(r, j) would resolve every element through all dims).
    const HostTensor xr = x.as_strided({n}, {last_stride}, x.row_col_offset(r, 0));
    HostTensor yr = y.as_strided({n}, {1}, r * n);
    for (std::int64_t j = 0; j < n; ++j)
      in[j] = xr.get(j);
    softmax_row(in.data(), n, out.data());
    // float64 -> float32 -> T, each round to nearest even (HostTensor::set).
    for (std::int64_t j = 0; j < n; ++j)
      yr.set(j, static_cast<float>(out[j]));
  }
  return y;
}

} // namespace kloop::softmax
