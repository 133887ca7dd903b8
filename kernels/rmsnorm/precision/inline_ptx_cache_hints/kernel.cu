// MUST PASS every gate (precision corpus, CASES.md Q6): loads through inline PTX on the read-only
// (non-coherent) path with cache hints (ld.global.nc.L1::no_allocate for x, ld.global.nc.L1::evict_last
// for the weight, which every row reads) and streaming stores (st.global.cs). x and weight are
// never written during the call and y never aliases them, so the non-coherent path is sound.
// One block of 256 threads per row, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float ld_x(const float* p) {
  float v;
  asm volatile("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_w(const float* p) {
  float v;
  asm volatile("ld.global.nc.L1::evict_last.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short ld_x16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short ld_w16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.L1::evict_last.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ void st_cs(float* p, float v) {
  asm volatile("st.global.cs.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void st_cs16(void* p, unsigned short v) {
  asm volatile("st.global.cs.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}

// Element access per dtype: 32-bit floats directly, 16-bit types through their bit patterns.
struct F32 {
  using T = float;
  static __device__ float x(const T* p) { return ld_x(p); }
  static __device__ float w(const T* p) { return ld_w(p); }
  static __device__ void y(T* p, float v) { st_cs(p, v); }
};
struct F16 {
  using T = __half;
  static __device__ float x(const T* p) { return __half2float(__ushort_as_half(ld_x16(p))); }
  static __device__ float w(const T* p) { return __half2float(__ushort_as_half(ld_w16(p))); }
  static __device__ void y(T* p, float v) { st_cs16(p, __half_as_ushort(__float2half_rn(v))); }
};
struct BF16 {
  using T = __nv_bfloat16;
  static __device__ float x(const T* p) { return __bfloat162float(__ushort_as_bfloat16(ld_x16(p))); }
  static __device__ float w(const T* p) { return __bfloat162float(__ushort_as_bfloat16(ld_w16(p))); }
  static __device__ void y(T* p, float v) {
    st_cs16(p, __bfloat16_as_ushort(__float2bfloat16_rn(v)));
  }
};

template <typename A>
__device__ void rmsnorm(const typename A::T* x, const typename A::T* w, typename A::T* y,
                        long long rows, int H, long long xs, long long ys, float eps) {
  __shared__ float partial[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const typename A::T* xr = x + row * xs;
  typename A::T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += 256) {
    const float v = A::x(xr + j);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < 8; ++i) total += partial[i];
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += 256) A::y(yr + j, (A::x(xr + j) * scale) * A::w(w + j));
}

extern "C" __global__ void rms_f32(const float* x, const float* weight, float* y, long long rows,
                                   int H, long long x_row_stride, long long y_row_stride,
                                   float eps) {
  rmsnorm<F32>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_f16(const __half* x, const __half* weight, __half* y,
                                   long long rows, int H, long long x_row_stride,
                                   long long y_row_stride, float eps) {
  rmsnorm<F16>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                    __nv_bfloat16* y, long long rows, int H,
                                    long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm<BF16>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
