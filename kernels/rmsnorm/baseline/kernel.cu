// kloop in-tree baseline for weighted_rmsnorm/1: must PASS every gate (it is the benchmark
// baseline). Memory-bound design: a persistent grid loops over rows. Rows of at most 2 KiB are
// owned by a group of 4..32 lanes (about two vectors per lane, several rows per warp; no shared
// memory, no block barrier). Wider rows are owned by the whole block (warp shuffle then a
// shared-memory reduction over warps, double-buffered by row parity so one barrier per row
// suffices); when a row fits in half the register cache, the block takes two rows per iteration
// to keep twice the loads in flight. Each call decides at run time between 16-byte vector
// accesses (x, y, weight and both row strides 16-byte aligned) and scalar accesses, so
// 2-byte-aligned views run here too. The row is cached in registers when it fits and re-read from
// global memory otherwise. fp32 accumulation; y = (x * rsqrt(mean(x^2) + eps)) * w with one final
// round-to-nearest-even cast. Revision 2 (2026-11-30): cached x loads of float16/bfloat16 are one
// cache-hinted load whose L2 policy is evict_last on calls whose x exceeds 64 MiB and evict_first
// otherwise (bf16 65536 x 4096 on the H200: from about 303 us to 271 us cold, docs/RESULTS.md);
// float32 keeps revision 1's streaming loads (__ldcs).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// Enumerators, not namespace-scope constexpr variables: an odr-used constexpr variable becomes a
// .global PTX symbol, which kloop's static gate rejects as module-scope state.
enum : int {
  kWarp = 32,
  kMaxWarps = 32,
  kCache = 6, // 16-byte vectors (or floats in scalar mode) cached per thread
};
enum : long long { kLargeCall = 64LL << 20 }; // bytes of x above which x loads evict last

