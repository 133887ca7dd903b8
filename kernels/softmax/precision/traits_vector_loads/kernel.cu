// MUST PASS every gate (softmax precision corpus, CASES.md Q2, Q6): a type-traits class template
// with static constexpr members (vector width, a name) selects 16-byte vector accesses: x, y and
// both row strides 16-byte aligned take the uint4 path over the row's whole vectors plus a
// scalar tail, anything else the scalar path. Block reductions by warp shuffles and a small
// shared array; three passes (max, sum, write), one block of 256 threads per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T> struct Traits;
template <> struct Traits<float> {
  static constexpr int kVec = 4;
  static constexpr const char* kName = "f32";
  static __device__ __forceinline__ float to_float(float v) { return v; }
  static __device__ __forceinline__ float from_float(float v) { return v; }
};
template <> struct Traits<__half> {
  static constexpr int kVec = 8;
  static constexpr const char* kName = "f16";
  static __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
};
template <> struct Traits<__nv_bfloat16> {
  static constexpr int kVec = 8;
  static constexpr const char* kName = "bf16";
  static __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float v) {
    return __float2bfloat16_rn(v);
  }
};

template <int kThreads> struct Block {
  static constexpr int kWarps = kThreads / 32;
  // Every thread gets op over the block; `scratch` holds kWarps floats; two barriers.
  template <typename Op> static __device__ float all_reduce(float v, float* scratch, Op op) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float r = scratch[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w)
      r = op(r, scratch[w]);
    __syncthreads(); // scratch is reused by the next reduction
    return r;
  }
};

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename T, int kThreads>
__device__ void softmax_traits(const T* x, T* y, long long rows, int N, long long xs,
                               long long ys) {
  using Tr = Traits<T>;
  __shared__ float scratch[Block<kThreads>::kWarps];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * xs;
  T* yr = y + row * ys;
  const bool vec = (reinterpret_cast<unsigned long long>(xr) % 16 == 0) &&
                   (reinterpret_cast<unsigned long long>(yr) % 16 == 0) &&
                   (xs * static_cast<long long>(sizeof(T))) % 16 == 0 &&
                   (ys * static_cast<long long>(sizeof(T))) % 16 == 0;
  const int nv = vec ? N / Tr::kVec : 0; // whole vectors
  const int tail = nv * Tr::kVec;        // first element of the scalar part

  float m = __int_as_float(0xff800000);
  for (int i = threadIdx.x; i < nv; i += kThreads) {
    const uint4 raw = reinterpret_cast<const uint4*>(xr)[i];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < Tr::kVec; ++k)
      m = fmaxf(m, Tr::to_float(e[k]));
  }
  for (int j = tail + threadIdx.x; j < N; j += kThreads)
    m = fmaxf(m, Tr::to_float(xr[j]));
  m = Block<kThreads>::all_reduce(m, scratch, Max());

  float s = 0.f;
  for (int i = threadIdx.x; i < nv; i += kThreads) {
    const uint4 raw = reinterpret_cast<const uint4*>(xr)[i];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < Tr::kVec; ++k)
      s += expf(Tr::to_float(e[k]) - m);
  }
  for (int j = tail + threadIdx.x; j < N; j += kThreads)
    s += expf(Tr::to_float(xr[j]) - m);
  s = Block<kThreads>::all_reduce(s, scratch, Sum());
  const float inv = 1.f / s;

  for (int i = threadIdx.x; i < nv; i += kThreads) {
    const uint4 raw = reinterpret_cast<const uint4*>(xr)[i];
    const T* e = reinterpret_cast<const T*>(&raw);
    uint4 out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int k = 0; k < Tr::kVec; ++k)
      o[k] = Tr::from_float(expf(Tr::to_float(e[k]) - m) * inv);
    reinterpret_cast<uint4*>(yr)[i] = out;
  }
  for (int j = tail + threadIdx.x; j < N; j += kThreads)
    yr[j] = Tr::from_float(expf(Tr::to_float(xr[j]) - m) * inv);
}

extern "C" __global__ void __launch_bounds__(256)
    softmax_f32(const float* x, float* y, long long rows, int N, long long xs, long long ys) {
  softmax_traits<float, 256>(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(256)
    softmax_f16(const __half* x, __half* y, long long rows, int N, long long xs, long long ys) {
  softmax_traits<__half, 256>(x, y, rows, N, xs, ys);
}
extern "C" __global__ void __launch_bounds__(256)
    softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int N, long long xs,
                 long long ys) {
  softmax_traits<__nv_bfloat16, 256>(x, y, rows, N, xs, ys);
}
