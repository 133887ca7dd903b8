// Source and manifest emitters of the softmax family (family.h). The kernel text is assembled
// from fixed chunks with the variant's constants substituted ($NAME$ markers): the shared helpers,
// the online or the two-pass row function, and the entry points.
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/softmax/contract.h"
#include "kernels/softmax/family.h"

namespace kloop::softmax {

namespace {

// Replaces every $KEY$ of `text` by its value; with `complete`, a marker left over is a bug of
// this file.
std::string substitute(std::string text,
                       const std::vector<std::pair<std::string, std::string>>& values,
                       bool complete = true) {
  for (const auto& [key, value] : values) {
    const std::string marker = "$" + key + "$";
    for (std::size_t at = text.find(marker); at != std::string::npos;
         at = text.find(marker, at + value.size()))
      text.replace(at, marker.size(), value);
  }
  if (complete && text.find('$') != std::string::npos)
    throw std::logic_error("softmax family: unsubstituted marker in the emitted source");
  return text;
}

constexpr const char* kTop = R"(#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// Enumerators, not namespace-scope constexpr variables: an odr-used constexpr variable becomes a
// .global PTX symbol, which kloop's static gate rejects as module-scope state.
enum : int {
  kWarp = 32,
  kBlock = $BLOCK$, // threads per block: the manifest's launch.block_threads
  kMaxWarps = kBlock / kWarp,
  kCache = $CACHE$, // units (vectors, or elements in scalar mode) cached per thread
};

__device__ __forceinline__ float neg_inf() {
  return __int_as_float(0xff800000);
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

// What exponents are taken against: the row max m, or 0 while m is -inf (every element so far
// -inf), so that no -inf - (-inf) = NaN poisons a row that later meets a finite value; an all
// -inf row then has the sum 0 and its outputs 0 * (1 / 0) = NaN, as the contract says.
__device__ __forceinline__ float shift_of(float m) {
  return m == neg_inf() ? 0.f : m;
}

// K elements loaded and stored together: one vector (kVec) or one element.
template <typename T, bool kVec> struct Unit;
)";

constexpr const char* kVecUnit = R"(template <typename T> struct Unit<T, true> {
  enum : int { K = $VEC$ / sizeof(T) };
  $RAW$ raw;
  __device__ __forceinline__ void load(const T* row, int i) {
    raw = reinterpret_cast<const $RAW$*>(row)[i];
  }
  __device__ __forceinline__ float at(int k) const {
    return to_f(reinterpret_cast<const T*>(&raw)[k]);
  }
  __device__ __forceinline__ void store_softmax(T* row, int i, float sh, float inv) const {
    $RAW$ out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int k = 0; k < K; ++k)
      o[k] = from_f<T>(__expf(at(k) - sh) * inv);
    reinterpret_cast<$RAW$*>(row)[i] = out;
  }
};
)";

constexpr const char* kScalarUnit = R"(template <typename T> struct Unit<T, false> {
  enum : int { K = 1 };
  float v;
  __device__ __forceinline__ void load(const T* row, int i) { v = to_f(row[i]); }
  __device__ __forceinline__ float at(int) const { return v; }
  __device__ __forceinline__ void store_softmax(T* row, int i, float sh, float inv) const {
    row[i] = from_f<T>(__expf(v - sh) * inv);
  }
};
)";

// The output pass both row functions end with.
constexpr const char* kWrite =
    R"(  const float inv = 1.f / s; // IEEE division: inf for an all -inf row (0 * inf = NaN below)
#pragma unroll
  for (int k = 0; k < kCache; ++k)
    if (t + k * G < nu) cache[k].store_softmax(yr, t + k * G, sh, inv);
#pragma unroll 1
  for (int i = t + kCache * G; i < nu; i += G) {
    U u;
    u.load(xr, i);
    u.store_softmax(yr, i, sh, inv);
  }
#pragma unroll 1
  for (int j = nu * U::K + t; j < n; j += G)
    yr[j] = from_f<T>(__expf(to_f(xr[j]) - sh) * inv);
}
)";

constexpr const char* kOnline = R"(
// The online softmax state of a thread or a group: running max m (never NaN: fmaxf ignores a NaN,
// whose exp makes s NaN instead) and the sum s of exp(x - shift(m)) over the elements seen.
struct Stat {
  float m;
  float s;
};

// exp(m_old - shift(m_new)) for m_old <= m_new: 1 when they are equal (both -inf or both +inf
// included), 0 from -inf, never NaN.
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  return m_old == m_new ? 1.f : __expf(m_old - shift_of(m_new));
}

