// Helper kernels of the worker's benchmark, sanitize and pcsample modes (h7-api.md): deterministic
// input fill, the device-side output check of timed iterations against the trusted reference's
// output, and shared-memory scrubbing (poisoning every SM's shared memory right before a
// candidate runs, because this compute-sanitizer's initcheck sees global memory only, DEVICE.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace kloop::gpu {

// Fills n elements of `dtype` at p with values uniform in [lo, hi) from a counter hash of
// (seed, index): same seed, same bytes, on any launch configuration.
cudaError_t fill_uniform(DType dtype, void* p, std::int64_t n, std::uint64_t seed, float lo,
                         float hi, cudaStream_t stream);

// Element check of `actual` against `expected` (n elements of `dtype`): an element passes when
// its bits are equal, or both are NaN, or both finite with |a-e| <= atol + rtol*|e|. Writes to
// `out` (device memory, 3 x 8 bytes, zeroed by the call): [0] failing element count, [1] first
// failing index + 1 (0 if none), [2] max |a-e| over finite pairs as double bits (max via
// atomicMax on the ordered bit pattern of a non-negative double).
cudaError_t compare_outputs(DType dtype, const void* actual, const void* expected, std::int64_t n,
                            double atol, double rtol, unsigned long long* out, cudaStream_t stream);

// Writes the 32-bit `pattern` over the whole dynamic shared memory of `blocks` blocks, each
// taking `smem_bytes` (the device's opt-in maximum), so that every SM's shared memory holds the
// pattern before the next kernel. Sets the opt-in attribute and the maximum shared carveout.
// Counts the 4-byte words of p[0, bytes) (bytes / 4 whole words) equal to `value` into *out
// (device memory, overwritten). Used to report how much of a poisoned output survived a round.
cudaError_t count_words(const void* p, std::size_t bytes, std::uint32_t value,
                        unsigned long long* out, cudaStream_t stream);
cudaError_t scrub_shared(std::uint32_t pattern, int blocks, int smem_bytes, cudaStream_t stream);

// Cold-L2 flush over `buf` (128-byte aligned, as cudaMalloc gives; `bytes` a multiple of 128, at
// least 2x L2; otherwise cudaErrorInvalidValue and nothing is enqueued): reads the buffer under
// an L2 evict_last policy, so lines a candidate loaded with evict_last (which a memset's
// normal-priority writes leave in L2) are replaced by the buffer's own at the same priority;
// discards those lines (discard.global.L2: invalidated, no write-back), so they do not crowd the
// next warm samples; then memsets the buffer to `value` (the earlier flush). Measured on the H200
// (bench/cuda/two_pass.cu, docs/RESULTS.md 2026-11-30 sixth session): after an evict_last read of
// a 32 MiB x, a plain read of x took 13.6 us after the memset alone (part of x still in L2), 15.3
// us after this flush, 15.4 us cold.
cudaError_t flush_l2(void* buf, std::size_t bytes, int value, cudaStream_t stream);

// Holds `stream` until the host writes a non-zero value to `*release` (host-pinned memory mapped
// into the device's address space, read through `release_dev`) or `timeout_ns` of GPU global-timer
// time passed; writes 1 to `*timed_out_dev` when the timeout released it. The benchmark enqueues
// one round of timed launches behind it, so no timed interval starts on an idle GPU waiting for
// the host's next launch (the blocking-kernel method of NVIDIA's nvbench).
cudaError_t block_stream(const volatile int* release_dev, int* timed_out_dev,
                         unsigned long long timeout_ns, cudaStream_t stream);

} // namespace kloop::gpu
