// MUST PASS every gate (precision corpus, CASES.md Q7): each thread accumulates its squares with
// Kahan's compensated summation and the block combines the (sum, compensation) pairs, a more
// accurate order than the reference's; NVRTC does not reassociate without fast-math flags. A sum
// that overflows drops its compensation (inf - inf would turn the row into NaN).
// One block of 256 threads per row, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ void rmsnorm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  __shared__ float sums[256];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float sum = 0.f, comp = 0.f;
  for (int j = threadIdx.x; j < H; j += 256) {
    const float v = widen(xr[j]);
    const float term = __fmul_rn(v, v) - comp;
    const float next = __fadd_rn(sum, term);
    // Once the sum overflows (|x| near 1e19 in float32) the compensation is inf - inf: drop it,
    // so the row reads as the reference's overflowed sum (scale 0), not as NaN.
    comp = isfinite(next) ? __fsub_rn(__fsub_rn(next, sum), term) : 0.f;
    sum = next;
  }
  sums[threadIdx.x] = __fsub_rn(sum, comp);
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f, c = 0.f;
    for (int i = 0; i < 256; ++i) {
      const float term = __fsub_rn(sums[i], c);
      const float next = __fadd_rn(s, term);
      c = isfinite(next) ? __fsub_rn(__fsub_rn(next, s), term) : 0.f;
      s = next;
    }
    sums[0] = s;
  }
  __syncthreads();
  const float scale = rsqrtf(sums[0] / static_cast<float>(H) + eps);
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
extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                    __nv_bfloat16* y, long long rows, int H,
                                    long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
