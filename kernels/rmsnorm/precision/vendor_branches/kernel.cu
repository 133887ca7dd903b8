// MUST PASS every gate (precision corpus, CASES.md Q5): portable source with vendor branches: the
// HIP headers sit in the #if branch that the CUDA compile skips, a __has_include probe picks the
// libcu++ header when it exists, and host-only code sits behind #ifndef __CUDACC_RTC__ / an
// #if 0 block. One block of 256 threads per row, any row stride.
#if defined(USE_ROCM) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define KERNEL_WARP_SIZE 64
typedef __hip_bfloat16 bf16_t;
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define KERNEL_WARP_SIZE 32
typedef __nv_bfloat16 bf16_t;
#endif

#if __has_include(<cuda/std/cstdint>)
#include <cuda/std/cstdint>
using lane_mask_t = cuda::std::uint32_t;
#else
#include <cstdint>
using lane_mask_t = std::uint32_t;
#endif

#if 0
#include <cstdio> // debugging aid, disabled
#endif

#ifndef __CUDACC_RTC__
#include <vector> // host-side test harness only (never compiled by NVRTC)
#endif

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(bf16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(bf16_t* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ void rmsnorm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  constexpr lane_mask_t kMask = 0xffffffffu;
  __shared__ float partial[256 / KERNEL_WARP_SIZE];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += 256) {
    const float v = widen(xr[j]);
    ss += v * v;
  }
  for (int o = KERNEL_WARP_SIZE / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(kMask, ss, o);
  if (threadIdx.x % KERNEL_WARP_SIZE == 0) partial[threadIdx.x / KERNEL_WARP_SIZE] = ss;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < 256 / KERNEL_WARP_SIZE; ++i) total += partial[i];
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += 256) put(yr + j, (widen(xr[j]) * scale) * widen(w[j]));
}

extern "C" __global__ void rms_f32(const float* x, const float* weight, float* y, long long rows,
                                   int H, long long x_row_stride, long long y_row_stride,
                                   float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_f16(const __half* x, const __half* weight, __half* y,
                                   long long rows, int H, long long x_row_stride,
                                   long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_bf16(const bf16_t* x, const bf16_t* weight, bf16_t* y,
                                    long long rows, int H, long long x_row_stride,
                                    long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
