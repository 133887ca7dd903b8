// The trusted GPU reference kernel of weighted_rmsnorm/1: deliberately simple and obviously
// correct. One block per row (a 1-D grid of at most 65535 blocks; each block loops over rows, so
// any row count works), any x layout (outer dims given as shape/strides, any last-dim stride),
// any weight stride, fp32 accumulation, and the seed's operation order:
//   scale = 1 / sqrt(sum(xf * xf) / H + eps32);  y = float_to_T_rne((xf * scale) * wf).
// It is what every call outside a candidate's dispatch predicate runs, and it is cross-checked
// against the CPU reference (tests/gpu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace kloop::gpu {

inline constexpr int kRefMaxOuterDims = 8;

// Where the elements of one call live. Strides are in elements; pointers address element 0.
struct RefGeometry {
  long long rows = 0;
  int h = 0;
  int outer_ndim = 0; // number of outer dims after dropping size-1 dims (<= kRefMaxOuterDims)
  long long outer_shape[kRefMaxOuterDims] = {};
  long long outer_stride[kRefMaxOuterDims] = {};
  long long x_last_stride = 1;
  long long w_stride = 1;
  long long y_row_stride = 0; // y is [rows, H] with this row stride and unit column stride
};

// Launches the reference kernel on `stream` and returns cudaGetLastError() right after the
// launch (no synchronisation). rows == 0 launches nothing.
cudaError_t launch_reference(DType dtype, const void* x, const void* w, void* y,
                             const RefGeometry& g, float eps32, cudaStream_t stream);

} // namespace kloop::gpu
