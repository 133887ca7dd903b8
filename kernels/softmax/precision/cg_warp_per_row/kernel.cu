// MUST PASS every gate (softmax precision corpus, CASES.md Q3): cooperative groups: each warp of
// the block is a cg::tiled_partition<32> that owns one row, and reduces the row max with
// cg::reduce(tile, v, cg::greater<float>()) and the sum with cg::plus<float>() (reduce.h pulls
// in libcu++). Eight rows per block of 256 threads, no shared memory, no block barrier; a warp
// whose row is past the end returns as a whole. Any row stride.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ float widen(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ void put(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void put(__half* p, float v) {
  *p = __float2half_rn(v);
}
__device__ __forceinline__ void put(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

template <typename T>
__device__ void softmax_cg(const T* x, T* y, long long rows, int N, long long xs, long long ys) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const long long row = static_cast<long long>(blockIdx.x) * 8 + warp.meta_group_rank();
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  const int lane = static_cast<int>(warp.thread_rank());

  float m = __int_as_float(0xff800000); // -inf: the max of an empty set
  for (int j = lane; j < N; j += 32)
    m = fmaxf(m, widen(xr[j]));
  m = cg::reduce(warp, m, cg::greater<float>());

  float s = 0.f;
  for (int j = lane; j < N; j += 32)
    s += __expf(widen(xr[j]) - m);
  s = cg::reduce(warp, s, cg::plus<float>());
  const float inv = 1.f / s;

  for (int j = lane; j < N; j += 32)
    put(yr + j, __expf(widen(xr[j]) - m) * inv);
}

extern "C" __global__ void softmax_f32(const float* x, float* y, long long rows, int N,
                                       long long xs, long long ys) {
  softmax_cg(x, y, rows, N, xs, ys);
}
extern "C" __global__ void softmax_f16(const __half* x, __half* y, long long rows, int N,
                                       long long xs, long long ys) {
  softmax_cg(x, y, rows, N, xs, ys);
}
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows,
                                        int N, long long xs, long long ys) {
  softmax_cg(x, y, rows, N, xs, ys);
}
