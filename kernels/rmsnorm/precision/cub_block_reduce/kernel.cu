// MUST PASS every gate (precision corpus, CASES.md Q3): the row's sum of squares is reduced with
// cub::BlockReduce from the per-algorithm header (CUDA 13 keeps it under include/cccl/), and the
// block size is a namespace-scope constexpr (read-only module data where NVRTC emits it).
// One block of 512 threads per row, any row stride.
#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int kBlockThreads = 512;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T narrow(float v) { return T(v); }
template <> __device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__device__ void rmsnorm_cub(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                            long long rows, int H, long long xs, long long ys, float eps) {
  using BlockReduce = cub::BlockReduce<float, kBlockThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ float s_scale;
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = threadIdx.x; j < H; j += kBlockThreads) {
    const float v = widen(xr[j]);
    ss += v * v;
  }
  const float total = BlockReduce(temp).Sum(ss); // valid in thread 0 only
  if (threadIdx.x == 0) s_scale = rsqrtf(total / static_cast<float>(H) + eps);
  __syncthreads();
  const float scale = s_scale;
  for (int j = threadIdx.x; j < H; j += kBlockThreads)
    yr[j] = narrow<T>((widen(xr[j]) * scale) * widen(w[j]));
}

extern "C" __global__ void __launch_bounds__(kBlockThreads)
    rms_f32(const float* x, const float* weight, float* y, long long rows, int H,
            long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm_cub(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void __launch_bounds__(kBlockThreads)
    rms_f16(const __half* x, const __half* weight, __half* y, long long rows, int H,
            long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm_cub(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void __launch_bounds__(kBlockThreads)
    rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, long long rows,
             int H, long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm_cub(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
