// REJECT at correctness: returns without writing y (CASES.md P1); the poisoned output shows it.
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
__device__ void rms_row(const T*, const T*, T*, long long, int, long long, long long, float) {}

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
