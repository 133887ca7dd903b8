// CUDA source emission for the offline family (family.h): a fixed prelude of element helpers for
// the chosen vector width, then the row kernel assembled from sections selected by the variant
// (threads-per-row rule, weight staging, register cache, reduction, barriers), then the three
// extern "C" entries.
#include <algorithm>
#include <regex>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "kernels/rmsnorm/family.h"

namespace kloop::rmsnorm {
namespace {

// Cache-hint helpers of the plain_stores option: calls whose x exceeds kLargeCall bytes write y
// with ordinary write-back stores, smaller ones with streaming (evict-first) stores, which keep x
// resident in L2 for warm repeated calls. The threshold is a judgement between two measurements
// on the H200 (docs/RESULTS.md, 2026-11-30): at 32 MiB of x (x and y together already exceed the
// 60 MiB L2) streaming was faster warm; at 512 MiB and more write-back was faster; nothing was
// measured in between. The hint is a scoped enum, so a pointer cannot stand in for it.
constexpr const char* kHintHelpers =
    R"(enum : long long { kLargeCall = 64LL << 20 };  // bytes of x above which stores write back
enum class StoreHint : unsigned char { kStream, kWriteBack };
template <typename T> __device__ __forceinline__ StoreHint store_hint(long long rows, int H) {
  return rows * static_cast<long long>(H) * static_cast<long long>(sizeof(T)) > kLargeCall
             ? StoreHint::kWriteBack
             : StoreHint::kStream;
}
template <typename V> __device__ __forceinline__ void kl_store(StoreHint hint, V* p, const V& v) {
  if (hint == StoreHint::kWriteBack)
    *p = v;  // ordinary write-back store
  else
    __stcs(p, v);  // streaming store (st.global.cs)
}
)";

// Loads under an L2 evict_last cache policy (PTX ISA: createpolicy, ld with .L2::cache_hint), as
// torch.compile's Triton kernels issue them; for the evict_last option (family.h), on calls whose
// x exceeds kLargeCall bytes (evict_last_call). The policy is a register value the compiler
// hoists out of the row loop.
constexpr const char* kLargeCallBytes =
    "enum : long long { kLargeCall = 64LL << 20 };  // bytes of x above which loads evict last\n";
constexpr const char* kEvictLastLoads =
    R"(template <typename T> __device__ __forceinline__ bool evict_last_call(long long rows, int H) {
  return rows * static_cast<long long>(H) * static_cast<long long>(sizeof(T)) > kLargeCall;
}
__device__ __forceinline__ uint4 ld_evict_last(const uint4* p) {
  unsigned long long policy;
  uint4 v;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint2 ld_evict_last(const uint2* p) {
  unsigned long long policy;
  uint2 v;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm("ld.global.L1::evict_last.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
      : "=r"(v.x), "=r"(v.y)
      : "l"(p), "l"(policy));
  return v;
}
)";

