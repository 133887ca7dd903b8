// CUDA runtime helpers (see cuda_rt.h).
#include "evaluator/gpu_worker/cuda_rt.h"

#include <stdexcept>

namespace kloop::gpu {

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
  if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
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
