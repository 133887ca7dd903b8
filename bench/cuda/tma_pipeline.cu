// tma_pipeline: a persistent RMSNorm whose block streams its rows into shared memory with Hopper
// bulk copies (cp.async.bulk + mbarrier, S stages, one row per stage) and writes y from registers;
// float32 and bfloat16 65536 x 4096 (and 16384 x 4096). The question it answers: does an
// asynchronous multi-stage pipeline lift a persistent grid to the bandwidth of one row per block
// on a per_rows grid (grid_schedule.cu)? Measured on the H200 (docs/RESULTS.md, 2026-11-30): no,
// 284 us bf16 / 559 us float32 against 265-276 us / 522-547 us.
// Build: nvcc -O3 -arch=sm_90 -o tma_pipeline bench/cuda/tma_pipeline.cu (CMake target
// tma_pipeline when CUDA is enabled). Prints one line per configuration (median of 20 launches).
#include <cstdint>

#include "bench_common.cuh"

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, unsigned bytes, uint64_t* b) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(b))
      : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, unsigned parity) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p "
               "bra W;\n}" ::"r"(smem_u32(b)),
               "r"(parity)
               : "memory");
}

template <typename T, int BT, int C, int S>
__global__ void __launch_bounds__(BT, 1) k(const T* __restrict__ x, const T* __restrict__ w,
                                           T* __restrict__ y, long long rows, int H, float eps) {
  extern __shared__ __align__(128) unsigned char sm[];
  __shared__ __align__(8) uint64_t bar[S];
  __shared__ float red[2][BT / 32];
  const int t = threadIdx.x;
  const unsigned rb = H * sizeof(T);
  const int nv = rb / 16;
  if (t == 0) {
    for (int s = 0; s < S; ++s)
      mbar_init(&bar[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const long long G = gridDim.x;
  if (t == 0)
    for (int s = 0; s < S; ++s) {
      long long r = blockIdx.x + s * G;
      if (r < rows) {
        mbar_expect(&bar[s], rb);
        bulk_g2s(sm + s * rb, x + r * H, rb, &bar[s]);
      }
    }
  const uint4* w4 = reinterpret_cast<const uint4*>(w);
  int i = 0;
  for (long long r = blockIdx.x; r < rows; r += G, ++i) {
    const int s = i % S;
    const unsigned ph = (i / S) & 1;
    mbar_wait(&bar[s], ph);
    const uint4* st = reinterpret_cast<const uint4*>(sm + s * rb);
    uint4 c[C];
#pragma unroll
    for (int q = 0; q < C; ++q)
      c[q] = (t + q * BT < nv) ? st[t + q * BT] : make_uint4(0, 0, 0, 0);
    float ss = 0.f;
#pragma unroll
    for (int q = 0; q < C; ++q) {
      unsigned u[4] = {c[q].x, c[q].y, c[q].z, c[q].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (sizeof(T) == 4) {
          float v = ef<T>(u[j], 0);
          ss = fmaf(v, v, ss);
        } else {
          float a = ef<T>(u[j], 0), b = ef<T>(u[j], 1);
          ss = fmaf(a, a, ss);
          ss = fmaf(b, b, ss);
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((t & 31) == 0) red[i & 1][t >> 5] = ss;
    __syncthreads(); // also: every thread has read stage s
    if (t == 0) {
      long long rn = r + S * G;
      if (rn < rows) {
        mbar_expect(&bar[s], rb);
        bulk_g2s(sm + s * rb, x + rn * H, rb, &bar[s]);
      }
    }
    float tot = 0.f;
#pragma unroll
    for (int q = 0; q < BT / 32; ++q)
      tot += red[i & 1][q];
    const float sc = rsqrtf(tot / H + eps);
    uint4* yr = reinterpret_cast<uint4*>(y + r * H);
#pragma unroll
    for (int q = 0; q < C; ++q) {
      if (t + q * BT >= nv) break;
      uint4 wv = __ldg(w4 + t + q * BT);
      unsigned u[4] = {c[q].x, c[q].y, c[q].z, c[q].w}, ww[4] = {wv.x, wv.y, wv.z, wv.w}, o[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (sizeof(T) == 4)
          o[j] = __float_as_uint((ef<T>(u[j], 0) * sc) * ef<T>(ww[j], 0));
        else {
          __nv_bfloat162 p = __floats2bfloat162_rn((ef<T>(u[j], 0) * sc) * ef<T>(ww[j], 0),
                                                   (ef<T>(u[j], 1) * sc) * ef<T>(ww[j], 1));
          o[j] = *reinterpret_cast<unsigned*>(&p);
        }
      }
      __stcs(yr + t + q * BT, make_uint4(o[0], o[1], o[2], o[3]));
    }
  }
}

template <typename T, int BT, int C, int S>
void run(const char* name, long long rows, int H, T* x, T* w, T* y) {
  auto f = k<T, BT, C, S>;
  size_t smem = (size_t)S * H * sizeof(T);
  cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  int nb = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, BT, smem);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long grid = std::min<long long>(rows, (long long)nb * sms);
  cudaMemset(y, 0xff, static_cast<size_t>(rows) * H * sizeof(T));
  const double med =
      median_ms([&] { f<<<grid, BT, smem>>>(x, w, y, rows, H, 1e-6f); }, 20, 5) * 1e3;
  const double bytes = 2.0 * rows * H * sizeof(T);
  check_output(y, rows, H, 1e-6f);
  printf("%-26s %6lldx%-5d grid %5lld occ %d smem %6zu %8.1f us  %.3f TB/s  %s\n", name, rows, H,
         grid, nb, smem, med, bytes / med / 1e6, cudaGetErrorString(cudaGetLastError()));
}
int main() {
  const long long rows = 65536;
  const int H = 4096;
  size_t n = rows * H;
  void *x, *y, *w;
  cudaMalloc(&x, n * 4);
  cudaMalloc(&y, n * 4);
  cudaMalloc(&w, H * 4);
  cudaMemset(x, 0x3f, n * 4);
  cudaMemset(w, 0x3f, H * 4);
  typedef __nv_bfloat16 B;
  for (int rep = 0; rep < 2; ++rep) {
    float* xf = (float*)x;
    float* yf = (float*)y;
    float* wf = (float*)w;
    run<float, 256, 4, 2>("f32 tma b256 S2", rows, H, xf, wf, yf);
    run<float, 256, 4, 3>("f32 tma b256 S3", rows, H, xf, wf, yf);
    run<float, 256, 4, 4>("f32 tma b256 S4", rows, H, xf, wf, yf);
    run<float, 512, 2, 4>("f32 tma b512 S4", rows, H, xf, wf, yf);
    run<float, 512, 2, 6>("f32 tma b512 S6", rows, H, xf, wf, yf);
    run<float, 256, 4, 3>("f32 tma b256 S3 16k", 16384, H, xf, wf, yf);
    B* xb = (B*)x;
    B* yb = (B*)y;
    B* wb = (B*)w;
    run<B, 256, 2, 2>("bf16 tma b256 S2", rows, H, xb, wb, yb);
    run<B, 256, 2, 4>("bf16 tma b256 S4", rows, H, xb, wb, yb);
    run<B, 256, 2, 6>("bf16 tma b256 S6", rows, H, xb, wb, yb);
    run<B, 128, 4, 4>("bf16 tma b128 S4", rows, H, xb, wb, yb);
    run<B, 512, 1, 8>("bf16 tma b512 S8", rows, H, xb, wb, yb);
    run<B, 256, 2, 4>("bf16 tma b256 S4 16k", 16384, H, xb, wb, yb);
  }
  return g_failures ? 1 : 0;
}
