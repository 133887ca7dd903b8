// MUST PASS every gate (softmax precision corpus, CASES.md Q8, format 2): two per-shape variants
// chosen by the manifest (docs/CANDIDATE-FORMAT.md), both indexing with 32-bit integers and so
// declaring max_elements = 2^31 - 1 (calls spanning more elements go to the reference):
//   - "narrow" (N <= 1024): one warp per row, eight rows per block; the row lives in registers
//     (kPerLane = 32 elements per lane at most), read once;
//   - "wide" (1024 < N <= 65536): one block of 1024 threads per row, three passes, the block's
//     warps combined in shared memory.
// Element offsets are int: row * stride + j fits because the call spans at most 2^31 - 1
// elements of x and of y.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

enum : int { kPerLane = 32 };

__device__ __forceinline__ float ld(const float* p, int i) {
  return p[i];
}
__device__ __forceinline__ float ld(const __half* p, int i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ float ld(const __nv_bfloat16* p, int i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void st(float* p, int i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void st(__half* p, int i, float v) {
  p[i] = __float2half_rn(v);
}
__device__ __forceinline__ void st(__nv_bfloat16* p, int i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ void narrow_rows(const T* x, T* y, int rows, int N, int xs, int ys) {
  const int row = blockIdx.x * 8 + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int xo = row * xs, yo = row * ys;
  float v[kPerLane];
  float m = __int_as_float(0xff800000);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < N ? ld(x, xo + j) : __int_as_float(0xff800000);
    m = fmaxf(m, v[k]);
  }
  m = warp_max(m);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < N ? __expf(v[k] - m) : 0.f; // padding adds nothing (not exp(-inf - m) of NaN m)
    s += v[k];
  }
  const float inv = 1.f / warp_sum(s);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int j = lane + 32 * k;
    if (j < N) st(y, yo + j, v[k] * inv);
  }
}

template <typename T> __device__ void wide_rows(const T* x, T* y, int rows, int N, int xs, int ys) {
  __shared__ float part[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int xo = row * xs, yo = row * ys;
  float m = __int_as_float(0xff800000);
  for (int j = threadIdx.x; j < N; j += 1024)
    m = fmaxf(m, ld(x, xo + j));
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
  __syncthreads();
  m = warp_max(part[threadIdx.x % 32]);
  __syncthreads();
  float s = 0.f;
  for (int j = threadIdx.x; j < N; j += 1024)
    s += __expf(ld(x, xo + j) - m);
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  const float inv = 1.f / warp_sum(part[threadIdx.x % 32]);
  for (int j = threadIdx.x; j < N; j += 1024)
    st(y, yo + j, __expf(ld(x, xo + j) - m) * inv);
}

} // namespace

#define ENTRIES(KIND, SUFFIX, T)                                                                   \
  extern "C" __global__ void KIND##_##SUFFIX(const T* x, T* y, long long rows, int N,              \
                                             long long xs, long long ys) {                         \
    KIND##_rows<T>(x, y, static_cast<int>(rows), N, static_cast<int>(xs), static_cast<int>(ys));   \
  }
ENTRIES(narrow, f32, float)
ENTRIES(narrow, f16, __half)
ENTRIES(narrow, bf16, __nv_bfloat16)
ENTRIES(wide, f32, float)
ENTRIES(wide, f16, __half)
ENTRIES(wide, bf16, __nv_bfloat16)
