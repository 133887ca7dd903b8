// MUST FAIL sanitizer (synccheck): a __syncthreads() inside a branch only some threads of a warp take.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <typename T>
__device__ void rms_row(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  __shared__ float red[32];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += blockDim.x) {
    const float v = to_f(xr[j]);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int i = 0; i < (int)(blockDim.x >> 5); ++i) tot += red[i];
  const float scale = rsqrtf(tot / H + eps);
  // DEFECT: a barrier in a branch only half of each warp takes; the other lanes go on to the
  // output loop. (A divergent barrier just before the lanes exit is not flagged by synccheck on
  // sm_90: exited lanes count as arrived.)
  if ((threadIdx.x & 31) < 16) __syncthreads();
  for (int j = threadIdx.x; j < H; j += blockDim.x)
    yr[j] = from_f<T>((to_f(xr[j]) * scale) * to_f(w[j]));
}

extern "C" __global__ void rms_f32(const float* x, const float* weight, float* y, long long rows, int H,
                                 long long x_row_stride, long long y_row_stride, float eps) {
  rms_row<float>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

extern "C" __global__ void rms_f16(const __half* x, const __half* weight, __half* y, long long rows, int H,
                                 long long x_row_stride, long long y_row_stride, float eps) {
  rms_row<__half>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, long long rows, int H,
                                 long long x_row_stride, long long y_row_stride, float eps) {
  rms_row<__nv_bfloat16>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