// Raw vector type and its global accesses; `plain` gives stores with a per-call cache hint,
// `evict_last` adds the L2 evict_last load helpers (load_el).
std::string emit_raw_and_access(int vb, bool plain, bool evict_last) {
  std::string s;
  if (vb == 16) {
    s += R"(struct alignas(16) Raw {
  unsigned w[4];
};
template <typename T> __device__ __forceinline__ Raw load_ro(const T* p) {
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
  return Raw{{u.x, u.y, u.z, u.w}};
}
template <typename T> __device__ __forceinline__ Raw load_ef(const T* p) {  // evict-first
  const uint4 u = __ldcs(reinterpret_cast<const uint4*>(p));
  return Raw{{u.x, u.y, u.z, u.w}};
}
template <typename T> __device__ __forceinline__ void store_y(T* p, const Raw& r) {
  STORE(reinterpret_cast<uint4*>(p), make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]));
}
)";
  } else if (vb == 8) {
    s += R"(struct alignas(8) Raw {
  unsigned w[2];
};
template <typename T> __device__ __forceinline__ Raw load_ro(const T* p) {
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
  return Raw{{u.x, u.y}};
}
template <typename T> __device__ __forceinline__ Raw load_ef(const T* p) {  // evict-first
  const uint2 u = __ldcs(reinterpret_cast<const uint2*>(p));
  return Raw{{u.x, u.y}};
}
template <typename T> __device__ __forceinline__ void store_y(T* p, const Raw& r) {
  STORE(reinterpret_cast<uint2*>(p), make_uint2(r.w[0], r.w[1]));
}
)";
  } else {
    // validate() admits evict_last only with vector accesses.
    return s + R"(struct Raw {
  unsigned w[1];
};
template <typename T> __device__ __forceinline__ Raw load_ro(const T* p) {
  return Raw{{bits_of<T>(__ldg(p))}};
}
template <typename T> __device__ __forceinline__ void store_y(T* p, const Raw& r) {
  *p = make_t<T>(r.w[0]);
}
)";
  }
  if (evict_last) {
    // load_el: x under the evict_last policy when `el` (evict_last_call, uniform per launch),
    // else the read-only load.
    const char* vt = vb == 16 ? "uint4" : "uint2";
    s = std::string(plain ? "" : kLargeCallBytes) + kEvictLastLoads + s +
        fmt::format("template <typename T> __device__ __forceinline__ Raw load_el(const T* p, bool "
                    "el) {{\n"
                    "  if (!el) return load_ro(p);\n"
                    "  const {0} u = ld_evict_last(reinterpret_cast<const {0}*>(p));\n"
                    "  return Raw{{{{{1}}}}};\n}}\n",
                    vt, vb == 16 ? "u.x, u.y, u.z, u.w" : "u.x, u.y");
  }
  // Vector stores: streaming (st.global.cs); with plain_stores, ordinary write-back stores on
  // calls larger than L2 (store_y's `hint`, see kLargeCall).
  if (plain) {
    for (std::size_t at = s.find("void store_y(T* p, const Raw& r)"); at != std::string::npos;
         at = s.find("void store_y(T* p, const Raw& r)", at))
      s.replace(at, 32, "void store_y(T* p, const Raw& r, StoreHint hint)"), at += 32;
    for (std::size_t at = s.find("STORE("); at != std::string::npos; at = s.find("STORE(", at))
      s.replace(at, 6, "kl_store(hint, ");
    s = std::string(kHintHelpers) + s;
  } else {
    for (std::size_t at = s.find("STORE("); at != std::string::npos; at = s.find("STORE(", at))
      s.replace(at, 5, "__stcs");
  }
  return s;
}

// Element helpers shared by every variant: bit views of the three dtypes, fp32 conversion, and
// round-to-nearest-even narrowing (__float2half_rn / __float2bfloat16_rn).
constexpr const char* kElementHelpers =
    R"(template <typename T> __device__ __forceinline__ unsigned bits_of(T v);
template <> __device__ __forceinline__ unsigned bits_of<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ unsigned bits_of<__half>(__half v) {
  return __half_as_ushort(v);
}
template <> __device__ __forceinline__ unsigned bits_of<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}
template <typename T> __device__ __forceinline__ float from_bits(unsigned b);
template <> __device__ __forceinline__ float from_bits<float>(unsigned b) { return __uint_as_float(b); }
template <> __device__ __forceinline__ float from_bits<__half>(unsigned b) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
}
template <> __device__ __forceinline__ float from_bits<__nv_bfloat16>(unsigned b) {
  return __uint_as_float(b << 16);
}
template <typename T> __device__ __forceinline__ unsigned to_bits(float v);
template <> __device__ __forceinline__ unsigned to_bits<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ unsigned to_bits<__half>(float v) {
  return __half_as_ushort(__float2half_rn(v));
}
template <> __device__ __forceinline__ unsigned to_bits<__nv_bfloat16>(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
template <typename T> __device__ __forceinline__ T make_t(unsigned b);
template <> __device__ __forceinline__ float make_t<float>(unsigned b) { return __uint_as_float(b); }
template <> __device__ __forceinline__ __half make_t<__half>(unsigned b) {
  return __ushort_as_half(static_cast<unsigned short>(b));
}
template <> __device__ __forceinline__ __nv_bfloat16 make_t<__nv_bfloat16>(unsigned b) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(b));
}
)";

