// weighted_rmsnorm/1 as an operator (kernels/operator.h): its declaration and the registered
// instance. y[..., j] = x[..., j] * rsqrt(mean(x[..., :]^2) + eps) * weight[j].
#pragma once

#include "kernels/operator.h"

namespace kloop::rmsnorm {

// x: input, batched [rows..., H], row stride exposed; weight: input, broadcast [H] (contiguous);
// y: output, batched [rows..., H]; eps: float32 scalar. Its ABI is the contract's eight
// parameters (const T* x, const T* weight, T* y, long long rows, int H, long long x_row_stride,
// long long y_row_stride, float eps).
const op::Declaration& declaration();

// The registered operator (kernels/registry.h).
const op::Operator& operator_instance();

} // namespace kloop::rmsnorm
