// REJECT at correctness (softmax-specific; the defect the baseline's shift_of() avoids): an online
// softmax (each thread one pass: a running max and a sum rescaled by exp(m_old - m_new), then the
// threads' states merged against the row max) whose update takes -inf - (-inf) = NaN when a thread
// meets a -inf element before any finite one: its sum turns NaN, and with it the whole row,
// although the row has finite elements and its expected outputs are finite (exactly 0 at the -inf
// elements).
// Every row without a -inf element is right (NaN and +inf rows come out NaN, as they must; all
// -inf rows are NaN anyway), so widths, views and the value families before the masks pass; the
// first failing case is causal_mask-6x129 (float32): row 0 keeps only element 0, and threads
// 1..128 start on -inf. neg_inf_elements and the nan_inf row with a -inf fail the same way.
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
  // One online pass per thread: running max m and the sum s of exp(x - m), rescaled by
  // exp(m_old - m_new) when the max grows.
  float m = neg_inf();
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = to_f(xr[j]);
    const float m_new = fmaxf(m, v);
    // DEFECT: while m is still -inf, a -inf element gives m_new = -inf and both exponents
    // -inf - (-inf) = NaN, so s turns NaN (0 * NaN + NaN) and stays NaN. Exponents must be taken
    // against 0 while the max is -inf (the baseline's shift_of()).
    s = s * expf(m - m_new) + expf(v - m_new);
    m = m_new;
  }
  // The threads' states merged against the row max: exact for every finite row max (a thread
  // with no element, m = -inf and s = 0, adds 0 * exp(-inf) = 0); an infinite row max gives NaN,
  // which is what those rows expect.
  const float row_max = block_max(m, red_max);
  s = block_sum(s * expf(m - row_max), red_sum);
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    yr[j] = from_f<T>(expf(to_f(xr[j]) - row_max) * inv);
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
