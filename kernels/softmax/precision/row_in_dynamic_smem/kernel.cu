// MUST PASS every gate (softmax precision corpus): the row is read from global memory once into
// dynamic shared memory (as float32, 4 bytes per element: the manifest's bytes_per_n, past the
// 48 KiB default for N > 12272, so the launcher must raise the limit), after a 64-byte
// reduction scratch (fixed_bytes). The max and the sum are taken over the shared copy; each
// element's exponential is stored back in place and scaled on the way out. One block of 512
// threads per row, any row stride; rows wider than 16384 go to the reference path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

enum : int { kThreads = 512, kWarps = kThreads / 32 };

__device__ __forceinline__ float f32(float v) {
  return v;
}
__device__ __forceinline__ float f32(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float f32(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ void out(float& d, float v) {
  d = v;
}
__device__ __forceinline__ void out(__half& d, float v) {
  d = __float2half_rn(v);
}
__device__ __forceinline__ void out(__nv_bfloat16& d, float v) {
  d = __float2bfloat16_rn(v);
}

// The block's max (is_max) or sum of v in every thread; scratch: kWarps floats.
__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = scratch[0];
  for (int i = 1; i < kWarps; ++i)
    r = is_max ? fmaxf(r, scratch[i]) : r + scratch[i];
  __syncthreads();
  return r;
}

template <typename T>
__device__ void softmax_smem(const T* x, T* y, long long rows, int N, long long xs, long long ys) {
  extern __shared__ float smem[];
  float* scratch = smem;    // kWarps floats in the 64 fixed bytes
  float* cache = smem + 16; // N floats
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;

  float m = __int_as_float(0xff800000);
  for (int j = threadIdx.x; j < N; j += kThreads) {
    const float v = f32(xr[j]);
    cache[j] = v;
    m = fmaxf(m, v);
  }
  m = block_reduce(m, true, scratch); // its first barrier also publishes cache[]
  float s = 0.f;
  for (int j = threadIdx.x; j < N; j += kThreads) {
    const float e = __expf(cache[j] - m);
    cache[j] = e; // each element is read and rewritten by the thread that loaded it
    s += e;
  }
  s = block_reduce(s, false, scratch);
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < N; j += kThreads)
    out(yr[j], cache[j] * inv);
}

} // namespace

extern "C" __global__ void __launch_bounds__(512)
    softmax_f32(const float* x, float* y, long long rows, int N, long long xs, long long ys) {
  softmax_smem(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(512)
    softmax_f16(const __half* x, __half* y, long long rows, int N, long long xs, long long ys) {
  softmax_smem(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(512)
    softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N, long long xs,
                 long long ys) {
  softmax_smem(x, y, rows, N, xs, ys);
}
