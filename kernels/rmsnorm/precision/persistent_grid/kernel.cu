// MUST PASS every gate (precision corpus): a persistent grid (the wrapper launches what the
// occupancy API says fits) in which each block strides over rows; the block reduction alternates
// between two shared buffers by row parity, so one barrier per row suffices. 256 threads.
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
  __shared__ float partial[2][8];
  int parity = 0;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const T* xr = x + row * xs;
    T* yr = y + row * ys;
    float ss = 0.f;
    for (int j = threadIdx.x; j < H; j += 256) {
      const float v = widen(xr[j]);
      ss += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) partial[parity][threadIdx.x >> 5] = ss;
    // Writers of this row's buffer before its readers. The buffer is written again two rows
    // later, after the next row's barrier, which every reader of this row passes first.
    __syncthreads();
    float total = 0.f;
    for (int i = 0; i < 8; ++i) total += partial[parity][i];
    const float scale = rsqrtf(total / static_cast<float>(H) + eps);
    for (int j = threadIdx.x; j < H; j += 256) put(yr + j, (widen(xr[j]) * scale) * widen(w[j]));
  }
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
