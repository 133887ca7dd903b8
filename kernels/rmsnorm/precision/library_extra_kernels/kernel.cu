// MUST PASS every gate (precision corpus, CASES.md Q4): a module that, like a ported library file,
// defines more kernels than the manifest names: a fused residual-add variant and a template
// EmptyKernel<void> instantiated the way cub instantiates its own. Those are allowed and never
// launched; the static report lists them. The named entries are ordinary one-block-per-row
// kernels of 256 threads, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace lib {

template <typename T> __global__ void EmptyKernel() {}
template __global__ void EmptyKernel<void>();

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T narrow(float v) { return T(v); }
template <> __device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Sum over the block of 256 threads; every thread gets the total. `red` holds 8 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < 8; ++i) total += red[i];
  return total;
}

template <typename T>
__device__ void rms_norm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                         long long ys, float eps) {
  __shared__ float red[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += 256) {
    const float v = widen(x[row * xs + j]);
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum(ss, red) / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += 256)
    y[row * ys + j] = narrow<T>((widen(x[row * xs + j]) * scale) * widen(w[j]));
}

// residual += x; x = rms_norm(residual) * w, in place (not part of the kloop contract).
template <typename T>
__device__ void fused_add_rms_norm(T* x, T* residual, const T* w, long long rows, int H,
                                   float eps) {
  __shared__ float red[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += 256) {
    const float v = widen(x[row * H + j]) + widen(residual[row * H + j]);
    residual[row * H + j] = narrow<T>(v);
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum(ss, red) / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += 256)
    x[row * H + j] = narrow<T>((widen(residual[row * H + j]) * scale) * widen(w[j]));
}

} // namespace lib

extern "C" __global__ void rms_norm_f32(const float* x, const float* weight, float* y,
                                        long long rows, int H, long long x_row_stride,
                                        long long y_row_stride, float eps) {
  lib::rms_norm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_norm_f16(const __half* x, const __half* weight, __half* y,
                                        long long rows, int H, long long x_row_stride,
                                        long long y_row_stride, float eps) {
  lib::rms_norm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                         __nv_bfloat16* y, long long rows, int H,
                                         long long x_row_stride, long long y_row_stride,
                                         float eps) {
  lib::rms_norm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void fused_add_rms_norm_f16(__half* x, __half* residual, const __half* weight,
                                                  long long rows, int H, float eps) {
  lib::fused_add_rms_norm(x, residual, weight, rows, H, eps);
}
extern "C" __global__ void fused_add_rms_norm_bf16(__nv_bfloat16* x, __nv_bfloat16* residual,
                                                   const __nv_bfloat16* weight, long long rows,
                                                   int H, float eps) {
  lib::fused_add_rms_norm(x, residual, weight, rows, H, eps);
}
