// The one argument packer of every kernel launch (issue 25): the values of one call written into
// aligned storage in the canonical ABI order of the operator's declaration (declaration.h, abi()),
// with an array of parameter addresses in the form cudaLaunchKernel and cuLaunchKernel take
// (`void** args`). No CUDA dependency, so the layout is unit-tested on the CPU; the GPU worker
// passes argv() to cudaLaunchKernel for candidates, baselines and the trusted reference alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/declaration.h"

namespace kloop::op {

// The values of one call, indexed like the declaration (tensor i, axis i, scalar i).
struct AbiValues {
  std::vector<std::uintptr_t> tensors; // address of element 0 of each tensor
  std::int64_t rows = 0;
  std::vector<std::int64_t> axes;        // every axis (fixed ones are not passed)
  std::vector<std::int64_t> row_strides; // per tensor, elements (read for batched tensors)
  std::vector<double> scalars;           // converted to the declared type when packed
};

class PackedArgs {
public:
  // Packs `values` for `params` (abi() of the declaration). Throws std::invalid_argument naming
  // the parameter when a value is missing or does not fit its type (an axis past INT32_MAX).
  PackedArgs(const std::vector<AbiParam>& params, const AbiValues& values);
  PackedArgs(const PackedArgs&) = delete; // argv() points into this object
  PackedArgs& operator=(const PackedArgs&) = delete;

  void** argv() { return argv_.data(); }
  std::size_t size() const { return slots_.size(); }
  // Bytes of parameter i as the kernel receives them (4 or 8).
  std::size_t param_bytes(std::size_t i) const { return bytes_.at(i); }
  const std::byte* param_data(std::size_t i) const { return slots_.at(i).bytes; }

private:
  struct alignas(8) Slot { // every ABI type fits one 8-byte aligned slot
    std::byte bytes[8];
  };
  std::vector<Slot> slots_;
  std::vector<std::size_t> bytes_;
  std::vector<void*> argv_;
};

} // namespace kloop::op
