// row_softmax/1 as an operator (kernels/operator.h): its declaration and the registered instance.
// y[..., j] = exp(x[..., j] - max(x[..., :])) / sum(exp(x[..., :] - max(x[..., :]))), computed in
// float32 and cast back to x's dtype (contract.cpp states the rule, reference.h the semantics of
// -inf, +inf and NaN, which are PyTorch's).
#pragma once

#include "kernels/operator.h"

namespace kloop::softmax {

// x: input, batched [rows..., N], row stride exposed; y: output, batched [rows..., N] of x's
// dtype; no scalar, no broadcast tensor. Its ABI is (const T* x, T* y, long long rows, int N,
// long long x_row_stride, long long y_row_stride).
const op::Declaration& declaration();

// The registered operator (kernels/registry.h).
const op::Operator& operator_instance();

} // namespace kloop::softmax
