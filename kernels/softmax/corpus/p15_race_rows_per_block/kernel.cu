// REJECT at sanitizer, racecheck (CASES.md P15); correctness repeats may also catch it: four rows
// per block (rows_per_block 4) reuse one shared buffer for the max and the sum reductions; the
// barrier between a row's max reads and its sum writes is there, the one at the end of the row is
// not, so a fast warp's next-row max can overwrite red[w] before a slow warp has read this row's
// sum from it. The window (the fast warp stores its outputs and loads the next row first) is
// rarely hit, so results are almost always right; racecheck reports the hazard (two warps' accesses
// to red[w] with no barrier between them) on any case where a block has two or more rows (e.g.
// rows-216x96).
// Contract, build and static inspection pass.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// Enumerators, not namespace-scope constexpr variables (an odr-used one becomes a .global PTX
// symbol, which the static gate rejects as module-scope state).
enum : int { kWarp = 32, kMaxWarps = 32, kRowsPerBlock = 4 }; // launch.rows_per_block

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

// kRowsPerBlock consecutive rows per block (the loop bounds are the same for the whole block, so
// every thread reaches every barrier).
template <typename T>
__device__ void softmax_rows(const T* x, T* y, long long rows, int n, long long xs, long long ys) {
  __shared__ float red[kMaxWarps]; // one buffer for both reductions of every row
  const long long first = static_cast<long long>(blockIdx.x) * kRowsPerBlock;
  for (long long row = first; row < rows && row < first + kRowsPerBlock; ++row) {
    const T* xr = x + row * xs;
    T* yr = y + row * ys;
    float m = neg_inf();
    for (int j = threadIdx.x; j < n; j += blockDim.x)
      m = fmaxf(m, to_f(xr[j]));
    m = block_max(m, red);
    __syncthreads(); // every warp has read the max from red[] before the sums overwrite it
    float s = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
      s += expf(to_f(xr[j]) - m);
    s = block_sum(s, red);
    const float inv = 1.f / s;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = from_f<T>(expf(to_f(xr[j]) - m) * inv);
    // DEFECT: no __syncthreads() here: the next row's block_max writes red[] while slower warps
    // may still be reading this row's partial sums from it (a write-after-read race).
  }
}

} // namespace

extern "C" __global__ void softmax_f32(const float* x, float* y, long long rows, int N,
                                       long long x_row_stride, long long y_row_stride) {
  softmax_rows<float>(x, y, rows, N, x_row_stride, y_row_stride);
}

extern "C" __global__ void softmax_f16(const __half* x, __half* y, long long rows, int N,
                                       long long x_row_stride, long long y_row_stride) {
  softmax_rows<__half>(x, y, rows, N, x_row_stride, y_row_stride);
}

extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows,
                                        int N, long long x_row_stride, long long y_row_stride) {
  softmax_rows<__nv_bfloat16>(x, y, rows, N, x_row_stride, y_row_stride);
}
