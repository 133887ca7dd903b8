// grid_schedule: the same one-row-per-iteration RMSNorm row code (whole row in registers, warp
// shuffle + one shared-memory barrier per row) launched on different grids and with different
// cache hints, at 65536 x 4096 (float32, bfloat16) and 16384 x 4096 (bfloat16), against a timed
// 1 GiB cudaMemcpy (the benchmark gate's copy ceiling). It answers why the family's persistent
// designs stay near 88-90 % of the copy ceiling while one row per block on a per_rows grid
// reaches 93-96 % (docs/RESULTS.md, 2026-11-30):
//   MODE 0 per_rows (block b owns row b), 1 persistent round robin (grid = occupancy x SMs x
//   gridmul), 2 persistent contiguous chunks; LD 0 __ldcs, 1 __ldg, 2 plain, 3 __ldlu; ST 0
//   __stcs, 1 plain, 2 __stwt; PACK: bf16 pairs rounded with one __floats2bfloat162_rn.
// Build: nvcc -O3 -arch=sm_90 -o grid_schedule bench/cuda/grid_schedule.cu (the CMake target
// grid_schedule does this when CUDA is enabled). Prints one line per configuration: median of 20
// timed launches after 5 warm-up launches (no L2 flush: every tensor here is at least 128 MiB).
#include "bench_common.cuh"

template <typename T, int BT, int C, int MODE, bool PACK, int LD = 0, int ST = 0>
__global__ void __launch_bounds__(BT, 1024 / BT)
    k(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int H,
      float eps) {
  __shared__ float red[2][BT / 32];
  int parity = 0;
  const int t = threadIdx.x;
  const int nv = H * sizeof(T) / 16;
  long long r0, r1, step;
  if (MODE == 0) {
    r0 = blockIdx.x;
    r1 = r0 + 1;
    step = 1;
  } else if (MODE == 1) {
    r0 = blockIdx.x;
    r1 = rows;
    step = gridDim.x;
  } else {
    long long per = (rows + gridDim.x - 1) / gridDim.x;
    r0 = blockIdx.x * per;
    r1 = min(rows, r0 + per);
    step = 1;
  }
  for (long long r = r0; r < r1; r += step) {
    const uint4* xr = reinterpret_cast<const uint4*>(x + r * H);
    uint4* yr = reinterpret_cast<uint4*>(y + r * H);
    const uint4* w4 = reinterpret_cast<const uint4*>(w);
    uint4 c[C];
#pragma unroll
    for (int i = 0; i < C; ++i)
      c[i] = (t + i * BT < nv) ? (LD == 0   ? __ldcs(xr + t + i * BT)
                                  : LD == 1 ? __ldg(xr + t + i * BT)
                                  : LD == 2 ? xr[t + i * BT]
                                            : __ldlu(xr + t + i * BT))
                               : make_uint4(0, 0, 0, 0);
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < C; ++i)
      ss = sumsq<T>(c[i], ss);
    const float tot = block_sum<BT>(ss, red, parity);
    const float s = rsqrtf(tot / H + eps);
#pragma unroll
    for (int i = 0; i < C; ++i) {
      if (t + i * BT >= nv) break;
      uint4 wv = __ldg(w4 + t + i * BT);
      unsigned u[4] = {c[i].x, c[i].y, c[i].z, c[i].w}, q[4] = {wv.x, wv.y, wv.z, wv.w}, o[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (sizeof(T) == 4)
          o[j] = __float_as_uint((ef<T>(u[j], 0) * s) * ef<T>(q[j], 0));
        else {
          float a = (ef<T>(u[j], 0) * s) * ef<T>(q[j], 0),
                b = (ef<T>(u[j], 1) * s) * ef<T>(q[j], 1);
          if (PACK) {
            __nv_bfloat162 p = __floats2bfloat162_rn(a, b);
            o[j] = *reinterpret_cast<unsigned*>(&p);
          } else
            o[j] = (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
                   ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
        }
      }
      {
        uint4 ov = make_uint4(o[0], o[1], o[2], o[3]);
        if (ST == 0)
          __stcs(yr + t + i * BT, ov);
        else if (ST == 1)
          yr[t + i * BT] = ov;
        else
          __stwt(yr + t + i * BT, ov);
      }
    }
  }
}

template <typename T, int BT, int C, int MODE, bool PACK, int LD = 0, int ST = 0>
void run(const char* name, long long rows, int H, int gridmul, T* x, T* w, T* y) {
  auto f = k<T, BT, C, MODE, PACK, LD, ST>;
  int nb = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, BT, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long grid = MODE == 0 ? rows : std::min<long long>(rows, (long long)nb * sms * gridmul);
  cudaMemset(y, 0xff, static_cast<size_t>(rows) * H * sizeof(T));
  const double med = median_ms([&] { f<<<grid, BT>>>(x, w, y, rows, H, 1e-6f); }, 20, 5) * 1e3;
  const double bytes = 2.0 * rows * H * sizeof(T);
  check_output(y, rows, H, 1e-6f);
  printf("%-28s %6lldx%-5d grid %6lld occ %d  %8.1f us  %.3f TB/s  err %s\n", name, rows, H, grid,
         nb, med, bytes / med / 1e6, cudaGetErrorString(cudaGetLastError()));
}

