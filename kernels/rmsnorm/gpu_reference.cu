// The trusted GPU reference kernel of weighted_rmsnorm/1 (kernels/gpu_reference.h): deliberately
// simple and obviously correct. One block per row (a 1-D grid of at most 65535 blocks; each block
// loops over rows, so any row count works), any x layout (every outer dim with its stride, any
// last-dim stride), any weight stride, fp32 accumulation, and the seed's operation order:
//   scale = 1 / sqrt(sum(xf * xf) / H + eps32);  y = float_to_T_rne((xf * scale) * wf).
// Tensors: x = tensors[0], weight = tensors[1], y = tensors[2] (contiguous [rows, H]); H =
// axes[0]; eps32 = scalars[0].
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gpu_reference.h"

namespace kloop::rmsnorm {
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

template <typename T> __global__ void reference_rmsnorm(RefArgs a) {
  __shared__ float partial[kThreads];
  const op::RefTensor& xt = a.tensors[0];
  const T* x = static_cast<const T*>(xt.data);
  const T* w = static_cast<const T*>(a.tensors[1].data);
  T* y = static_cast<T*>(a.tensors[2].data);
  const int h = static_cast<int>(a.axes[0]);
  const long long x_last_stride = xt.strides[xt.ndim - 1];
  const long long w_stride = a.tensors[1].strides[0];
  const float eps = static_cast<float>(a.scalars[0]);
  for (long long row = blockIdx.x; row < a.rows; row += gridDim.x) {
    // Row offset from the outer index (last outer dim varies fastest).
    long long rem = row, off = 0;
    for (int d = xt.ndim - 2; d >= 0; --d) {
      off += (rem % xt.shape[d]) * xt.strides[d];
      rem /= xt.shape[d];
    }
    const T* xr = x + off;
    float sum = 0.f;
    for (int j = threadIdx.x; j < h; j += blockDim.x) {
      const float v = load_f(xr + j * x_last_stride);
      sum += v * v;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    const float mean = partial[0] / static_cast<float>(h);
    const float scale = 1.0f / sqrtf(mean + eps); // IEEE sqrt and division (no fast math)
    T* yr = y + row * h;
    for (int j = threadIdx.x; j < h; j += blockDim.x) {
      const float v = load_f(xr + j * x_last_stride);
      store_f(yr + j, (v * scale) * load_f(w + j * w_stride));
    }
    __syncthreads(); // partial[0] is read above before the next row overwrites partial
  }
}

const void* kernel_of(DType dtype) {
  switch (dtype) {
  case DType::kFloat32:
    return reinterpret_cast<const void*>(&reference_rmsnorm<float>);
  case DType::kFloat16:
    return reinterpret_cast<const void*>(&reference_rmsnorm<__half>);
  case DType::kBFloat16:
    return reinterpret_cast<const void*>(&reference_rmsnorm<__nv_bfloat16>);
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

} // namespace kloop::rmsnorm
