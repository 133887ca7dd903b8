// MUST PASS every gate (softmax precision corpus, CASES.md Q3): libcu++ throughout: the -inf
// seed from cuda::std::numeric_limits<float>::infinity(), cuda::std::fmax over the row,
// cuda::std::exp for the exponentials, cuda::std::int64_t for row offsets. A persistent grid
// (the launcher sizes it by occupancy) of 256-thread blocks loops over the rows, one warp per row
// (eight row slots per block, grid-stride over the rows), reductions by __shfl_xor_sync only.
// Any row stride.
#include <cuda/std/cmath>
#include <cuda/std/cstdint>
#include <cuda/std/limits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

template <typename T> __device__ float as_float(T v) {
  return static_cast<float>(v);
}
template <> __device__ float as_float<__half>(__half v) {
  return __half2float(v);
}
template <> __device__ float as_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ T as_t(float v) {
  return static_cast<T>(v);
}
template <> __device__ __half as_t<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __nv_bfloat16 as_t<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = cuda::std::fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ void softmax_warps(const T* x, T* y, cuda::std::int64_t rows, int N,
                              cuda::std::int64_t xs, cuda::std::int64_t ys) {
  const int lane = threadIdx.x % 32;
  const cuda::std::int64_t slots = static_cast<cuda::std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (cuda::std::int64_t row =
           static_cast<cuda::std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
       row < rows; row += slots) {
    const T* xr = x + row * xs;
    T* yr = y + row * ys;
    float m = -cuda::std::numeric_limits<float>::infinity();
    for (int j = lane; j < N; j += 32) {
      const float v = as_float(xr[j]);
      // cuda::std::fmax(m, NaN) is m; the NaN still reaches the sum.
      m = cuda::std::fmax(m, v);
    }
    m = warp_max(m);
    float s = 0.f;
    for (int j = lane; j < N; j += 32)
      s += cuda::std::exp(as_float(xr[j]) - m);
    s = warp_sum(s);
    const float inv = 1.f / s;
    for (int j = lane; j < N; j += 32)
      yr[j] = as_t<T>(cuda::std::exp(as_float(xr[j]) - m) * inv);
  }
}

} // namespace

extern "C" __global__ void softmax_f32(const float* x, float* y, long long rows, int N,
                                       long long xs, long long ys) {
  softmax_warps(x, y, rows, N, xs, ys);
}
extern "C" __global__ void softmax_f16(const __half* x, __half* y, long long rows, int N,
                                       long long xs, long long ys) {
  softmax_warps(x, y, rows, N, xs, ys);
}
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows,
                                        int N, long long xs, long long ys) {
  softmax_warps(x, y, rows, N, xs, ys);
}
