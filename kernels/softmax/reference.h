// The CPU reference of row_softmax/1 and its declared errors.
//
// Semantics: PyTorch's torch.softmax(x, dim=-1) for float32, float16 and bfloat16 x, as its kernels
// compute it: aten/src/ATen/native/cpu/SoftMaxKernel.cpp `_vec_softmax_lastdim` (pytorch/pytorch
// at 029586da: the row max by vec::maximum, then exp(x - max), their sum and a multiply by
// 1 / sum; its BFloat16 specialisation converts the row to float32 first) and
// aten/src/ATen/native/cuda/PersistentSoftmax.cuh `softmax_warp_forward` (at 072997da: max by
// comparison, sum of exp(x - max), then exp(x - max) / sum, float32 accumulation for 16-bit types).
// Either way the non-finite cases follow from IEEE arithmetic on that formula, row by row:
//   - a row with a NaN anywhere: every output of the row is NaN (exp(NaN - max) is NaN, so the sum
//     is NaN, whichever max the NaN leaves);
//   - a row with a +inf (and no NaN): max = +inf, x - max is NaN for the +inf elements and -inf
//     for the others, so the sum is NaN and every output of the row is NaN;
//   - a row whose every element is -inf: max = -inf, x - max = -inf - (-inf) = NaN: every output of
//     the row is NaN;
//   - a -inf element of a row with a finite max: exp(-inf) = 0 exactly, so its output is exactly
//     0 and the other elements are the softmax of the finite ones;
//   - otherwise (finite rows): outputs in [0, 1], the row summing to 1 up to rounding; no overflow
//     for any magnitude (x - max <= 0); an element far below the max underflows to 0 in the
//     output dtype (about 104 below it for float32, 17 + ln(N) for float16).
// Shapes: x of rank >= 1, the last dimension N >= 0 and any strides (views, expanded and
// transposed tensors included); N == 0 or an empty batch gives an empty output of x's shape, as
// torch.softmax does. Where this contract differs from torch.softmax: a 0-d x is a declared error
// here (torch treats it as one element and returns 1), and only float32, float16 and bfloat16
// are accepted (torch also takes float64).
//
// The reference computes in float64 (max, x - max, exp, the sum and the division) and rounds the
// result to float32 and then, for float16/bfloat16, to x's dtype (round to nearest even both
// times, the final cast of an ideal float32 kernel), so its own error is negligible next to the
// contract's tolerance, which admits an honest float32 kernel's errors (contract.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/call.h"
#include "kernels/tensor.h"

namespace kloop::softmax {

// Declared error codes (the contract's "errors" list, in check order). Persisted in gate
// evidence: values are fixed and never reused.
enum class ErrorCode : int {
  kNonStridedLayout = 1,  // x is not an ordinary strided tensor
  kBadRank = 2,           // x.ndim < 1
  kUnsupportedDtype = 3,  // x.dtype not float16/bfloat16/float32
  kUnsupportedDevice = 4, // device type not cpu or cuda
};
inline constexpr int kErrorCodes = 4;
std::string_view error_code_name(ErrorCode code); // "non_strided_layout", "bad_rank", ...
std::optional<ErrorCode> parse_error_code(std::string_view name);

// The problem size of a valid call, or the declared error of an invalid one.
struct Validation {
  std::optional<op::DeclaredError> error;
  std::int64_t rows = 0; // product of x.shape[:-1] (1 for a 1-d x)
  std::int64_t n = 0;    // x.shape[-1] (0 allowed: an empty call)
  bool ok() const { return !error.has_value(); }
};

// The contract's checks in order (layout, rank, dtype, device). Never throws.
Validation validate(const HostTensor& x);

// The softmax of a validated x: a fresh contiguous tensor of x's shape and dtype, labelled with
// x's device, computed row by row in float64 and rounded as the header describes.
HostTensor reference_compute(const HostTensor& x);

// The float64 softmax of one row of `n` values into `out` (the semantics above; n >= 1).
void softmax_row(const double* values, std::int64_t n, double* out);

} // namespace kloop::softmax
