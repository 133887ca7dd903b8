// MUST PASS every gate (precision corpus, CASES.md Q3): cooperative groups: the block is
// partitioned with cg::tiled_partition<32>, each tile reduces with cg::reduce and cg::plus
// (cooperative_groups/reduce.h includes libcu++), and the first tile combines the tile sums.
// One block of 256 threads per row, any row stride.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ void rmsnorm_cg(const T* x, const T* w, T* y, long long rows, int H, long long xs,
                           long long ys, float eps) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  __shared__ float tile_sums[32];
  __shared__ float s_total;
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  float ss = 0.f;
  for (int j = static_cast<int>(block.thread_rank()); j < H; j += static_cast<int>(block.size())) {
    const float v = widen(xr[j]);
    ss += v * v;
  }
  const float tile_sum = cg::reduce(tile, ss, cg::plus<float>());
  if (tile.thread_rank() == 0) tile_sums[tile.meta_group_rank()] = tile_sum;
  block.sync();
  if (tile.meta_group_rank() == 0) {
    float v = tile.thread_rank() < tile.meta_group_size() ? tile_sums[tile.thread_rank()] : 0.f;
    v = cg::reduce(tile, v, cg::plus<float>());
    if (tile.thread_rank() == 0) s_total = v;
  }
  block.sync();
  const float scale = rsqrtf(s_total / static_cast<float>(H) + eps);
  for (int j = static_cast<int>(block.thread_rank()); j < H; j += static_cast<int>(block.size()))
    put(yr + j, (widen(xr[j]) * scale) * widen(w[j]));
}

extern "C" __global__ void cg_rms_f32(const float* x, const float* weight, float* y,
                                      long long rows, int H, long long x_row_stride,
                                      long long y_row_stride, float eps) {
  rmsnorm_cg(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void cg_rms_f16(const __half* x, const __half* weight, __half* y,
                                      long long rows, int H, long long x_row_stride,
                                      long long y_row_stride, float eps) {
  rmsnorm_cg(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
extern "C" __global__ void cg_rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                       __nv_bfloat16* y, long long rows, int H,
                                       long long x_row_stride, long long y_row_stride, float eps) {
  rmsnorm_cg(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
