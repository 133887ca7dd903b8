// MUST PASS every gate (softmax precision corpus, CASES.md Q2, Q7): the log-sum-exp form
// y = 2^((x - m) * log2(e) - log2(s)) with exp2f and log2f, the constant log2(e) read from a
// __constant__ table (read-only module data) that a loop indexes at run time. The output is not
// exp(x - m) / s computed literally: its rounding differs by |(x - m) log2(e) - log2(s)| * 2^-24
// relative, inside the contract's float32 rtol (kernels/softmax/contract.cpp names this form).
// An all -inf row gives m = -inf, x - m = NaN and NaN outputs; a NaN or +inf anywhere makes s and
// so the row NaN, as the contract says. One block of 64 threads (two warps) per row, any stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// [0]: log2(e); [1]: 1 (the neutral scale of the butterfly loop's unused slot).
__constant__ float kScales[2] = {1.4426950408889634f, 1.0f};

__device__ __forceinline__ float get(const float* p) {
  return *p;
}
__device__ __forceinline__ float get(const __half* p) {
  return __half2float(*p);
}
__device__ __forceinline__ float get(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ void set(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void set(__half* p, float v) {
  *p = __float2half_rn(v);
}
__device__ __forceinline__ void set(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

template <typename T>
__device__ void softmax_lse(const T* x, T* y, long long rows, int N, long long xs, long long ys) {
  __shared__ float two[2];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float log2e = kScales[static_cast<int>(kScales[1]) - 1]; // a run-time index: kept

  float m = __int_as_float(0xff800000);
  for (int j = threadIdx.x; j < N; j += 64)
    m = fmaxf(m, get(xr + j));
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) two[warp] = m;
  __syncthreads();
  m = fmaxf(two[0], two[1]);
  __syncthreads();

  float s = 0.f;
  for (int j = threadIdx.x; j < N; j += 64)
    s += exp2f((get(xr + j) - m) * log2e);
  for (int o = 16; o > 0; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) two[warp] = s;
  __syncthreads();
  const float lse2 = log2f(two[0] + two[1]); // NaN for a NaN row: every output NaN

  for (int j = threadIdx.x; j < N; j += 64)
    set(yr + j, exp2f((get(xr + j) - m) * log2e - lse2));
}

extern "C" __global__ void __launch_bounds__(64)
    softmax_f32(const float* x, float* y, long long rows, int N, long long xs, long long ys) {
  softmax_lse(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(64)
    softmax_f16(const __half* x, __half* y, long long rows, int N, long long xs, long long ys) {
  softmax_lse(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(64)
    softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N, long long xs,
                 long long ys) {
  softmax_lse(x, y, rows, N, xs, ys);
}
