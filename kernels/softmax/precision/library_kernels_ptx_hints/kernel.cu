// MUST PASS every gate (softmax precision corpus, CASES.md Q1, Q4, Q6): a small kernel library:
// the module also holds log-softmax entry points that the manifest does not name (they are never
// launched), the entries sit in one extern "C" { } block, and the row is read with inline PTX
// loads carrying cache hints (ld.global.nc.L1::no_allocate for the first two passes, whose data
// the third pass re-reads from L2; ld.global.cs for the last read). Three passes, one block of
// 256 threads per row, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace lib {

__device__ __forceinline__ unsigned short ld_nc_u16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short ld_cs_u16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.cs.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_nc_f32(const void* p) {
  float v;
  asm volatile("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_cs_f32(const void* p) {
  float v;
  asm volatile("ld.global.cs.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

// Element j of a row as float, with the streaming (cs) or the no-L1 (nc) hint.
__device__ __forceinline__ float get(const float* r, int j, bool last) {
  return last ? ld_cs_f32(r + j) : ld_nc_f32(r + j);
}
__device__ __forceinline__ float get(const __half* r, int j, bool last) {
  const unsigned short b = last ? ld_cs_u16(r + j) : ld_nc_u16(r + j);
  return __half2float(__ushort_as_half(b));
}
__device__ __forceinline__ float get(const __nv_bfloat16* r, int j, bool last) {
  const unsigned short b = last ? ld_cs_u16(r + j) : ld_nc_u16(r + j);
  return __bfloat162float(__ushort_as_bfloat16(b));
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

template <bool kMax> __device__ float block_all(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < 8; ++i)
    r = kMax ? fmaxf(r, red[i]) : r + red[i];
  __syncthreads();
  return r;
}

// log_softmax = false: y = exp(x - m) / s; true: y = x - m - log(s).
template <typename T, bool kLog>
__device__ void row_op(const T* x, T* y, long long rows, int N, long long xs, long long ys) {
  __shared__ float red[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float m = __int_as_float(0xff800000);
  for (int j = threadIdx.x; j < N; j += 256)
    m = fmaxf(m, get(xr, j, false));
  m = block_all<true>(m, red);
  float s = 0.f;
  for (int j = threadIdx.x; j < N; j += 256)
    s += expf(get(xr, j, false) - m);
  s = block_all<false>(s, red);
  const float inv = 1.f / s, log_s = logf(s);
  for (int j = threadIdx.x; j < N; j += 256) {
    const float v = get(xr, j, true);
    put(yr + j, kLog ? v - m - log_s : expf(v - m) * inv);
  }
}

} // namespace lib

extern "C" {

__global__ void __launch_bounds__(256)
    softmax_f32(const float* x, float* y, long long rows, int N, long long xs, long long ys) {
  lib::row_op<float, false>(x, y, rows, N, xs, ys);
}
__global__ void __launch_bounds__(256)
    softmax_f16(const __half* x, __half* y, long long rows, int N, long long xs, long long ys) {
  lib::row_op<__half, false>(x, y, rows, N, xs, ys);
}
__global__ void __launch_bounds__(256)
    softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N, long long xs,
                 long long ys) {
  lib::row_op<__nv_bfloat16, false>(x, y, rows, N, xs, ys);
}

// The library's other operator: never named by the manifest, never launched by kloop.
__global__ void __launch_bounds__(256)
    log_softmax_f32(const float* x, float* y, long long rows, int N, long long xs, long long ys) {
  lib::row_op<float, true>(x, y, rows, N, xs, ys);
}
__global__ void __launch_bounds__(256)
    log_softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N, long long xs,
                     long long ys) {
  lib::row_op<__nv_bfloat16, true>(x, y, rows, N, xs, ys);
}

} // extern "C"
