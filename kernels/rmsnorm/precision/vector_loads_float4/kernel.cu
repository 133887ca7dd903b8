// MUST PASS every gate (precision corpus): 16-byte vector loads and stores by reinterpret_cast,
// float4 for float32 and uint4 (eight 16-bit lanes) for float16/bfloat16, the weight through
// __ldg on the same vectors; a scalar tail covers widths that are not a whole number of vectors.
// The manifest declares alignment_bytes 16, so every row starts 16-byte aligned. One block of 256
// threads per row, any row stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T narrow(float v);
template <> __device__ __forceinline__ float narrow<float>(float v) { return v; }
template <> __device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// The 16-byte vector type of T and its lane count.
template <typename T> struct Vec {
  using type = uint4;
  static constexpr int lanes = 8;
};
template <> struct Vec<float> {
  using type = float4;
  static constexpr int lanes = 4;
};

template <typename T>
__device__ void rmsnorm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  using V = typename Vec<T>::type;
  constexpr int L = Vec<T>::lanes;
  __shared__ float partial[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  const int nvec = H / L;
  const V* xv = reinterpret_cast<const V*>(xr);
  const V* wv = reinterpret_cast<const V*>(w);
  V* yv = reinterpret_cast<V*>(yr);
  float ss = 0.f;
  for (int i = threadIdx.x; i < nvec; i += 256) {
    const V p = xv[i];
    const T* e = reinterpret_cast<const T*>(&p);
#pragma unroll
    for (int k = 0; k < L; ++k) {
      const float f = widen(e[k]);
      ss = fmaf(f, f, ss);
    }
  }
  for (int j = nvec * L + threadIdx.x; j < H; j += 256) {
    const float f = widen(xr[j]);
    ss = fmaf(f, f, ss);
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) total += partial[i];
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int i = threadIdx.x; i < nvec; i += 256) {
    const V a = xv[i];
    const V b = __ldg(wv + i);
    V out;
    const T* ae = reinterpret_cast<const T*>(&a);
    const T* be = reinterpret_cast<const T*>(&b);
    T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int k = 0; k < L; ++k) oe[k] = narrow<T>((widen(ae[k]) * scale) * widen(be[k]));
    yv[i] = out;
  }
  for (int j = nvec * L + threadIdx.x; j < H; j += 256)
    yr[j] = narrow<T>((widen(xr[j]) * scale) * widen(w[j]));
}

extern "C" __global__ void rms_f32(const float* x, const float* weight, float* y, long long rows,
                                   int H, long long x_row_stride, long long y_row_stride,
                                   float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_f16(const __half* x, const __half* weight, __half* y,
                                   long long rows, int H, long long x_row_stride,
                                   long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                    __nv_bfloat16* y, long long rows, int H,
                                    long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
