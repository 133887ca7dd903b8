// CUDA runtime helpers of kloop-gpu-worker: RAII owners for device memory, streams and loaded
// libraries (cudart_static only; the driver is found at run time, so the worker starts on a
// machine without one), error naming, and the classification of sticky faults. A sticky error
// (illegal address, misaligned address, launch failure, ...) leaves the CUDA context unusable
// (CUDA Runtime API, "cudaError": "the process must be terminated and relaunched"); it is thrown
// as StickyFault, which deliberately does not derive from std::exception so that no generic
// handler on the way (the correctness core catches std::exception) can swallow it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace kloop::gpu {

// "cudaErrorIllegalAddress: an illegal memory access was encountered".
std::string cuda_error_text(cudaError_t err);
// Whether `err` poisons the context (the worker must exit after reporting it).
bool is_sticky(cudaError_t err);
// Fault class of a sticky error: "illegal_address", "misaligned_address", "launch_failure",
// "illegal_instruction", "invalid_pc", "hardware_stack_error", "device_assert", "timeout",
// "cuda_fault" (any other sticky error).
std::string fault_class(cudaError_t err);

struct StickyFault {
  cudaError_t error;
  std::string where; // the call that reported it
};

// Throws StickyFault for a sticky error and std::runtime_error (ours: infra) for any other error.
void check(cudaError_t err, const char* what);

// Copies `bytes` from device memory `src` to host memory `dst` after every operation enqueued on
// `stream` so far (cudaMemcpyAsync on `stream`, then cudaStreamSynchronize). The worker's streams
// are non-blocking (Stream below), and a plain cudaMemcpy runs on the legacy default stream, which
// does not wait for them (CUDA Runtime API, "Stream synchronization behavior"): it could read a
// result before the kernel that writes it has finished. Errors as check().
void copy_to_host(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                  const char* what);

// Device-memory accounting of this worker process (issue 8: each GPU worker's peak device memory
// is recorded). Every DeviceBuffer reports its cudaMalloc/cudaFree here; cudaMemGetInfo is sampled
// once after context creation (mark_memory_start), at each new allocation peak (the smallest free
// figure seen) and when the report is written. Memory the CUDA runtime, CUPTI or the candidate's
// module take for themselves shows only in the cudaMemGetInfo figures.
void mark_memory_start();
// {"peak_allocated_bytes", "allocated_bytes" (still held), "allocations", "total_bytes",
//  "used_before_bytes", "used_after_bytes", "min_free_bytes", "peak_used_bytes"
//  (total - min_free)}; cudaMemGetInfo fields are absent when it failed (no context, sticky fault).
nlohmann::json memory_report();

// Device memory of exactly `bytes` bytes (cudaMalloc; bytes == 0 allocates nothing).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }
  std::size_t size() const { return bytes_; }

private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
public:
  Stream(); // non-blocking stream
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  cudaStream_t get() const { return s_; }

private:
  cudaStream_t s_ = nullptr;
};

// A cubin loaded with cudaLibraryLoadData (no libcuda link needed).
class Library {
public:
  Library() = default;
  // Returns the load error instead of throwing for candidate-caused failures.
  cudaError_t load(const std::string& image);
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();
  bool loaded() const { return lib_ != nullptr; }
  // cudaLibraryGetKernel; returns the error (e.g. symbol not found).
  cudaError_t kernel(const std::string& name, cudaKernel_t* out) const;

private:
  cudaLibrary_t lib_ = nullptr;
};

} // namespace kloop::gpu
