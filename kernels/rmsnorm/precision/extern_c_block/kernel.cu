// MUST PASS every gate (precision corpus, CASES.md Q1): the entry points are defined inside one
// extern "C" { } block, with __global__, __launch_bounds__ and the return type each on a line of
// its own, and the cuda_fp16.h / cuda_bf16.h typedef spellings `half` and `nv_bfloat16`.
// One block of 128 threads (4 warps) per row, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace detail {

template <typename T> struct Io;
template <> struct Io<float> {
  static __device__ float in(float v) { return v; }
  static __device__ float out(float v) { return v; }
};
template <> struct Io<half> {
  static __device__ float in(half v) { return __half2float(v); }
  static __device__ half out(float v) { return __float2half_rn(v); }
};
template <> struct Io<nv_bfloat16> {
  static __device__ float in(nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

// blockDim.x == 128 (manifest launch.block_threads).
template <typename T>
__device__ void rmsnorm_row(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                            long long ys, float eps) {
  __shared__ float red[4];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += 128) {
    const float v = Io<T>::in(xr[j]);
    ss = fmaf(v, v, ss);
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  const float total = (red[0] + red[1]) + (red[2] + red[3]);
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += 128)
    yr[j] = Io<T>::out((Io<T>::in(xr[j]) * scale) * Io<T>::in(w[j]));
}

} // namespace detail

extern "C" {

__global__
__launch_bounds__(128)
void
rms_f32(const float* x, const float* weight, float* y, long long rows, int H,
        long long x_row_stride, long long y_row_stride, float eps)
{
  detail::rmsnorm_row(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

__global__
__launch_bounds__(128)
void
rms_f16(const half* x, const half* weight, half* y, long long rows, int H,
        long long x_row_stride, long long y_row_stride, float eps)
{
  detail::rmsnorm_row(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

__global__
__launch_bounds__(128)
void
rms_bf16(const nv_bfloat16* x, const nv_bfloat16* weight, nv_bfloat16* y, long long rows, int H,
         long long x_row_stride, long long y_row_stride, float eps)
{
  detail::rmsnorm_row(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

} // extern "C"