__device__ __forceinline__ Stat merge(Stat a, Stat b) {
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * rescale(a.m, m) + b.s * rescale(b.m, m)};
}

// Folds one unit into the state: one rescale per unit, at most (the max rarely grows).
template <typename T, bool kVec>
__device__ __forceinline__ void absorb(Stat& st, const Unit<T, kVec>& u) {
  float cm = u.at(0);
#pragma unroll
  for (int k = 1; k < Unit<T, kVec>::K; ++k)
    cm = fmaxf(cm, u.at(k));
  const float m = fmaxf(st.m, cm);
  const float sh = shift_of(m);
  float add = 0.f;
#pragma unroll
  for (int k = 0; k < Unit<T, kVec>::K; ++k)
    add += __expf(u.at(k) - sh);
  st.s = st.s * rescale(st.m, m) + add;
  st.m = m;
}

__device__ __forceinline__ void absorb_one(Stat& st, float v) {
  const float m = fmaxf(st.m, v);
  st.s = st.s * rescale(st.m, m) + __expf(v - shift_of(m));
  st.m = m;
}

// The merged state of the group of G threads (G a power of two; every thread of the block calls
// it). G <= 32: xor shuffles within aligned lane groups (every lane ends with the same state);
// G > 32: each warp's state in shared memory, one barrier, each thread merges its group's warps
// in the same order. `red` holds two buffers of kMaxWarps states selected by `parity`: the next
// row uses the other buffer, and the row after it is reached only through the next row's barrier,
// which every thread passes after finishing this read, so no second barrier is needed.
__device__ __forceinline__ Stat group_merge(Stat st, int G, Stat* red, int parity) {
  const int width = G < kWarp ? G : kWarp;
  for (int o = width / 2; o > 0; o >>= 1) {
    const Stat other{__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)};
    st = merge(st, other);
  }
  if (G <= kWarp) return st;
  Stat* buf = red + parity * kMaxWarps;
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) buf[warp] = st;
  __syncthreads(); // producers (lane 0 of each warp) before consumers (every thread)
  const int first = (threadIdx.x / G) * (G / kWarp);
  Stat g = buf[first];
  for (int i = 1; i < G / kWarp; ++i)
    g = merge(g, buf[first + i]);
  return g;
}

typedef Stat Shared;
enum : int { kSharedPerRow = kMaxWarps };

// One row by a group of G threads; t is the thread's index in the group. An inactive thread (its
// group has no row this iteration) loads and stores nothing but takes part in the merge.
template <typename T, bool kVec>
__device__ __forceinline__ void row_softmax(const T* __restrict__ xr, T* __restrict__ yr, int n,
                                            int t, int G, bool active, Shared* red, int parity) {
  typedef Unit<T, kVec> U;
  const int nu = n / U::K;
  U cache[kCache];
  Stat st{neg_inf(), 0.f};
  if (active) {
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      if (t + k * G < nu) cache[k].load(xr, t + k * G);
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      if (t + k * G < nu) absorb(st, cache[k]);
#pragma unroll 1
    for (int i = t + kCache * G; i < nu; i += G) {
      U u;
      u.load(xr, i);
      absorb(st, u);
    }
#pragma unroll 1
    for (int j = nu * U::K + t; j < n; j += G)
      absorb_one(st, to_f(xr[j]));
  }
  st = group_merge(st, G, red, parity);
  if (!active) return;
  const float sh = shift_of(st.m);
  const float s = st.s;
)";

constexpr const char* kTwoPass = R"(
// The max (kMax) or the sum of one value over the group of G threads (G a power of two; every
// thread of the block calls it). G <= 32: xor shuffles within aligned lane groups; G > 32: each
// warp's value in shared memory, one barrier, each thread combines its group's warps in the same
// order. `red` holds four buffers of kMaxWarps values, by row parity and by which of the two
// reductions of a row: the next row uses the other pair, and the row after it is reached only
// through the next row's barriers, which every thread passes after finishing these reads.
template <bool kMax>
__device__ __forceinline__ float group_reduce(float v, int G, float* red, int parity) {
  const int width = G < kWarp ? G : kWarp;
  for (int o = width / 2; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  if (G <= kWarp) return v;
  float* buf = red + (2 * parity + (kMax ? 0 : 1)) * kMaxWarps;
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) buf[warp] = v;
  __syncthreads(); // producers (lane 0 of each warp) before consumers (every thread)
  const int first = (threadIdx.x / G) * (G / kWarp);
  float g = buf[first];
  for (int i = 1; i < G / kWarp; ++i)
    g = kMax ? fmaxf(g, buf[first + i]) : g + buf[first + i];
  return g;
}

