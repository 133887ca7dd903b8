// Shared pieces of the standalone CUDA benchmarks (bench/cuda/*.cu): the element view of a packed
// 32-bit word, the row arithmetic (sum of squares, scaling, block-wide sum), CUDA-event timing
// (median of the launches after a warm-up) and the output check.
// Header-only; each program includes it by a relative path, so nvcc needs no include flag.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_bf16.h>
#include <vector>

// Element `half` (0 low, 1 high) of a 32-bit word as float: the word itself for float32, the
// upper 16 bits of a float for each bfloat16 half.
template <typename T> __device__ __forceinline__ float ef(unsigned w, int half);
template <> __device__ __forceinline__ float ef<float>(unsigned w, int) {
  return __uint_as_float(w);
}
template <> __device__ __forceinline__ float ef<__nv_bfloat16>(unsigned w, int h) {
  return __uint_as_float(h ? (w & 0xffff0000u) : (w << 16));
}

// Sum of squares of the elements of one 16-byte vector (4 floats or 8 bfloat16), added to ss.
template <typename T> __device__ __forceinline__ float sumsq(uint4 c, float ss) {
  const unsigned u[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float a = ef<T>(u[j], 0);
    ss = fmaf(a, a, ss);
    if (sizeof(T) == 2) {
      const float b = ef<T>(u[j], 1);
      ss = fmaf(b, b, ss);
    }
  }
  return ss;
}

// (x * s) * w for the elements of one 16-byte vector, rounded to T.
template <typename T> __device__ __forceinline__ uint4 scale(uint4 c, uint4 wv, float s) {
  const unsigned u[4] = {c.x, c.y, c.z, c.w}, q[4] = {wv.x, wv.y, wv.z, wv.w};
  unsigned o[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (sizeof(T) == 4) {
      o[j] = __float_as_uint((ef<T>(u[j], 0) * s) * ef<T>(q[j], 0));
    } else {
      __nv_bfloat162 p = __floats2bfloat162_rn((ef<T>(u[j], 0) * s) * ef<T>(q[j], 0),
                                               (ef<T>(u[j], 1) * s) * ef<T>(q[j], 1));
      o[j] = *reinterpret_cast<unsigned*>(&p);
    }
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Block-wide sum (warp shuffle, then one shared-memory barrier; double-buffered slots so the
// next row's writes cannot race this row's reads).
template <int BT>
__device__ __forceinline__ float block_sum(float ss, float (*red)[BT / 32], int& parity) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[parity][threadIdx.x >> 5] = ss;
  __syncthreads();
  float tot = 0.f;
#pragma unroll
  for (int i = 0; i < BT / 32; ++i)
    tot += red[parity][i];
  parity ^= 1;
  return tot;
}

// Median time in ms of `launch()` over `iters` runs that follow `warmup` runs left out of the
// median, each bracketed by CUDA events on the default stream.
template <typename F> float median_ms(F&& launch, int iters, int warmup) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ts;
  for (int i = 0; i < warmup + iters; ++i) {
    cudaEventRecord(a);
    launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= warmup) ts.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

// Output check: every input element has the bytes 0x3f3f... (cudaMemset), so every output element
// is (v * rsqrt(v * v + eps)) * v for that value v. Callers set y to NaN bytes before the timed
// launches of each configuration; four elements (first and last of the first and last row) are
// compared with the host value; a mismatch is printed and counted in g_failures (exit 1).
inline int g_failures = 0;
template <typename T> float host_value(T v);
template <> inline float host_value<float>(float v) {
  return v;
}
template <> inline float host_value<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> bool check_output(const T* y, long long rows, int H, float eps) {
  T one;
  std::memset(&one, 0x3f, sizeof(T));
  const float v = host_value(one);
  const float expect = (v * (1.0f / std::sqrt(v * v + eps))) * v;
  const long long at[4] = {0, H - 1, (rows - 1) * H, rows * H - 1};
  for (long long i : at) {
    T got;
    cudaMemcpy(&got, y + i, sizeof(T), cudaMemcpyDeviceToHost);
    const float g = host_value(got);
    if (!(std::fabs(g - expect) <= 1e-2f * std::fabs(expect))) {
      printf("MISMATCH at element %lld: got %g, expected %g\n", i, g, expect);
      ++g_failures;
      return false;
    }
  }
  return true;
}
