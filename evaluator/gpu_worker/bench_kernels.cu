// Helper kernels of the benchmark, sanitize and pcsample modes (bench_kernels.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "evaluator/gpu_worker/bench_kernels.h"

namespace kloop::gpu {

namespace {

__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) { // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T> __device__ T from_float(float v);
template <> __device__ float from_float<float>(float v) {
  return v;
}
template <> __device__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
__device__ float to_float(float v) {
  return v;
}
__device__ float to_float(__half v) {
  return __half2float(v);
}
__device__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__global__ void fill_kernel(T* p, long long n, unsigned long long seed, float lo, float hi) {
  for (long long i = blockIdx.x * 1LL * blockDim.x + threadIdx.x; i < n;
       i += 1LL * gridDim.x * blockDim.x) {
    const std::uint64_t r = mix(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(i));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f); // [0, 1)
    p[i] = from_float<T>(lo + (hi - lo) * u);
  }
}

template <typename T, typename Bits>
__global__ void compare_kernel(const T* a, const T* e, long long n, double atol, double rtol,
                               unsigned long long* out) {
  for (long long i = blockIdx.x * 1LL * blockDim.x + threadIdx.x; i < n;
       i += 1LL * gridDim.x * blockDim.x) {
    const Bits ab = reinterpret_cast<const Bits*>(a)[i];
    const Bits eb = reinterpret_cast<const Bits*>(e)[i];
    if (ab == eb) continue;
    const double av = to_float(a[i]), ev = to_float(e[i]);
    bool ok;
    if (isnan(av) || isnan(ev)) {
      ok = isnan(av) && isnan(ev);
    } else if (isinf(av) || isinf(ev)) {
      ok = av == ev;
    } else {
      const double d = fabs(av - ev);
      atomicMax(&out[2], static_cast<unsigned long long>(__double_as_longlong(d)));
      ok = d <= atol + rtol * fabs(ev);
    }
    if (!ok) {
      atomicAdd(&out[0], 1ULL);
      atomicMin(&out[1], static_cast<unsigned long long>(i + 1));
    }
  }
}

__global__ void count_words_kernel(const std::uint32_t* p, long long n, std::uint32_t value,
                                   unsigned long long* out) {
  unsigned long long c = 0;
  for (long long i = blockIdx.x * 1LL * blockDim.x + threadIdx.x; i < n;
       i += 1LL * gridDim.x * blockDim.x)
    c += p[i] == value;
  if (c) atomicAdd(out, c);
}

__global__ void init_out(unsigned long long* out) {
  out[0] = 0;
  out[1] = ~0ULL;
  out[2] = 0;
}
__global__ void fix_first(unsigned long long* out) {
  if (out[1] == ~0ULL) out[1] = 0;
}

__global__ void scrub_kernel(std::uint32_t pattern, int words, int* sink) {
  extern __shared__ std::uint32_t smem[];
  volatile std::uint32_t* s = smem;
  for (int i = threadIdx.x; i < words; i += blockDim.x)
    s[i] = pattern;
  __syncthreads();
  // A read the compiler cannot drop keeps the stores alive.
  if (s[(threadIdx.x * 7) % words] != pattern) atomicAdd(sink, 1);
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void block_kernel(const volatile int* release, int* timed_out,
                             unsigned long long timeout_ns) {
  const unsigned long long t0 = global_ns();
  while (*release == 0) {
    if (global_ns() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

// One pass of flush_l2 over n 16-byte words: pass 0 reads them under an L2 evict_last policy,
// pass 1 discards their 128-byte lines from L2.
__global__ void flush_kernel(const uint4* buf, long long n, int pass) {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (pass == 0) {
      unsigned a, b, c, d; // volatile asm: the loads stay although the values are unused
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                   : "l"(buf + i), "l"(policy));
    } else if (i % 8 == 0 && i + 8 <= n) { // whole lines of the buffer only
      asm volatile("discard.global.L2 [%0], 128;" ::"l"(buf + i) : "memory");
    }
  }
}

int grid_for(long long n) {
  const long long blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 132 * 16 ? (blocks < 1 ? 1 : blocks) : 132 * 16);
}

} // namespace

cudaError_t fill_uniform(DType dtype, void* p, std::int64_t n, std::uint64_t seed, float lo,
                         float hi, cudaStream_t stream) {
  const int g = grid_for(n);
  switch (dtype) {
  case DType::kFloat32:
    fill_kernel<<<g, 256, 0, stream>>>(static_cast<float*>(p), n, seed, lo, hi);
    break;
  case DType::kFloat16:
    fill_kernel<<<g, 256, 0, stream>>>(static_cast<__half*>(p), n, seed, lo, hi);
    break;
  case DType::kBFloat16:
    fill_kernel<<<g, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed, lo, hi);
    break;
  }
  return cudaGetLastError();
}