// Vector helpers over Raw: element e of a vector of kElems<T>() elements.
constexpr const char* kVectorHelpers =
    R"(template <typename T> __device__ __forceinline__ constexpr int elems() {
  return kVecBytes ? kVecBytes / static_cast<int>(sizeof(T)) : 1;
}
template <typename T> __device__ __forceinline__ float elem(const Raw& r, int e) {
  constexpr int kPer = 4 / static_cast<int>(sizeof(T));
  const unsigned w = r.w[e / kPer];
  return from_bits<T>(kPer == 1 ? w : ((w >> (16 * (e % kPer))) & 0xffffu));
}
template <typename T> __device__ __forceinline__ float sumsq(const Raw& r, float acc) {
#pragma unroll
  for (int e = 0; e < elems<T>(); ++e) {
    const float v = elem<T>(r, e);
    acc = fmaf(v, v, acc);
  }
  return acc;
}
// y = (x * scale) * w, each product rounded in fp32 as the reference does, then narrowed (RNE).
template <typename T> __device__ __forceinline__ Raw normalize(const Raw& xv, const Raw& wv, float scale) {
  constexpr int kPer = 4 / static_cast<int>(sizeof(T));
  Raw o{};
#pragma unroll
  for (int e = 0; e < elems<T>(); ++e)
    o.w[e / kPer] |= to_bits<T>((elem<T>(xv, e) * scale) * elem<T>(wv, e)) << (16 * (e % kPer));
  return o;
}
// Element-wise read of a vector whose address is not vector-aligned.
template <typename T> __device__ __forceinline__ Raw gather_ro(const T* p) {
  constexpr int kPer = 4 / static_cast<int>(sizeof(T));
  Raw r{};
#pragma unroll
  for (int e = 0; e < elems<T>(); ++e) r.w[e / kPer] |= bits_of<T>(__ldg(p + e)) << (16 * (e % kPer));
  return r;
}
// Element-wise write of a vector whose address is not vector-aligned.
template <typename T> __device__ __forceinline__ void scatter_y(T* p, const Raw& r) {
  constexpr int kPer = 4 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int e = 0; e < elems<T>(); ++e)
    p[e] = make_t<T>(kPer == 1 ? r.w[e] : ((r.w[e / kPer] >> (16 * (e % kPer))) & 0xffffu));
}
)";

std::string emit_tpr(const Variant& v) {
  if (v.threads_per_row > 0)
    return fmt::format("  constexpr int tpr = {};  // threads per row\n", v.threads_per_row);
  // Run-time choice: smallest power of two that gives every thread at most kCachedVecs vectors.
  return fmt::format(R"(  int tpr = 4;  // threads per row, chosen per call from H
  {{
    const int nv = (H + kV - 1) / kV;
    while (tpr < kBlockThreads && tpr * {} < nv) tpr <<= 1;
{}    // Few rows: widen rows while the grid has at least twice as many row slots as rows.
    while (tpr < kBlockThreads &&
           static_cast<long long>(gridDim.x) * (kBlockThreads / tpr) >= 2 * rows)
      tpr <<= 1;
  }}
)",
                     v.cached_vecs > 0 ? v.cached_vecs : 2,
                     v.warp_rows
                         ? fmt::format("    // Warp rows: up to {} vectors per row take one warp "
                                       "(no block barrier).\n"
                                       "    if (tpr > 32 && nv <= {}) tpr = 32;\n",
                                       64 * v.cached_vecs, 64 * v.cached_vecs)
                         : std::string());
}

std::string emit_stage() {
  return R"(  // Weight staged as kV copies; copy p holds w[p + q] at q, so a row whose peel head is p reads
  // its body weight with aligned vector loads from copy p.
  extern __shared__ __align__(16) unsigned char kl_smem[];
  T* wst = reinterpret_cast<T*>(kl_smem);
  const int wlen = (H + kV - 1) / kV * kV;
  for (int p = 0; p < kV; ++p)
    for (int q = tid; q < wlen; q += kBlockThreads) {
      const int j = p + q;
      wst[p * wlen + q] = make_t<T>(j < H ? bits_of<T>(__ldg(w + j)) : 0u);
    }
  __syncthreads();
)";
}

bool may_exceed_warp(const Variant& v) {
  return v.threads_per_row == 0 ? v.block_threads > 32 : v.threads_per_row > 32;
}

// Whether the loop body uses a shared reduction buffer (then a barrier ends every iteration).
bool uses_shared_reduction(const Variant& v) {
  return v.reduction == Reduction::kSharedTree || may_exceed_warp(v);
}

std::string emit_reduction(const Variant& v) {
  if (v.reduction == Reduction::kSharedTree)
    return R"(    kl_red[tid] = ss;
    __syncthreads();
    for (int s = tpr >> 1; s > 0; s >>= 1) {
      if (t < s) kl_red[tid] += kl_red[tid + s];
      __syncthreads();
    }
    const float total = kl_red[group * tpr];
)";
  std::string s = R"(    float total = ss;