typedef float Shared;
enum : int { kSharedPerRow = 2 * kMaxWarps };

// One row by a group of G threads in two passes: the row max (fmaxf ignores a NaN, whose exp makes
// the sum NaN instead), then the sum of exp(x - shift(max)); the cached units are read from memory
// once, the streamed rest once per pass. An inactive thread (its group has no row this iteration)
// loads and stores nothing but takes part in both reductions.
template <typename T, bool kVec>
__device__ __forceinline__ void row_softmax(const T* __restrict__ xr, T* __restrict__ yr, int n,
                                            int t, int G, bool active, Shared* red, int parity) {
  typedef Unit<T, kVec> U;
  const int nu = n / U::K;
  U cache[kCache];
  float m = neg_inf();
  if (active) {
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      if (t + k * G < nu) cache[k].load(xr, t + k * G);
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      if (t + k * G < nu)
#pragma unroll
        for (int e = 0; e < U::K; ++e)
          m = fmaxf(m, cache[k].at(e));
#pragma unroll 1
    for (int i = t + kCache * G; i < nu; i += G) {
      U u;
      u.load(xr, i);
#pragma unroll
      for (int e = 0; e < U::K; ++e)
        m = fmaxf(m, u.at(e));
    }
#pragma unroll 1
    for (int j = nu * U::K + t; j < n; j += G)
      m = fmaxf(m, to_f(xr[j]));
  }
  m = group_reduce<true>(m, G, red, parity);
  const float sh = shift_of(m);
  float s = 0.f;
  if (active) {
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      if (t + k * G < nu)
#pragma unroll
        for (int e = 0; e < U::K; ++e)
          s += __expf(cache[k].at(e) - sh);
#pragma unroll 1
    for (int i = t + kCache * G; i < nu; i += G) {
      U u;
      u.load(xr, i);
#pragma unroll
      for (int e = 0; e < U::K; ++e)
        s += __expf(u.at(e) - sh);
    }
#pragma unroll 1
    for (int j = nu * U::K + t; j < n; j += G)
      s += __expf(to_f(xr[j]) - sh);
  }
  s = group_reduce<false>(s, G, red, parity);
  if (!active) return;
)";

// softmax_impl: the access mode, the group size and the row loop.
constexpr const char* kImpl = R"(
template <typename T>
__device__ void softmax_impl(const T* __restrict__ x, T* __restrict__ y, long long rows, int n,
                             long long xs, long long ys) {
  __shared__ Shared red[2 * kSharedPerRow];
$VECTEST$
$GROUP$
  const int per_block = kBlock / G;
  const int t = threadIdx.x % G;
  const long long slot = threadIdx.x / G;
  int parity = 0;
  for (long long base = static_cast<long long>(blockIdx.x) * per_block; base < rows;
       base += static_cast<long long>(gridDim.x) * per_block, parity ^= 1) {
    const long long row = base + slot;
    const bool active = row < rows;
    const long long r = active ? row : 0;
$CALL$
  }
}

} // namespace
)";

constexpr const char* kVecTest = R"(  const bool vec =
      ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)) % $VEC$ ==
       0) &&
      (xs * static_cast<long long>(sizeof(T))) % $VEC$ == 0 &&
      (ys * static_cast<long long>(sizeof(T))) % $VEC$ == 0;
)";

constexpr const char* kVecCall =
    R"(    if (vec)
      row_softmax<T, true>(x + r * xs, y + r * ys, n, t, G, active, red, parity);
    else
      row_softmax<T, false>(x + r * xs, y + r * ys, n, t, G, active, red, parity);)";

constexpr const char* kAutoGroup =
    R"(  // Threads per row: the fewest (a power of two) whose caches hold the row, then widened while
  // the grid still has twice as many row slots as rows.
  const long long units = $UNITS$;
  int G = 1;
  while (G < kBlock && static_cast<long long>(G) * kCache < units)
    G *= 2;
  while (G < kBlock && static_cast<long long>(gridDim.x) * (kBlock / G) >= 2 * rows)
    G *= 2;)";

constexpr const char* kEntry = R"(
extern "C" __global__ void __launch_bounds__($BLOCK$, $MINBLOCKS$)
    softmax_$SUFFIX$(const $TYPE$* x, $TYPE$* y, long long rows, int N, long long x_row_stride,
                long long y_row_stride) {
  softmax_impl<$TYPE$>(x, y, rows, N, x_row_stride, y_row_stride);
}
)";

