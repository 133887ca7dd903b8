// MUST PASS every gate (softmax precision corpus, CASES.md Q2, Q3): the row max and the row sum
// are block reductions with cub::BlockReduce from the per-algorithm header (the max through a
// functor of our own, the sum through Sum()), the block size is a namespace-scope constexpr, and
// the values are passed back to every thread through shared memory. Three passes over the row
// (max, sum of exp(x - max), write), one block of 256 threads per row, any row stride.
#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int kBlockThreads = 256;

__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ float widen(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T narrow(float v) {
  return T(v);
}
template <> __device__ __forceinline__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T>
__device__ void softmax_cub(const T* __restrict__ x, T* __restrict__ y, long long rows, int N,
                            long long xs, long long ys) {
  using BlockReduce = cub::BlockReduce<float, kBlockThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ float s_max, s_inv;
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;

  float m = __int_as_float(0xff800000); // -inf
  for (int j = threadIdx.x; j < N; j += kBlockThreads)
    m = fmaxf(m, widen(xr[j]));
  m = BlockReduce(temp).Reduce(m, MaxOp());
  if (threadIdx.x == 0) s_max = m;
  __syncthreads();
  m = s_max;

  float s = 0.f;
  for (int j = threadIdx.x; j < N; j += kBlockThreads)
    s += expf(widen(xr[j]) - m);
  __syncthreads(); // temp is reused by the second reduction
  s = BlockReduce(temp).Sum(s);
  if (threadIdx.x == 0) s_inv = 1.f / s;
  __syncthreads();
  const float inv = s_inv;

  for (int j = threadIdx.x; j < N; j += kBlockThreads)
    yr[j] = narrow<T>(expf(widen(xr[j]) - m) * inv);
}

extern "C" __global__ void __launch_bounds__(kBlockThreads)
    softmax_f32(const float* x, float* y, long long rows, int N, long long xs, long long ys) {
  softmax_cub(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(kBlockThreads)
    softmax_f16(const __half* x, __half* y, long long rows, int N, long long xs, long long ys) {
  softmax_cub(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(kBlockThreads)
    softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N, long long xs,
                 long long ys) {
  softmax_cub(x, y, rows, N, xs, ys);
}