#pragma unroll
    for (int o = (tpr < 32 ? tpr : 32) >> 1; o > 0; o >>= 1)
      total += __shfl_xor_sync(0xffffffffu, total, o);
)";
  if (may_exceed_warp(v))
    s += R"(    if (tpr > 32) {  // per-warp partials of this row through shared memory
      // Two buffers selected by iteration parity: the barrier of the next iteration separates
      // these reads from the writes two iterations later, so one barrier per row suffices.
      const int wpr = tpr >> 5;
      float* red = kl_red + parity * (kBlockThreads / 32);
      if ((tid & 31) == 0) red[tid >> 5] = total;
      __syncthreads();
      total = 0.0f;
      for (int k = 0; k < wpr; ++k) total += red[group * wpr + k];
    }
)";
  return s;
}

// The cached-vector load loop: dst[k] = the k-th vector this thread caches of the row at ptr
// (peel head `head`, `nvec` whole vectors), issued back to back; `indent` spaces before the loop.
std::string emit_cache_load(int indent, const char* dst, const char* nvec, const char* ptr,
                            const char* head, int count, const char* load) {
  const std::string in(static_cast<std::size_t>(indent), ' ');
  // load_el takes the per-launch evict_last flag `el` (emit_body declares it).
  const char* extra = std::string_view(load) == "load_el" ? ", el" : "";
  return fmt::format("#pragma unroll\n"
                     "{0}for (int k = 0; k < {1}; ++k) {{\n"
                     "{0}  const int i = t + k * tpr;\n"
                     "{0}  {2}[k] = i < {3} ? {4}({5} + {6} + i * kV{7}) : Raw{{}};\n"
                     "{0}}}\n",
                     in, count, dst, nvec, load, ptr, head, extra);
}