// The bfloat16 entry: its longer type name wraps the parameter list earlier (as clang-format
// does; the baseline's kernel.cu is checked by it).
constexpr const char* kEntryBf16 = R"(
extern "C" __global__ void __launch_bounds__($BLOCK$, $MINBLOCKS$)
    softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N,
                 long long x_row_stride, long long y_row_stride) {
  softmax_impl<__nv_bfloat16>(x, y, rows, N, x_row_stride, y_row_stride);
}
)";

} // namespace

std::string emit_kernel_body(const Variant& v) {
  if (auto why = validate(v)) throw std::invalid_argument("softmax family: " + *why);
  const std::string vec = std::to_string(v.vec_bytes);
  std::string body = kTop;
  if (v.vec_bytes > 0) body += kVecUnit;
  body += kScalarUnit;
  body += v.pass == Pass::kOnline ? kOnline : kTwoPass;
  body += kWrite;
  const std::string vec_test =
      v.vec_bytes > 0 ? kVecTest : "  // Scalar accesses only (vec_bytes 0).";
  const std::string units =
      v.vec_bytes > 0
          ? "vec ? (n + $VEC$ / static_cast<int>(sizeof(T)) - 1) / ($VEC$ / sizeof(T)) : n"
          : "n";
  const std::string group =
      v.threads_per_row == 0
          ? substitute(kAutoGroup, {{"UNITS", units}}, false)
          : fmt::format("  const int G = {}; // threads per row (fixed)", v.threads_per_row);
  const std::string call =
      v.vec_bytes > 0
          ? kVecCall
          : "    row_softmax<T, false>(x + r * xs, y + r * ys, n, t, G, active, red, parity);";
  body += substitute(kImpl, {{"VECTEST", vec_test}, {"GROUP", group}, {"CALL", call}}, false);
  for (const auto& [suffix, type] :
       {std::pair<const char*, const char*>{"f32", "float"}, {"f16", "__half"}})
    body += substitute(kEntry, {{"SUFFIX", suffix}, {"TYPE", type}}, false);
  body += kEntryBf16;
  return substitute(body, {{"BLOCK", std::to_string(v.block_threads)},
                           {"CACHE", std::to_string(v.cached_units)},
                           {"VEC", vec},
                           {"RAW", v.vec_bytes == 8 ? "uint2" : "uint4"},
                           {"MINBLOCKS", std::to_string(1024 / v.block_threads)}});
}

std::string emit_kernel_source(const Variant& v) {
  return fmt::format(
      "// kloop offline family for row_softmax/1 (kernels/softmax/family.h), member\n"
      "// {}: generated source, its parameters are in its name.\n\n{}",
      variant_name(v), emit_kernel_body(v));
}

std::string emit_manifest(const Variant& v) {
  if (auto why = validate(v)) throw std::invalid_argument("softmax family: " + *why);
  nlohmann::ordered_json m;
  m["contract"] = contract_id();
  m["entry_points"] = {
      {"float32", "softmax_f32"}, {"float16", "softmax_f16"}, {"bfloat16", "softmax_bf16"}};
  m["launch"] = {{"block_threads", v.block_threads},
                 {"rows_per_block", v.rows_per_block()},
                 {"grid", v.grid == FamilyGrid::kPersistent ? "persistent" : "per_rows"},
                 {"dynamic_smem", {{"fixed_bytes", 0}, {"bytes_per_n", 0}}}};
  m["dispatch"] = {{"n_min", 1},
                   {"n_max", 16777216},
                   {"n_multiple_of", 1},
                   {"x_rows", "any_stride"},
                   {"alignment_bytes", 2}};
  m["target"] = "sm_90";
  m["known_limits"] = fmt::format(
      "N up to 2^24 (32-bit element indices within a row); {}; rows wider than {} x {} cached "
      "units are read again for the output",
      v.vec_bytes > 0 ? fmt::format("the vector path needs {}-byte aligned x, y and row strides, "
                                    "otherwise the scalar path runs",
                                    v.vec_bytes)
                      : "scalar accesses only",
      v.threads_per_row == 0 ? v.block_threads : v.threads_per_row, v.cached_units);
  return m.dump(2) + "\n";
}

GeneratedCandidate generate(const Variant& v, std::string_view rationale) {
  GeneratedCandidate c;
  c.kernel_cu = emit_kernel_source(v);
  c.manifest_json = emit_manifest(v);
  c.name = variant_name(v);
  c.rationale = rationale.empty()
                    ? fmt::format("softmax family member {}: {}", c.name,
                                  v.pass == Pass::kOnline ? "online (max, sum) in one pass"
                                                          : "the max, then the sum")
                    : std::string(rationale);
  return c;
}

} // namespace kloop::softmax
