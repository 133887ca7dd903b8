// The trusted GPU reference kernel (see reference_kernel.h).
#include "evaluator/gpu_worker/reference_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kloop::gpu {
namespace {

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

template <typename T>
__global__ void reference_rmsnorm(const T* x, const T* w, T* y, RefGeometry g, float eps) {
  __shared__ float partial[kThreads];
  for (long long row = blockIdx.x; row < g.rows; row += gridDim.x) {
    // Row offset from the outer index (last outer dim varies fastest).
    long long rem = row, off = 0;
    for (int d = g.outer_ndim - 1; d >= 0; --d) {
      off += (rem % g.outer_shape[d]) * g.outer_stride[d];
      rem /= g.outer_shape[d];
    }
    const T* xr = x + off;
    float sum = 0.f;
    for (int j = threadIdx.x; j < g.h; j += blockDim.x) {
      const float v = load_f(xr + j * g.x_last_stride);
      sum += v * v;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    const float mean = partial[0] / static_cast<float>(g.h);
    const float scale = 1.0f / sqrtf(mean + eps); // IEEE sqrt and division (no fast math)
    T* yr = y + row * g.y_row_stride;
    for (int j = threadIdx.x; j < g.h; j += blockDim.x) {
      const float v = load_f(xr + j * g.x_last_stride);
      store_f(yr + j, (v * scale) * load_f(w + j * g.w_stride));
    }
    __syncthreads(); // partial[0] is read above before the next row overwrites partial
  }
}

template <typename T>
cudaError_t launch_t(const void* x, const void* w, void* y, const RefGeometry& g, float eps,
                     cudaStream_t stream) {
  const long long blocks = g.rows < kMaxBlocks ? g.rows : kMaxBlocks;
  reference_rmsnorm<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), g, eps);
  return cudaGetLastError();
}

} // namespace

cudaError_t launch_reference(DType dtype, const void* x, const void* w, void* y,
                             const RefGeometry& g, float eps32, cudaStream_t stream) {
  if (g.rows <= 0) return cudaSuccess;
  switch (dtype) {
  case DType::kFloat32:
    return launch_t<float>(x, w, y, g, eps32, stream);
  case DType::kFloat16:
    return launch_t<__half>(x, w, y, g, eps32, stream);
  case DType::kBFloat16:
    return launch_t<__nv_bfloat16>(x, w, y, g, eps32, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace kloop::gpu