std::string emit_body(const Variant& v) {
  const bool vec = v.vec_bytes > 0;
  const bool peel = vec && v.peel;
  const bool stage = v.stage_weight;
  const int c = v.cached_vecs;
  std::string s;
  // A composite keeps this path out of line, so the register allocation of the aligned (baseline)
  // path inlined into the entry stays close to the baseline's own kernel (not identical: the
  // call adds a stack frame, and rms_f32's spills differ; see family_nvrtc_test).
  if (peel)
    s +=
        R"(// Peel length of a row: scalar elements before the first kVecBytes boundary of xr (at most H).
template <typename T> __device__ __forceinline__ int row_head(const T* xr, int H) {
  const int head = static_cast<int>(
      ((kVecBytes - reinterpret_cast<unsigned long long>(xr) % kVecBytes) % kVecBytes) / sizeof(T));
  return head < H ? head : H;
}
)";
  else if (v.prefetch)
    s += "template <typename T> __device__ __forceinline__ int row_head(const T*, int) { return 0; "
         "}\n";
  s += fmt::format("template <typename T>\n__device__ {} void rms_rows(const T* __restrict__ x, ",
                   v.baseline_aligned ? "__noinline__" : "__forceinline__");
  s += "const T* __restrict__ w, T* __restrict__ y,\n    long long rows, int H, long long xs, "
       "long long ys, float eps) {\n";
  s += "  constexpr int kV = elems<T>();  // elements per vector\n";
  s += "  const int tid = static_cast<int>(threadIdx.x);\n";
  s += emit_tpr(v);
  if (v.plain_stores && v.vec_bytes > 0)
    s += "  const StoreHint hint = store_hint<T>(rows, H);  // uniform per launch\n";
  if (v.evict_last) s += "  const bool el = evict_last_call<T>(rows, H);  // uniform per launch\n";
  s += "  const int rpb = kBlockThreads / tpr;  // rows per block iteration\n";
  s += "  const int group = tid / tpr;\n  const int t = tid - group * tpr;\n";
  if (stage) s += emit_stage();
  if (v.reduction == Reduction::kSharedTree)
    s += "  __shared__ float kl_red[kBlockThreads];\n";
  else if (may_exceed_warp(v))
    s += "  __shared__ float kl_red[2 * (kBlockThreads / 32)];  // double-buffered by parity\n"
         "  int parity = 0;\n";
  const char* load = v.evict_first ? "load_ef" : v.evict_last ? "load_el" : "load_ro";
  const bool pf = v.prefetch;
  s += "  const long long step = static_cast<long long>(gridDim.x) * rpb;\n";
  if (pf)
    // Software pipeline: the cached part of the block's first row is loaded before the loop; each
    // iteration then issues the next row's loads before it reduces and writes the current one.
    s += fmt::format(R"(  Raw cache[{}];  // the current row's cached vectors
  {{
    const long long row = static_cast<long long>(blockIdx.x) * rpb + group;
    const T* xr = x + (row < rows ? row : 0LL) * xs;
    const int head = row_head<T>(xr, H);
    const int nvec = row < rows ? (H - head) / kV : 0;
)",
                     c) +
         emit_cache_load(4, "cache", "nvec", "xr", "head", c, load) + "  }\n";
  s +=
      R"(  for (long long base = static_cast<long long>(blockIdx.x) * rpb; base < rows; base += step) {
    const long long row = base + group;
    const bool active = row < rows;  // inactive groups still join the reduction with zeros
    const T* xr = x + (active ? row : 0LL) * xs;
    T* yr = y + (active ? row : 0LL) * ys;
)";
  if (peel)
    s += "    const int head = row_head<T>(xr, H);  // scalar head up to a kVecBytes boundary\n";
  else
    s += "    const int head = 0;\n";
  s += "    const int nvec = active ? (H - head) / kV : 0;\n";
  s += "    const int tail = head + nvec * kV;\n    float ss = 0.0f;\n";
  if (pf)
    s +=
        fmt::format(
            R"(    Raw next[{}];  // the next row's cached vectors, in flight while this row finishes
    {{
      const long long nrow = base + step + group;
      const T* nxr = x + (nrow < rows ? nrow : 0LL) * xs;
      const int nhead = row_head<T>(nxr, H);
      const int nnvec = nrow < rows ? (H - nhead) / kV : 0;
)",
            c) +
        emit_cache_load(6, "next", "nnvec", "nxr", "nhead", c, load) + "    }\n";
  else if (c > 0)
    s += fmt::format(
             "    Raw cache[{0}];  // issued back to back: {0} loads in flight per thread\n", c) +
         emit_cache_load(4, "cache", "nvec", "xr", "head", c, load);
  if (c > 0)
    s += fmt::format(
        "#pragma unroll\n    for (int k = 0; k < {}; ++k) ss = sumsq<T>(cache[k], ss);\n", c);
  s += fmt::format(
      R"(    for (int i = t + {} * tpr; i < nvec; i += tpr) ss = sumsq<T>(load_ro(xr + head + i * kV), ss);
    if (active) {{
      for (int j = t; j < head; j += tpr) {{
        const float v = from_bits<T>(bits_of<T>(__ldg(xr + j)));
        ss = fmaf(v, v, ss);
      }}
      for (int j = tail + t; j < H; j += tpr) {{
        const float v = from_bits<T>(bits_of<T>(__ldg(xr + j)));
        ss = fmaf(v, v, ss);
      }}
    }}
)",
      c);
  s += emit_reduction(v);
  s += "    const float scale = rsqrtf(total / static_cast<float>(H) + eps);\n";
  s += "    if (active) {\n";
  if (stage)
    s += "      const T* wb = wst + head * wlen;  // copy number head: aligned for this row\n";
  else
    s += "      const T* wb = w + head;\n";
  if (peel && !stage)
    s += "      const bool wvec = reinterpret_cast<unsigned long long>(wb) % kVecBytes == 0;\n";
  if (peel)
    s += "      const bool yvec = reinterpret_cast<unsigned long long>(yr + head) % kVecBytes == "
         "0;\n";
  std::string wload;
  if (stage)
    wload = "*reinterpret_cast<const Raw*>(wb + i * kV)";
  else if (peel)
    wload = "wvec ? load_ro(wb + i * kV) : gather_ro(wb + i * kV)";
  else
    wload = "load_ro(wb + i * kV)";
  const std::string sy = v.plain_stores ? "store_y(yr + head + i * kV, o, hint);\n"
                                        : "store_y(yr + head + i * kV, o);\n";
  const std::string store = peel ? "        if (yvec)\n          " + sy +
                                       "        else\n          scatter_y(yr + head + i * kV, o);\n"
                                 : "        " + sy;
  if (c > 0)
    s += fmt::format(R"(#pragma unroll
      for (int k = 0; k < {}; ++k) {{
        const int i = t + k * tpr;
        if (i >= nvec) break;
        const Raw wv = {};
        const Raw o = normalize<T>(cache[k], wv, scale);
{}      }}
)",
                     c, wload, store);
  s += fmt::format(R"(      for (int i = t + {} * tpr; i < nvec; i += tpr) {{
        const Raw wv = {};
        const Raw o = normalize<T>(load_ro(xr + head + i * kV), wv, scale);
{}      }}
      for (int j = t; j < head; j += tpr)
        yr[j] = make_t<T>(to_bits<T>((from_bits<T>(bits_of<T>(__ldg(xr + j))) * scale) *
                                     from_bits<T>(bits_of<T>(__ldg(w + j)))));
      for (int j = tail + t; j < H; j += tpr)
        yr[j] = make_t<T>(to_bits<T>((from_bits<T>(bits_of<T>(__ldg(xr + j))) * scale) *
                                     from_bits<T>(bits_of<T>(__ldg(w + j)))));
    }}
)",
                   c, wload, store);
  if (pf)
    s += fmt::format(R"(#pragma unroll
    for (int k = 0; k < {}; ++k) cache[k] = next[k];
)",
                     c);
  if (uses_shared_reduction(v)) {
    if (v.reduction == Reduction::kSharedTree)
      s += "    __syncthreads();  // the reduction buffer is reused by the next row\n";
    else
      s += "    parity ^= 1;  // the other reduction buffer for the next row\n";
  }
  s += "  }\n}\n";
  return s;
}

