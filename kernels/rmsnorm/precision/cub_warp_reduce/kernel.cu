// MUST PASS every gate (precision corpus, CASES.md Q3): one warp per row, eight rows per block of
// 256 threads; each warp reduces its row with cub::WarpReduce (result valid in lane 0, broadcast
// with a shuffle). Rows of up to 32768 elements; wider rows go to the reference path.
#include <cub/warp/warp_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ void rmsnorm_warp(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                             long long ys, float eps) {
  using WarpReduce = cub::WarpReduce<float>;
  __shared__ typename WarpReduce::TempStorage temp[kWarpsPerBlock];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const long long row = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= rows) return; // the whole warp leaves; no block-wide barrier follows
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = lane; j < H; j += 32) {
    const float v = widen(xr[j]);
    ss += v * v;
  }
  float total = WarpReduce(temp[warp]).Sum(ss);
  total = __shfl_sync(0xffffffffu, total, 0);
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int j = lane; j < H; j += 32) put(yr + j, (widen(xr[j]) * scale) * widen(w[j]));
}

extern "C" __global__ void warp_rms_f32(const float* x, const float* weight, float* y,
                                        long long rows, int H, long long x_row_stride,
                                        long long y_row_stride, float eps) {
  rmsnorm_warp(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void warp_rms_f16(const __half* x, const __half* weight, __half* y,
                                        long long rows, int H, long long x_row_stride,
                                        long long y_row_stride, float eps) {
  rmsnorm_warp(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void warp_rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                         __nv_bfloat16* y, long long rows, int H,
                                         long long x_row_stride, long long y_row_stride,
                                         float eps) {
  rmsnorm_warp(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