// L2 cache policy of the cached x loads of one call (uniform per launch): evict_last when `el`
// (a float16/bfloat16 call whose x exceeds kLargeCall; the policy torch.compile's Triton kernels
// give RMSNorm's first loads), else evict_first (x is read once).
__device__ __forceinline__ unsigned long long x_policy(bool el) {
  unsigned long long policy;
  if (el)
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  else
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// One cached 16-byte load of x: float16/bfloat16 under the call's L2 policy (one load
// instruction either way, so small calls run as many instructions as revision 1's streaming
// loads); float32 streams (__ldcs, ld.global.cs) as in revision 1.
template <typename T>
__device__ __forceinline__ uint4 load_x(const uint4* p, unsigned long long policy) {
  if (sizeof(T) == 4) return __ldcs(p);
  uint4 v;
  asm("ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Sum of squares of the N elements packed in one 16-byte vector.
template <typename T> __device__ __forceinline__ float vec_sumsq(const uint4& v) {
  constexpr int N = 16 / sizeof(T);
  const T* e = reinterpret_cast<const T*>(&v);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float f = to_f(e[i]);
    s = fmaf(f, f, s);
  }
  return s;
}

template <typename T>
__device__ __forceinline__ uint4 vec_apply(const uint4& xv, const uint4& wv, float scale) {
  constexpr int N = 16 / sizeof(T);
  const T* xe = reinterpret_cast<const T*>(&xv);
  const T* we = reinterpret_cast<const T*>(&wv);
  uint4 out;
  T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int i = 0; i < N; ++i)
    oe[i] = from_f<T>((to_f(xe[i]) * scale) * to_f(we[i]));
  return out;
}

// Sum over aligned groups of `width` lanes (a power of two <= 32); every lane of the warp calls it.
__device__ __forceinline__ float warp_sum(float v, int width = kWarp) {
  for (int o = width / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the group: a warp (kBlock false) or the whole block (kBlock true; every thread of the
// block must call it). `red` holds two buffers of kMaxWarps partials selected by `parity`.
template <bool kBlock>
__device__ __forceinline__ float group_sum(float v, float* red, int parity, int width) {
  if (!kBlock) return warp_sum(v, width);
  v = warp_sum(v);
  float* buf = red + parity * 2 * kMaxWarps;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) buf[warp] = v;
  __syncthreads(); // producers (lane 0 of each warp) before consumers (every thread)
  float s = 0.f;
  const int nwarps = blockDim.x / kWarp;
  for (int i = 0; i < nwarps; ++i)
    s += buf[i];
  // No second barrier: the next row uses the other buffer, and the row after it is reached only
  // through the next row's barrier, which every thread passes after finishing this read.
  return s;
}

// One row by a group of G threads; t is the thread's index in the group.
template <typename T, bool kBlock>
__device__ void row_norm(const T* __restrict__ xr, const T* __restrict__ w, T* __restrict__ yr,
                         int H, float eps, bool vec, int t, int G, float* red, int parity,
                         bool store, unsigned long long policy) {
  float ss = 0.f;
  if (vec) {
    constexpr int N = 16 / sizeof(T);
    const int nv = H / N;
    const uint4* x4 = reinterpret_cast<const uint4*>(xr);
    const uint4* w4 = reinterpret_cast<const uint4*>(w);
    uint4* y4 = reinterpret_cast<uint4*>(yr);
    uint4 cache[kCache];
#pragma unroll
    for (int k = 0; k < kCache; ++k) {
      const int i = t + k * G;
      if (i < nv) cache[k] = load_x<T>(x4 + i, policy);
    }
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      if (t + k * G < nv) ss += vec_sumsq<T>(cache[k]);
    for (int i = t + kCache * G; i < nv; i += G)
      ss += vec_sumsq<T>(x4[i]);
    for (int j = nv * N + t; j < H; j += G) {
      const float f = to_f(xr[j]);
      ss = fmaf(f, f, ss);
    }
    const float scale = rsqrtf(group_sum<kBlock>(ss, red, parity, G) / static_cast<float>(H) + eps);
#pragma unroll
    for (int k = 0; k < kCache; ++k) {
      const int i = t + k * G;
      if (store && i < nv) __stcs(y4 + i, vec_apply<T>(cache[k], __ldg(w4 + i), scale));
    }
    for (int i = t + kCache * G; store && i < nv; i += G)
      y4[i] = vec_apply<T>(x4[i], __ldg(w4 + i), scale);
    for (int j = nv * N + t; store && j < H; j += G)
      yr[j] = from_f<T>((to_f(xr[j]) * scale) * to_f(w[j]));
  } else {
    float cache[kCache];
#pragma unroll
    for (int k = 0; k < kCache; ++k) {
      const int j = t + k * G;
      cache[k] = j < H ? to_f(xr[j]) : 0.f;
      ss = fmaf(cache[k], cache[k], ss);
    }
    for (int j = t + kCache * G; j < H; j += G) {
      const float f = to_f(xr[j]);
      ss = fmaf(f, f, ss);
    }
    const float scale = rsqrtf(group_sum<kBlock>(ss, red, parity, G) / static_cast<float>(H) + eps);
#pragma unroll
    for (int k = 0; k < kCache; ++k) {
      const int j = t + k * G;
      if (store && j < H) yr[j] = from_f<T>((cache[k] * scale) * to_f(w[j]));
    }
    for (int j = t + kCache * G; store && j < H; j += G)
      yr[j] = from_f<T>((to_f(xr[j]) * scale) * to_f(w[j]));
  }
}

// Two rows at once by the whole block, all of both rows cached in registers (nv <= kHalf * G):
// twice the loads in flight per thread, one barrier for both reductions.
template <typename T>
__device__ void row_pair(const T* __restrict__ x0, T* __restrict__ y0, const T* __restrict__ x1,
                         T* __restrict__ y1, bool has1, const T* __restrict__ w, int H, float eps,
                         float* red, int parity, unsigned long long policy) {
  constexpr int N = 16 / sizeof(T);
  constexpr int kHalf = kCache / 2;
  const int t = threadIdx.x, G = blockDim.x;
  const int nv = H / N;
  const uint4* a4 = reinterpret_cast<const uint4*>(x0);
  const uint4* b4 = reinterpret_cast<const uint4*>(x1);
  const uint4* w4 = reinterpret_cast<const uint4*>(w);
  uint4 ca[kHalf], cb[kHalf];
#pragma unroll
  for (int k = 0; k < kHalf; ++k) {
    const int i = t + k * G;
    if (i < nv) {
      ca[k] = load_x<T>(a4 + i, policy);
      if (has1) cb[k] = load_x<T>(b4 + i, policy);
    }
  }
  float sa = 0.f, sb = 0.f;
#pragma unroll
  for (int k = 0; k < kHalf; ++k)
    if (t + k * G < nv) {
      sa += vec_sumsq<T>(ca[k]);
      if (has1) sb += vec_sumsq<T>(cb[k]);
    }
  for (int j = nv * N + t; j < H; j += G) {
    const float fa = to_f(x0[j]);
    sa = fmaf(fa, fa, sa);
    if (has1) {
      const float fb = to_f(x1[j]);
      sb = fmaf(fb, fb, sb);
    }
  }
  sa = warp_sum(sa);
  sb = warp_sum(sb);
  float* buf = red + parity * 2 * kMaxWarps;
  const int lane = t % kWarp, warp = t / kWarp;
  if (lane == 0) {
    buf[warp] = sa;
    buf[kMaxWarps + warp] = sb;
  }
  __syncthreads(); // producers before consumers; buffers alternate by parity (see group_sum)
  float ta = 0.f, tb = 0.f;
  for (int i = 0; i < G / kWarp; ++i) {
    ta += buf[i];
    tb += buf[kMaxWarps + i];
  }
  const float qa = rsqrtf(ta / static_cast<float>(H) + eps);
  const float qb = rsqrtf(tb / static_cast<float>(H) + eps);
  uint4* ya = reinterpret_cast<uint4*>(y0);
  uint4* yb = reinterpret_cast<uint4*>(y1);
#pragma unroll
  for (int k = 0; k < kHalf; ++k) {
    const int i = t + k * G;
    if (i < nv) {
      const uint4 wv = __ldg(w4 + i);
      __stcs(ya + i, vec_apply<T>(ca[k], wv, qa));
      if (has1) __stcs(yb + i, vec_apply<T>(cb[k], wv, qb));
    }
  }
  for (int j = nv * N + t; j < H; j += G) {
    const float wj = to_f(w[j]);
    y0[j] = from_f<T>((to_f(x0[j]) * qa) * wj);
    if (has1) y1[j] = from_f<T>((to_f(x1[j]) * qb) * wj);
  }
}

template <typename T>
__device__ void rms_impl(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                         long long rows, int H, long long xs, long long ys, float eps) {
  __shared__ float red[4 * kMaxWarps];
  const bool vec =
      ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y) |
        reinterpret_cast<unsigned long long>(w)) %
           16 ==
       0) &&
      (xs * static_cast<long long>(sizeof(T))) % 16 == 0 &&
      (ys * static_cast<long long>(sizeof(T))) % 16 == 0;
  constexpr int N = 16 / sizeof(T);
  // float32 keeps streaming loads: a per-call flag made its path spill more (ptxas: 28 -> 32
  // bytes here, 12 -> 32 bytes inlined into the offline family's composite).
  const unsigned long long policy =
      x_policy(sizeof(T) == 2 &&
               rows * static_cast<long long>(H) * static_cast<long long>(sizeof(T)) > kLargeCall);
  if (static_cast<long long>(H) * sizeof(T) <= 4 * kWarp * 16) {
    // Rows of at most 2 KiB: a group of L lanes per row (L a power of two, 4..32, about two
    // vectors or elements per lane), 32 / L rows per warp; no shared memory, no barrier. The
    // loop runs per warp, so every lane takes part in every shuffle.
    const int units = vec ? (H + N - 1) / N : H;
    int L = 4;
    while (L < kWarp && 2 * L < units)
      L *= 2;
    const int per_warp = kWarp / L;
    const int lane = threadIdx.x % kWarp;
    const int warps = blockDim.x / kWarp;
    const long long wg = static_cast<long long>(blockIdx.x) * warps + threadIdx.x / kWarp;
    const long long step = static_cast<long long>(gridDim.x) * warps * per_warp;
    for (long long base = wg * per_warp; base < rows; base += step) {
      const long long r = base + lane / L;
      const bool valid = r < rows;
      const long long rr = valid ? r : base; // a row that exists; its results are not stored
      row_norm<T, false>(x + rr * xs, w, y + rr * ys, H, eps, vec, lane % L, L, red, 0, valid,
                         policy);
    }
  } else if (vec && H / N <= (kCache / 2) * static_cast<int>(blockDim.x)) {
    int parity = 0;
    for (long long r = blockIdx.x; r < rows; r += 2LL * gridDim.x, parity ^= 1) {
      const long long r1 = r + gridDim.x;
      const bool has1 = r1 < rows;
      const long long rb = has1 ? r1 : r;
      row_pair<T>(x + r * xs, y + r * ys, x + rb * xs, y + rb * ys, has1, w, H, eps, red, parity,
                  policy);
    }
  } else {
    int parity = 0;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x, parity ^= 1)
      row_norm<T, true>(x + r * xs, w, y + r * ys, H, eps, vec, threadIdx.x, blockDim.x, red,
                        parity, true, policy);
  }
}

} // namespace

extern "C" __global__ void __launch_bounds__(256, 4)
    rms_f32(const float* x, const float* weight, float* y, long long rows, int H,
            long long x_row_stride, long long y_row_stride, float eps) {
  rms_impl<float>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

extern "C" __global__ void __launch_bounds__(256, 4)
    rms_f16(const __half* x, const __half* weight, __half* y, long long rows, int H,
            long long x_row_stride, long long y_row_stride, float eps) {
  rms_impl<__half>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}

extern "C" __global__ void __launch_bounds__(256, 4)
    rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, long long rows,
             int H, long long x_row_stride, long long y_row_stride, float eps) {
  rms_impl<__nv_bfloat16>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
