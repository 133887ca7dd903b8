// MUST PASS every gate (precision corpus, CASES.md Q2/Q3): one template body for the three dtypes,
// conversions chosen with `if constexpr` and cuda::std::is_same_v (libcu++), and a traits class
// whose `static constexpr` members NVRTC emits as initialised .global data (read-only module
// data). A block of 256 threads per row; four accumulators per thread (another summation order).
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T> struct ElementTraits {
  static constexpr bool kIsFloat = cuda::std::is_same_v<T, float>;
  static constexpr int kBytes = static_cast<int>(sizeof(T));
  static constexpr int kAccumulators = 4;
};

template <typename T> __device__ __forceinline__ float to_float(T v) {
  if constexpr (ElementTraits<T>::kIsFloat) {
    return v;
  } else if constexpr (cuda::std::is_same_v<T, __half>) {
    return __half2float(v);
  } else {
    static_assert(cuda::std::is_same_v<T, __nv_bfloat16>, "float, __half or __nv_bfloat16");
    return __bfloat162float(v);
  }
}

template <typename T> __device__ __forceinline__ T from_float(float v) {
  if constexpr (ElementTraits<T>::kIsFloat) {
    return v;
  } else if constexpr (cuda::std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

template <typename T>
__device__ void rmsnorm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  static_assert(ElementTraits<T>::kBytes == 2 || ElementTraits<T>::kBytes == 4, "16 or 32 bits");
  constexpr int A = ElementTraits<T>::kAccumulators;
  __shared__ float warp_sums[8];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float acc[A] = {};
  const int stride = static_cast<int>(blockDim.x);
  int j = threadIdx.x;
  for (; j + (A - 1) * stride < H; j += A * stride) {
#pragma unroll
    for (int a = 0; a < A; ++a) {
      const float v = to_float(xr[j + a * stride]);
      acc[a] = fmaf(v, v, acc[a]);
    }
  }
  for (; j < H; j += stride) {
    const float v = to_float(xr[j]);
    acc[0] = fmaf(v, v, acc[0]);
  }
  float ss = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) total += warp_sums[i];
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int k = threadIdx.x; k < H; k += stride)
    yr[k] = from_float<T>((to_float(xr[k]) * scale) * to_float(w[k]));
}

extern "C" __global__ void rmsnorm_float32(const float* x, const float* weight, float* y,
                                           long long rows, int H, long long x_row_stride,
                                           long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rmsnorm_float16(const __half* x, const __half* weight, __half* y,
                                           long long rows, int H, long long x_row_stride,
                                           long long y_row_stride, float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void rmsnorm_bfloat16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                            __nv_bfloat16* y, long long rows, int H,
                                            long long x_row_stride, long long y_row_stride,
                                            float eps) {
  rmsnorm(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
