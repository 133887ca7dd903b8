// MUST PASS every gate (precision corpus, CASES.md Q7): the classic shared-memory tree reduction
// with sequential addressing and a barrier per level (no warp shuffles), which sums in another
// order than the reference's pairwise blocks. One block of 256 threads per row, any row stride.
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
  __shared__ float sdata[256];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  const unsigned tid = threadIdx.x;
  float ss = 0.f;
  for (int j = tid; j < H; j += 256) {
    const float v = widen(xr[j]);
    ss += v * v;
  }
  sdata[tid] = ss;
  __syncthreads();
  for (unsigned s = 128; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  const float scale = rsqrtf(sdata[0] / static_cast<float>(H) + eps);
  for (int j = tid; j < H; j += 256) put(yr + j, (widen(xr[j]) * scale) * widen(w[j]));
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
