// REJECT at correctness (CASES.md P11; the contract's rejected difference "a float16 accumulator"):
// the float16 entry keeps each thread's partial sum of exp(x - max) in a __half; the float32 and
// bfloat16 entries are correct_simple's. A __half at 1 or more has a spacing of 2^-10, so a term
// below 2^-11 = 4.9e-4 added to it is rounded away. The public case that shows it is
// large_positive-4x32768 (float16): 1e4 + 4 N(0, 1) rounded to float16, whose spacing there is 8,
// so a few dozen elements per row equal the max (terms 1) and ~5000 sit 8 below it (terms
// exp(-8) = 3.4e-4); each thread that has met a max element drops every such term after it, ~0.3%
// of the sum, and every output of the row is off by that much, ~1.5x the float16 bound of 2e-3
// (elementwise and per row). A CPU replica of the case (kloop's generator, this kernel's rounding
// order) puts each of its 4 rows at 1.40x-1.59x the bound at suite seed 11 (gpu_corpus_test's),
// the worst row at 1.6x-2.1x over 10 suite seeds; correct_simple stays below 0.01x. On rows of
// N(0, 1) values the partial sums' rounding errors are random and largely cancel across the 256
// threads (simulated: within the bound), so the widths family passes.
// Contract, build and static inspection pass.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// Enumerators, not namespace-scope constexpr variables (an odr-used one becomes a .global PTX
// symbol, which the static gate rejects as module-scope state).
enum : int { kWarp = 32, kMaxWarps = 32 };

__device__ __forceinline__ float neg_inf() {
  return __int_as_float(0xff800000);
}

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

// The block's max of v, in every thread: warp shuffles, one slot per warp, one barrier.
__device__ __forceinline__ float block_max(float v, float* red) {
  for (int o = kWarp / 2; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  float m = red[0];
  for (int i = 1; i < warps; ++i)
    m = fmaxf(m, red[i]);
  return m;
}

// The block's sum of v, in every thread (same scheme).
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
  __shared__ float red_max[kMaxWarps];
  __shared__ float red_sum[kMaxWarps];
  const long long row = blockIdx.x;
  if (row >= rows) return; // the whole block: no barrier is skipped by part of it
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float m = neg_inf();
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    m = fmaxf(m, to_f(xr[j]));
  m = block_max(m, red_max);
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    s += expf(to_f(xr[j]) - m);
  s = block_sum(s, red_sum);
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    yr[j] = from_f<T>(expf(to_f(xr[j]) - m) * inv);
}

// The float16 entry's row: softmax_row<__half>, except for the type of the partial sums.
__device__ void softmax_row_half_acc(const __half* x, __half* y, long long rows, int n,
                                     long long xs, long long ys) {
  __shared__ float red_max[kMaxWarps];
  __shared__ float red_sum[kMaxWarps];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const __half* xr = x + row * xs;
  __half* yr = y + row * ys;
  float m = neg_inf();
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    m = fmaxf(m, to_f(xr[j]));
  m = block_max(m, red_max);
  // DEFECT: each thread accumulates its part of the sum in a __half (11 significant bits); only
  // the block reduction is float32.
  __half acc = __float2half(0.f);
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    acc = __hadd(acc, __float2half(expf(to_f(xr[j]) - m)));
  const float s = block_sum(__half2float(acc), red_sum);
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    yr[j] = from_f<__half>(expf(to_f(xr[j]) - m) * inv);
}

} // namespace

extern "C" __global__ void softmax_f32(const float* x, float* y, long long rows, int N,
                                       long long x_row_stride, long long y_row_stride) {
  softmax_row<float>(x, y, rows, N, x_row_stride, y_row_stride);
}

extern "C" __global__ void softmax_f16(const __half* x, __half* y, long long rows, int N,
                                       long long x_row_stride, long long y_row_stride) {
  softmax_row_half_acc(x, y, rows, N, x_row_stride, y_row_stride);
}

extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows,
                                        int N, long long x_row_stride, long long y_row_stride) {
  softmax_row<__nv_bfloat16>(x, y, rows, N, x_row_stride, y_row_stride);
}