// The arguments of the __launch_bounds__ that the embedded baseline gives its entry `entry`, e.g.
// "256, 4": the text between the parentheses of a `__launch_bounds__(...)` directly followed (after
// white space) by `entry (`. Throws std::logic_error when the baseline no longer declares the entry
// that way.
std::string baseline_launch_bounds(const std::string& entry) {
  const std::string src(embedded_baseline_source());
  const std::regex decl(R"(__launch_bounds__\(([^()]*)\)\s*)" + entry + R"(\s*\()");
  std::smatch m;
  if (!std::regex_search(src, m, decl))
    throw std::logic_error("offline family: the embedded baseline no longer declares " + entry +
                           " with a __launch_bounds__; a composite that hands this dtype to the "
                           "baseline cannot copy the baseline's launch bound");
  return m[1].str();
}

// __launch_bounds__(block_threads, min_blocks): min_blocks = resident_threads / block_threads caps
// registers at 65536 / resident_threads per thread. 1024 resident threads (64 registers) keep
// enough loads in flight for HBM3e and keep ptxas from the 32-register target that spilled the
// float32 two-pass body; caches of more than 16 (24) registers get 768 (512) resident threads,
// i.e. 85 (128) registers, so they do not spill. A composite (Variant::baseline_aligned) sends
// aligned calls to the baseline's rms_impl and the rest to this variant's peeled path; with
// Variant::float32_baseline (float16_baseline, bfloat16_baseline) that dtype's entry is the
// baseline's entry (bound and body).
std::string emit_entry(const char* name, const char* type, const Variant& v) {
  // A prefetching variant holds two rows' caches (current and next).
  const int cache_regs = v.cached_vecs * std::max(1, v.vec_bytes / 4) * (v.prefetch ? 2 : 1);
  const int resident = cache_regs > 24 ? 512 : cache_regs > 16 ? 768 : 1024;
  const auto call = [type](const char* fn) {
    return fmt::format("{}<{}>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);\n", fn,
                       type);
  };
  const bool baseline_entry = v.baseline_entry(type);
  std::string body;
  if (baseline_entry)
    body = "  bl::" + call("rms_impl"); // every call of this dtype: the baseline's entry, verbatim
  else if (v.baseline_aligned)
    body = "  if (kl::aligned_call(x, weight, y, x_row_stride, y_row_stride))  // uniform per "
           "launch\n    " +
           call("bl::rms_impl") + "  else\n    " + call("kl::rms_rows");
  else
    body = "  " + call("kl::rms_rows");
  const std::string bounds = baseline_entry ? baseline_launch_bounds(name)
                                            : fmt::format("{}, {}", v.block_threads,
                                                          std::max(1, resident / v.block_threads));
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({2}) {0}(const {1}* x, const {1}* "
      "weight, {1}* y,\n    long long rows, int H, long long x_row_stride, long long y_row_stride, "
      "float eps) {{\n{3}}}\n",
      name, type, bounds, body);
}

