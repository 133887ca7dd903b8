// The trusted GPU reference kernel of row_softmax/1 (kernels/gpu_reference.h): deliberately
// simple and obviously correct. One block per row (a 1-D grid of at most 65535 blocks; each block
// loops over rows, so any row count works), any x layout (every outer dim with its stride, any
// last-dim stride), float32 arithmetic in the contract's order, three passes over the row:
//   m = max(xf) (a NaN makes m NaN), s = sum(expf(xf - m)), y = float_to_T_rne(expf(xf - m) / s).
// IEEE expf and division (no fast math); the non-finite semantics (reference.h) follow from the
// formula itself. Tensors: x = tensors[0], y = tensors[1] (contiguous [rows, N]); N = axes[0].
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gpu_reference.h"

namespace kloop::softmax {
namespace {

using op::RefArgs;

constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 65535;

__device__ float load_f(const float* p) {
  return *p;
}
__device__ float load_f(const __half* p) {
  return __half2float(*p);
}
__device__ float load_f(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
__device__ void store_f(float* p, float v) {
  *p = v;
}
__device__ void store_f(__half* p, float v) {
  *p = __float2half_rn(v);
}
__device__ void store_f(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

// max with NaN propagating: any NaN of the row makes the row max NaN.
__device__ float nan_max(float a, float b) {
  return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

// The block's reduction of `v` (every thread calls it; `op` 0: max, 1: sum); all threads get it.
__device__ float block_reduce(float v, float* partial, int op) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      partial[threadIdx.x] = op == 0 ? nan_max(partial[threadIdx.x], partial[threadIdx.x + s])
                                     : partial[threadIdx.x] + partial[threadIdx.x + s];
    __syncthreads();
  }
  const float r = partial[0];
  __syncthreads(); // partial[0] is read above before the next reduction overwrites partial
  return r;
}

template <typename T> __global__ void reference_softmax(RefArgs a) {
  __shared__ float partial[kThreads];
  const op::RefTensor& xt = a.tensors[0];
  const T* x = static_cast<const T*>(xt.data);
  T* y = static_cast<T*>(a.tensors[1].data);
  const long long n = a.axes[0];
  const long long x_last_stride = xt.strides[xt.ndim - 1];
  for (long long row = blockIdx.x; row < a.rows; row += gridDim.x) {
    // Row offset from the outer index (last outer dim varies fastest).
    long long rem = row, off = 0;
    for (int d = xt.ndim - 2; d >= 0; --d) {
      off += (rem % xt.shape[d]) * xt.strides[d];
      rem /= xt.shape[d];
    }
    const T* xr = x + off;
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      m = nan_max(m, load_f(xr + j * x_last_stride));
    m = block_reduce(m, partial, 0);
    float s = 0.f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      s += expf(load_f(xr + j * x_last_stride) - m);
    s = block_reduce(s, partial, 1);
    T* yr = y + row * n;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      store_f(yr + j, expf(load_f(xr + j * x_last_stride) - m) / s);
  }
}

const void* kernel_of(DType dtype) {
  switch (dtype) {
  case DType::kFloat32:
    return reinterpret_cast<const void*>(&reference_softmax<float>);
  case DType::kFloat16:
    return reinterpret_cast<const void*>(&reference_softmax<__half>);
  case DType::kBFloat16:
    return reinterpret_cast<const void*>(&reference_softmax<__nv_bfloat16>);
  }
  return nullptr;
}

op::RefLaunch launch_of(const RefArgs& a) {
  const long long blocks = a.rows < kMaxBlocks ? a.rows : kMaxBlocks;
  return {static_cast<unsigned>(blocks), kThreads, 0};
}

} // namespace

const op::GpuReference& gpu_reference() {
  static const op::GpuReference ref{&kernel_of, &launch_of};
  return ref;
}

} // namespace kloop::softmax
