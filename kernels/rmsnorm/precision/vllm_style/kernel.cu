// MUST PASS every gate (precision corpus, CASES.md Q3/Q5/Q7): vLLM's rms_norm_kernel
// (csrc/layernorm_kernels.cu) adapted to kloop's entry-point ABI: the vendor #ifndef USE_ROCM
// include branch (hipcub in the branch that is not compiled), cub::BlockReduce<float, 1024>
// reducing blockDim.x valid items, a shared s_variance, and the output computed as
// ((scalar_t)(x * s_variance)) * weight[idx]: the normalised value is rounded to the output type
// before the weight multiply, which for float16/bfloat16 is a 16-bit multiply (two roundings where
// the contract's reference rounds once; at most 1 ulp of the output away). 1024 threads per row.
#ifndef USE_ROCM
  #include <cub/block/block_reduce.cuh>
#else
  #include <hipcub/hipcub.hpp>
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace vllm {

template <typename scalar_t>
__device__ void rms_norm_body(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                              const long long input_stride, const long long out_stride,
                              const scalar_t* __restrict__ weight, const float epsilon,
                              const long long num_tokens, const int hidden_size) {
  __shared__ float s_variance;
  float variance = 0.0f;
  if (blockIdx.x >= num_tokens) return;

  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = (float)input[blockIdx.x * input_stride + idx];
    variance += x * x;
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduceStore;
  variance = BlockReduce(reduceStore).Reduce(variance, cuda::std::plus<float>{}, blockDim.x);

  if (threadIdx.x == 0) {
    s_variance = rsqrtf(variance / hidden_size + epsilon);
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    float x = (float)input[blockIdx.x * input_stride + idx];
    out[blockIdx.x * out_stride + idx] = ((scalar_t)(x * s_variance)) * weight[idx];
  }
}

} // namespace vllm

extern "C" __global__ void rms_norm_f32(const float* x, const float* weight, float* y,
                                        long long rows, int H, long long x_row_stride,
                                        long long y_row_stride, float eps) {
  vllm::rms_norm_body<float>(y, x, x_row_stride, y_row_stride, weight, eps, rows, H);
}
extern "C" __global__ void rms_norm_f16(const __half* x, const __half* weight, __half* y,
                                        long long rows, int H, long long x_row_stride,
                                        long long y_row_stride, float eps) {
  vllm::rms_norm_body<__half>(y, x, x_row_stride, y_row_stride, weight, eps, rows, H);
}
extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                         __nv_bfloat16* y, long long rows, int H,
                                         long long x_row_stride, long long y_row_stride,
                                         float eps) {
  vllm::rms_norm_body<__nv_bfloat16>(y, x, x_row_stride, y_row_stride, weight, eps, rows, H);
}