cudaError_t compare_outputs(DType dtype, const void* actual, const void* expected, std::int64_t n,
                            double atol, double rtol, unsigned long long* out,
                            cudaStream_t stream) {
  init_out<<<1, 1, 0, stream>>>(out);
  const int g = grid_for(n);
  switch (dtype) {
  case DType::kFloat32:
    compare_kernel<float, std::uint32_t><<<g, 256, 0, stream>>>(
        static_cast<const float*>(actual), static_cast<const float*>(expected), n, atol, rtol, out);
    break;
  case DType::kFloat16:
    compare_kernel<__half, std::uint16_t>
        <<<g, 256, 0, stream>>>(static_cast<const __half*>(actual),
                                static_cast<const __half*>(expected), n, atol, rtol, out);
    break;
  case DType::kBFloat16:
    compare_kernel<__nv_bfloat16, std::uint16_t>
        <<<g, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(actual),
                                static_cast<const __nv_bfloat16*>(expected), n, atol, rtol, out);
    break;
  }
  fix_first<<<1, 1, 0, stream>>>(out);
  return cudaGetLastError();
}

cudaError_t count_words(const void* p, std::size_t bytes, std::uint32_t value,
                        unsigned long long* out, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(out, 0, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return e;
  const long long n = static_cast<long long>(bytes / 4);
  count_words_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const std::uint32_t*>(p), n,
                                                      value, out);
  return cudaGetLastError();
}

cudaError_t scrub_shared(std::uint32_t pattern, int blocks, int smem_bytes, cudaStream_t stream) {
  cudaError_t e =
      cudaFuncSetAttribute(scrub_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(scrub_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
  if (e != cudaSuccess) return e;
  static int* sink = nullptr;
  if (!sink) {
    if ((e = cudaMalloc(&sink, sizeof(int))) != cudaSuccess) return e;
    if ((e = cudaMemset(sink, 0, sizeof(int))) != cudaSuccess) return e;
  }
  scrub_kernel<<<blocks, 1024, static_cast<std::size_t>(smem_bytes), stream>>>(
      pattern, smem_bytes / 4, sink);
  return cudaGetLastError();
}

cudaError_t flush_l2(void* buf, std::size_t bytes, int value, cudaStream_t stream) {
  // discard.global.L2 takes 128-byte aligned lines; an unaligned buffer would discard bytes of
  // its neighbours.
  if (reinterpret_cast<std::uintptr_t>(buf) % 128 != 0 || bytes % 128 != 0)
    return cudaErrorInvalidValue;
  const long long n = static_cast<long long>(bytes / 16);
  for (int pass = 0; pass < 2; ++pass)
    flush_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const uint4*>(buf), n, pass);
  cudaError_t e;
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return cudaMemsetAsync(buf, value, bytes, stream);
}

cudaError_t block_stream(const volatile int* release_dev, int* timed_out_dev,
                         unsigned long long timeout_ns, cudaStream_t stream) {
  block_kernel<<<1, 1, 0, stream>>>(release_dev, timed_out_dev, timeout_ns);
  return cudaGetLastError();
}

} // namespace kloop::gpu
