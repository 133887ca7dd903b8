// MUST PASS every gate (precision corpus, CASES.md Q6/Q7): the reciprocal square root is the PTX
// instruction rsqrt.approx.f32 written as inline asm (no .ftz: subnormal inputs and results are
// kept), the squares accumulate with fma.rn.f32 in inline asm, and the weight multiply comes first:
// y = x * (w * scale), another association than the reference's (x * scale) * w. One block of
// 256 threads per row, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float rsqrt_approx(float v) {
  float r;
  asm("rsqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
__device__ __forceinline__ float fma_rn(float a, float b, float c) {
  float d;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ void rmsnorm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  __shared__ float partial[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += 256) {
    const float v = widen(xr[j]);
    ss = fma_rn(v, v, ss);
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < 8; ++i) total += partial[i];
  const float scale = rsqrt_approx(total / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += 256) put(yr + j, widen(xr[j]) * (widen(w[j]) * scale));
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
extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                    __nv_bfloat16* y, long long rows, int H,
                                    long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