int main() {
  const long long rows = 65536;
  const int H = 4096;
  size_t n = rows * H;
  void *x, *y, *w, *cs, *cd;
  cudaMalloc(&x, n * 4);
  cudaMalloc(&y, n * 4);
  cudaMalloc(&w, H * 4);
  cudaMemset(x, 0x3f, n * 4);
  cudaMemset(w, 0x3f, H * 4);
  size_t cb = 1ull << 30;
  cudaMalloc(&cs, cb);
  cudaMalloc(&cd, cb);
  for (int rep = 0; rep < 2; ++rep) { // grids (streaming hints)
    const float copy_ms =
        median_ms([&] { cudaMemcpyAsync(cd, cs, cb, cudaMemcpyDeviceToDevice); }, 10, 2);
    printf("copy 1GiB: %.1f us %.3f TB/s\n", copy_ms * 1e3, 2.0 * cb / copy_ms / 1e9);
    float* xf = (float*)x;
    float* yf = (float*)y;
    float* wf = (float*)w;
    run<float, 256, 4, 0, false>("f32 perrows b256c4", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 1, false>("f32 pers-rr b256c4", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 1, false>("f32 pers-rr x2 b256c4", rows, H, 2, xf, wf, yf);
    run<float, 256, 4, 1, false>("f32 pers-rr x8 b256c4", rows, H, 8, xf, wf, yf);
    run<float, 256, 4, 2, false>("f32 pers-chunk b256c4", rows, H, 1, xf, wf, yf);
    run<float, 128, 8, 0, false>("f32 perrows b128c8", rows, H, 1, xf, wf, yf);
    run<float, 512, 2, 0, false>("f32 perrows b512c2", rows, H, 1, xf, wf, yf);
    typedef __nv_bfloat16 B;
    B* xb = (B*)x;
    B* yb = (B*)y;
    B* wb = (B*)w;
    run<B, 128, 4, 0, false>("bf16 perrows b128c4", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 0, true>("bf16 perrows b128c4 pack", rows, H, 1, xb, wb, yb);
    run<B, 256, 2, 0, true>("bf16 perrows b256c2 pack", rows, H, 1, xb, wb, yb);
    run<B, 64, 8, 0, true>("bf16 perrows b64c8 pack", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true>("bf16 pers-rr b128c4 pack", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true>("bf16 pers-rr x4 b128c4 pack", rows, H, 4, xb, wb, yb);
    run<B, 128, 4, 2, true>("bf16 pers-chunk b128c4 pack", rows, H, 1, xb, wb, yb);
    run<B, 256, 2, 1, true>("bf16 pers-rr b256c2 pack", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 0, true>("bf16 perrows 16384", 16384, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true>("bf16 pers-rr 16384", 16384, H, 1, xb, wb, yb);
  }
  for (int rep = 0; rep < 2; ++rep) { // cache hints
    float* xf = (float*)x;
    float* yf = (float*)y;
    float* wf = (float*)w;
    run<float, 256, 4, 0, false, 0, 0>("f32 rows b256c4 cs/cs", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 0, false, 1, 0>("f32 rows b256c4 ldg/cs", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 0, false, 2, 1>("f32 rows b256c4 plain/plain", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 0, false, 0, 1>("f32 rows b256c4 cs/plain", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 0, false, 1, 1>("f32 rows b256c4 ldg/plain", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 0, false, 3, 1>("f32 rows b256c4 lu/plain", rows, H, 1, xf, wf, yf);
    run<float, 512, 2, 0, false, 2, 1>("f32 rows b512c2 plain/plain", rows, H, 1, xf, wf, yf);
    run<float, 1024, 1, 0, false, 2, 1>("f32 rows b1024c1 plain/plain", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 1, false, 2, 1>("f32 pers b256c4 plain/plain", rows, H, 1, xf, wf, yf);
    run<float, 256, 4, 1, false, 1, 1>("f32 pers b256c4 ldg/plain", rows, H, 1, xf, wf, yf);
    typedef __nv_bfloat16 B;
    B* xb = (B*)x;
    B* yb = (B*)y;
    B* wb = (B*)w;
    run<B, 128, 4, 0, true, 0, 0>("bf16 rows b128c4 cs/cs", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 0, true, 2, 1>("bf16 rows b128c4 plain/plain", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 0, true, 1, 1>("bf16 rows b128c4 ldg/plain", rows, H, 1, xb, wb, yb);
    run<B, 256, 2, 0, true, 2, 1>("bf16 rows b256c2 plain/plain", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true, 2, 1>("bf16 pers b128c4 plain/plain", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true, 1, 1>("bf16 pers b128c4 ldg/plain", rows, H, 1, xb, wb, yb);
    run<B, 256, 2, 1, true, 2, 1>("bf16 pers b256c2 plain/plain", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true, 0, 1>("bf16 pers b128c4 cs/plain", rows, H, 1, xb, wb, yb);
    run<B, 128, 4, 1, true, 1, 0>("bf16 pers b128c4 ldg/cs", rows, H, 1, xb, wb, yb);
  }
  return g_failures ? 1 : 0;
}
