// CUDA runtime helpers (see cuda_rt.h).
#include "evaluator/gpu_worker/cuda_rt.h"

#include <algorithm>
#include <stdexcept>

namespace kloop::gpu {

namespace {

// One worker process, one thread touching CUDA memory: plain counters suffice.
struct MemoryState {
  std::uint64_t held = 0, peak = 0, allocations = 0;
  std::uint64_t total = 0, used_before = 0, min_free = UINT64_MAX;
  bool started = false;
};
MemoryState g_mem;

// Samples cudaMemGetInfo; returns false (and leaves the figures alone) when it fails.
bool sample_free(std::size_t* free_bytes) {
  std::size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
    cudaGetLastError(); // non-sticky errors must not leak into the next check()
    return false;
  }
  g_mem.total = t;
  g_mem.min_free = std::min<std::uint64_t>(g_mem.min_free, f);
  *free_bytes = f;
  return true;
}

void note_alloc(std::size_t bytes) {
  g_mem.held += bytes;
  ++g_mem.allocations;
  if (g_mem.held > g_mem.peak) {
    g_mem.peak = g_mem.held;
    std::size_t f = 0;
    if (g_mem.started) sample_free(&f);
  }
}

} // namespace

void mark_memory_start() {
  std::size_t f = 0;
  if (sample_free(&f)) {
    g_mem.used_before = g_mem.total - f;
    g_mem.started = true;
  }
}

nlohmann::json memory_report() {
  nlohmann::json r{{"peak_allocated_bytes", g_mem.peak},
                   {"allocated_bytes", g_mem.held},
                   {"allocations", g_mem.allocations}};
  std::size_t f = 0;
  if (g_mem.started && sample_free(&f)) {
    r["total_bytes"] = g_mem.total;
    r["used_before_bytes"] = g_mem.used_before;
    r["used_after_bytes"] = g_mem.total - f;
    r["min_free_bytes"] = g_mem.min_free;
    r["peak_used_bytes"] = g_mem.total - g_mem.min_free;
  }
  return r;
}

std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

bool is_sticky(cudaError_t err) {
  switch (err) {
  case cudaErrorIllegalAddress:
  case cudaErrorMisalignedAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorIllegalInstruction:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorHardwareStackError:
  case cudaErrorAssert:
  case cudaErrorLaunchTimeout:
  case cudaErrorECCUncorrectable:
  case cudaErrorUnknown:
    return true;
  default:
    return false;
  }
}

std::string fault_class(cudaError_t err) {
  switch (err) {
  case cudaErrorIllegalAddress:
    return "illegal_address";
  case cudaErrorMisalignedAddress:
    return "misaligned_address";
  case cudaErrorLaunchFailure:
    return "launch_failure";
  case cudaErrorIllegalInstruction:
    return "illegal_instruction";
  case cudaErrorInvalidAddressSpace:
    return "invalid_address_space";
  case cudaErrorInvalidPc:
    return "invalid_pc";
  case cudaErrorHardwareStackError:
    return "hardware_stack_error";
  case cudaErrorAssert:
    return "device_assert";
  case cudaErrorLaunchTimeout:
    return "timeout";
  default:
    return "cuda_fault";
  }
}

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  if (is_sticky(err)) throw StickyFault{err, what};
  throw std::runtime_error(std::string(what) + " failed: " + cuda_error_text(err));
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) {
    check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    note_alloc(bytes);
  }
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) {
      cudaFree(ptr_);
      g_mem.held -= bytes_;
    }
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    cudaFree(ptr_);
    g_mem.held -= bytes_;
  }
}

void copy_to_host(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                  const char* what) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), what);
  check(cudaStreamSynchronize(stream), what);
}

Stream::Stream() {
  check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
}
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

cudaError_t Library::load(const std::string& image) {
  return cudaLibraryLoadData(&lib_, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
}

Library::~Library() {
  if (lib_) cudaLibraryUnload(lib_);
}

cudaError_t Library::kernel(const std::string& name, cudaKernel_t* out) const {
  return cudaLibraryGetKernel(out, lib_, name.c_str());
}

} // namespace kloop::gpu
