// REJECT at correctness (softmax-specific; the contract's rejected difference "no max
// subtraction"): correct_simple without its max pass: y = expf(x) / sum(expf(x)), the textbook
// formula, equal to the softmax in exact arithmetic and on moderate inputs (the widths and views
// families, N(0, 1) values, pass). But expf overflows to inf above x = 88.7 and underflows to 0
// below -103.3: the large_positive family (1e4 + 4 N(0, 1)) makes every term inf and every output
// inf / inf = NaN where the reference is finite (first failing case: large_positive-6x1, float32);
// large_negative (-1e4) makes the sum 0 and the outputs 0 * inf = NaN, and near_max, constant rows
// of 1e4 and mixed magnitudes fail alike.
// Contract, build and static inspection pass.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// Enumerators, not namespace-scope constexpr variables (an odr-used one becomes a .global PTX
// symbol, which the static gate rejects as module-scope state).
enum : int { kWarp = 32, kMaxWarps = 32 };

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// The block's sum of v, in every thread: warp shuffles, one slot per warp, one barrier.
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = kWarp / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  float s = red[0];
  for (int i = 1; i < warps; ++i)
    s += red[i];
  return s;
}

template <typename T>
__device__ void softmax_row(const T* x, T* y, long long rows, int n, long long xs, long long ys) {
  __shared__ float red_sum[kMaxWarps];
  const long long row = blockIdx.x;
  if (row >= rows) return; // the whole block: no barrier is skipped by part of it
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  // DEFECT: exp(x) / sum(exp(x)) without subtracting the row max first (mathematically the same
  // softmax; in float32 expf overflows to inf above x = 88.7).
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    s += expf(to_f(xr[j]));
  s = block_sum(s, red_sum);
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    yr[j] = from_f<T>(expf(to_f(xr[j])) * inv);
}

} // namespace

extern "C" __global__ void softmax_f32(const float* x, float* y, long long rows, int N,
                                       long long x_row_stride, long long y_row_stride) {
  softmax_row<float>(x, y, rows, N, x_row_stride, y_row_stride);
}

extern "C" __global__ void softmax_f16(const __half* x, __half* y, long long rows, int N,
                                       long long x_row_stride, long long y_row_stride) {
  softmax_row<__half>(x, y, rows, N, x_row_stride, y_row_stride);
}

extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows,
                                        int N, long long x_row_stride, long long y_row_stride) {
  softmax_row<__nv_bfloat16>(x, y, rows, N, x_row_stride, y_row_stride);
}