constexpr const char* kAlignedCall =
    R"(// Whether a call meets the baseline's vector condition: x, y and weight 16-byte aligned and both
// row strides a multiple of 16 bytes (the same for every thread of the launch).
template <typename T>
__device__ __forceinline__ bool aligned_call(const T* x, const T* w, const T* y, long long xs,
                                             long long ys) {
  return ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y) |
           reinterpret_cast<unsigned long long>(w)) % 16 == 0) &&
         (xs * static_cast<long long>(sizeof(T))) % 16 == 0 &&
         (ys * static_cast<long long>(sizeof(T))) % 16 == 0;
}
)";

// The baseline's device code without its includes and extern "C" entries, for namespace bl: the
// lines before the first one that starts with `extern "C"`, less the CUDA `#include` lines. Throws
// std::logic_error when the baseline's layout no longer fits that cut (an entry or a directive
// would land inside namespace bl, or rms_impl would be missing): the composite must then be
// re-thought, never emitted wrong.
std::string baseline_device_code() {
  const std::string_view src = embedded_baseline_source();
  std::string out;
  std::size_t pos = 0;
  bool cut = false;
  while (pos < src.size()) {
    std::size_t end = src.find('\n', pos);
    if (end == std::string_view::npos) end = src.size();
    const std::string_view line = src.substr(pos, end - pos);
    if (line.rfind("extern \"C\"", 0) == 0) {
      cut = true;
      break;
    }
    const std::size_t first = line.find_first_not_of(" \t");
    const std::string_view body = first == std::string_view::npos ? "" : line.substr(first);
    const bool include = body.rfind("#include <cuda_", 0) == 0;
    if (!body.empty() && body[0] == '#' && !include && body.rfind("#pragma unroll", 0) != 0)
      throw std::logic_error("offline family: the embedded baseline has a directive other than a "
                             "CUDA #include or #pragma unroll (" +
                             std::string(line) +
                             "); the composite variant cannot place it in namespace bl");
    if (!include) {
      out.append(line);
      out.push_back('\n');
    }
    pos = end + 1;
  }
  if (!cut || out.find("extern \"C\"") != std::string::npos ||
      out.find("__device__ void rms_impl(") == std::string::npos)
    throw std::logic_error("offline family: the embedded baseline no longer has its device code "
                           "(with rms_impl) before its extern \"C\" entries; the composite "
                           "variant cannot be emitted");
  return out;
}

} // namespace

std::string emit_kernel_source(const Variant& v) {
  std::string s;
  s += fmt::format("// weighted_rmsnorm/1 candidate from the kloop offline family: {}\n",
                   variant_name(v));
  s += "// Semantics: ms = mean(float(x)^2) in fp32; y = round_rne((float(x) * rsqrtf(ms + eps)) "
       "* float(w)).\n";
  s += "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n\nnamespace kl {\n\n";
  // Enumerators, not constexpr variables: an odr-used namespace-scope constexpr variable becomes a
  // .global PTX symbol. The static gate accepts such read-only data now (docs/PRECISION.md); the
  // enumerators stay so that the emitted sources, and their recorded hashes, do not change.
  s += fmt::format("enum : int {{ kVecBytes = {} }};  // bytes per body access (0: scalar)\n",
                   v.vec_bytes);
  s += fmt::format("enum : int {{ kBlockThreads = {} }};\n\n", v.block_threads);
  s += kElementHelpers;
  s += emit_raw_and_access(v.vec_bytes, v.plain_stores, v.evict_last);
  s += kVectorHelpers;
  s += "\n";
  s += emit_body(v);
  if (v.baseline_aligned) s += "\n" + std::string(kAlignedCall);
  s += "\n}  // namespace kl\n\n";
  if (v.baseline_aligned) {
    s += "// Aligned calls: the in-tree baseline's design, verbatim (kernels/rmsnorm/baseline).\n"
         "namespace bl {\n";
    s += baseline_device_code();
    s += "}  // namespace bl\n\n";
  }
  s += emit_entry("rms_f32", "float", v);
  s += emit_entry("rms_f16", "__half", v);
  s += emit_entry("rms_bf16", "__nv_bfloat16", v);
  return s;
}

} // namespace kloop::rmsnorm
