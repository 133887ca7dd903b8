// MUST PASS every gate (precision corpus): every helper lives in an anonymous namespace (internal
// linkage: the PTX names them with the module's _INTERNAL prefix), reductions are written with
// function objects, and two rows share a block of 256 threads, 128 threads per row. Both halves
// pass the same barriers even when the second row does not exist.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

struct Plus {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename Op> __device__ float warp_reduce(float v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename T> struct Convert;
template <> struct Convert<float> {
  __device__ static float in(float v) { return v; }
  __device__ static float out(float v) { return v; }
};
template <> struct Convert<__half> {
  __device__ static float in(__half v) { return __half2float(v); }
  __device__ static __half out(float v) { return __float2half_rn(v); }
};
template <> struct Convert<__nv_bfloat16> {
  __device__ static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

template <typename T>
__device__ void two_rows(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                         long long ys, float eps) {
  using C = Convert<T>;
  __shared__ float partial[2][4]; // [half of the block][warp within the half]
  const int half = threadIdx.x / 128;
  const int t = threadIdx.x % 128;
  const long long row = 2LL * blockIdx.x + half;
  const bool has_row = row < rows;
  const T* xr = x + (has_row ? row : 0) * xs;
  T* yr = y + (has_row ? row : 0) * ys;
  float ss = 0.f;
  for (int j = t; has_row && j < H; j += 128) {
    const float v = C::in(xr[j]);
    ss += v * v;
  }
  ss = warp_reduce(ss, Plus{});
  if ((t & 31) == 0) partial[half][t >> 5] = ss;
  __syncthreads(); // both halves, whether or not their row exists
  if (!has_row) return;
  const float total = (partial[half][0] + partial[half][1]) + (partial[half][2] + partial[half][3]);
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int j = t; j < H; j += 128) yr[j] = C::out((C::in(xr[j]) * scale) * C::in(w[j]));
}

} // namespace

extern "C" __global__ void rms_f32(const float* x, const float* weight, float* y, long long rows,
                                   int H, long long x_row_stride, long long y_row_stride,
                                   float eps) {
  two_rows(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_f16(const __half* x, const __half* weight, __half* y,
                                   long long rows, int H, long long x_row_stride,
                                   long long y_row_stride, float eps) {
  two_rows(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                    __nv_bfloat16* y, long long rows, int H,
                                    long long x_row_stride, long long y_row_stride, float eps) {
  two_rows(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
