// The CPU reference of weighted_rmsnorm/1 with exactly the seed's semantics and validation:
//   xf, wf = float32(x), float32(weight)
//   y = ((xf * rsqrt(mean(xf * xf, dim=-1) + float32(eps))) * wf).to(x.dtype)
// Every invalid call yields a declared error (a code and a message naming the argument and the
// fix), in the seed's check order. `validate` is the same check the trusted wrapper runs before
// dispatch, so the reference path and the fast path reject identical inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kernels/call.h"
#include "kernels/tensor.h"

namespace kloop::rmsnorm {

// Declared error codes. Persisted in gate evidence: values are fixed and never reused.
enum class ErrorCode : int {
  kNonStridedLayout = 1,          // x or weight is not an ordinary strided tensor
  kBadRank = 2,                   // x.ndim < 1
  kBadWidth = 3,                  // H = x.shape[-1] <= 0
  kWeightShape = 4,               // weight.shape != [H]
  kUnsupportedDtype = 5,          // x.dtype not float16/bfloat16/float32
  kDtypeMismatch = 6,             // weight.dtype != x.dtype
  kDeviceMismatch = 7,            // x and weight on different devices
  kUnsupportedDevice = 8,         // device type not cpu or cuda
  kEpsNotNumber = 9,              // eps is not a float or an int (bool, string, tensor, ...)
  kEpsTooLarge = 10,              // an int eps that does not fit a double (Python OverflowError)
  kEpsNotFinitePositive = 11,     // eps is NaN, Inf, zero or negative
  kEpsFp32NotFinitePositive = 12, // float32(eps) is Inf or zero (e.g. 1e39, 1e-50)
};
std::string_view error_code_name(ErrorCode code); // "non_strided_layout", "bad_rank", ...
std::optional<ErrorCode> parse_error_code(std::string_view name);

struct DeclaredError {
  ErrorCode code = ErrorCode::kBadRank;
  std::string message;            // names the argument, the cause and the fix
  nlohmann::json to_json() const; // {"code": name, "message": ...}
  // The operator interface's form (kernels/call.h): the code by name.
  operator op::DeclaredError() const { return {std::string(error_code_name(code)), message}; }
};

// The eps argument as a Python-like tagged scalar (kernels/call.h).
using EpsScalar = op::ScalarArg;

// Result of validation: either an error, or the float32 eps and the [rows, H] problem size.
struct Validation {
  std::optional<DeclaredError> error;
  float eps32 = 0;
  std::int64_t rows = 0;
  std::int64_t h = 0;
  bool ok() const { return !error.has_value(); }
};

// The seed's checks in the seed's order. Never throws for bad input.
Validation validate(const HostTensor& x, const HostTensor& weight, const EpsScalar& eps);

struct ReferenceResult {
  std::optional<HostTensor> output; // contiguous, x's shape and dtype, fresh storage, CPU label
                                    // copied from x's device
  std::optional<DeclaredError> error;
};

// validate() and then the reference computation. Row sums use float32 pairwise summation (blocks
// of 8 summed sequentially, then combined pairwise), which is torch's CPU cascade order in spirit;
// the contract's tolerances cover any fp32 reduction order.
ReferenceResult reference(const HostTensor& x, const HostTensor& weight, const EpsScalar& eps);

// The computation only, for already validated inputs: writes y (x's shape, contiguous) from x,
// weight and eps32. Exposed so that adapters (e.g. a GPU worker's reference route) reuse it.
HostTensor reference_compute(const HostTensor& x, const HostTensor& weight, float eps32);

// float32 pairwise sum of xf*xf over one row (the reduction used by reference_compute).
float row_sum_of_squares(const float* values, std::int64_t n);

} // namespace kloop::rmsnorm
