// MUST PASS every gate (precision corpus, CASES.md Q2/Q3): libcu++ in device code:
// cuda::std::numeric_limits (its many static constexpr members are initialised .global symbols in
// the PTX), cuda::std::uint32_t from <cuda/std/cstdint>, and a cuda::std::array of
// accumulators. One block of 256 threads per row, any row stride.
#include <cuda/std/array>
#include <cuda/std/cstdint>
#include <cuda/std/limits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

static_assert(cuda::std::numeric_limits<float>::is_iec559, "IEEE-754 binary32 accumulation");

constexpr cuda::std::uint32_t kFullMask = cuda::std::numeric_limits<cuda::std::uint32_t>::max();

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ void rmsnorm(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                        long long ys, float eps) {
  __shared__ cuda::std::array<float, 8> warp_sums;
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  cuda::std::array<float, 2> acc{0.f, 0.f};
  const int stride = static_cast<int>(blockDim.x);
  for (int j = threadIdx.x; j < H; j += 2 * stride) {
    const float a = widen(xr[j]);
    acc[0] += a * a;
    const int k = j + stride;
    if (k < H) {
      const float b = widen(xr[k]);
      acc[1] += b * b;
    }
  }
  float ss = acc[0] + acc[1];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(kFullMask, ss, o);
  const cuda::std::uint32_t warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31u) == 0) warp_sums[warp] = ss;
  __syncthreads();
  const int warps = min(static_cast<int>(blockDim.x >> 5), 8);
  float total = 0.f;
  for (int i = 0; i < warps; ++i) total += warp_sums[i];
  const float scale = rsqrtf(total / static_cast<float>(H) + eps);
  for (int j = threadIdx.x; j < H; j += stride) put(yr + j, (widen(xr[j]) * scale) * widen(w[j]));
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
