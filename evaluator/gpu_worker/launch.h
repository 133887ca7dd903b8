// The one launch path of kloop-gpu-worker (issue 25): what the trusted wrapper does for a call of
// any operator, once. A LoadedCandidate is a manifest plus the loaded kernel of every variant's
// entry point; CallLauncher takes one call's geometry, evaluates the dispatch predicate
// (kernels/dispatch.h: the first matching variant, else the trusted reference), and for a variant
// opts into its dynamic shared memory and asks the occupancy calculator, as the wrapper does
// before it launches; launch() then packs the call's arguments in the declaration's canonical ABI
// (kernels/abi_pack.h) and makes one cudaLaunchKernel, or launches the operator's trusted
// reference kernel (kernels/gpu_reference.h) with its RefArgs. The correctness adapter, the
// benchmark, sanitize, pcsample and bench modes all launch through it; none of them knows an
// operator's parameters.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gpu_worker/cuda_rt.h"
#include "kernels/call.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_reference.h"
#include "kernels/manifest.h"
#include "kernels/operator.h"

namespace kloop::gpu {

// A candidate (or baseline) as the worker runs it: its manifest and one loaded kernel per
// (variant, dtype) entry point. Without a manifest every call goes to the reference kernel.
struct LoadedCandidate {
  std::optional<op::Manifest> manifest;
  std::vector<std::map<DType, cudaKernel_t>> kernels; // indexed like manifest->variants
};

// Loads `cubin` into `library` and looks up every entry point of `manifest` (parsed against the
// operator's declaration). Returns "" or the reason the candidate cannot run (a load error, an
// entry point the cubin does not have); a sticky load error throws StickyFault. `attributes`,
// when given, gets {name: {registers, static_smem, local_bytes, max_threads_per_block}}.
std::string load_candidate(const op::Manifest& manifest, const std::string& cubin, Library& library,
                           LoadedCandidate& out, nlohmann::json* attributes = nullptr);

// Bytes of one element of declared tensor `t` in a call of dtype `dtype` (its dtype rule).
std::size_t element_bytes(const op::Tensor& t, DType dtype);

// Shapes and strides of every declared tensor of a call, for the reference kernel's RefArgs (data
// pointers unset). exact_layout: the passed tensors' own shapes and strides (size-1 batch dims
// dropped), the outputs contiguous [batch..., dims]. rows_layout: every batched tensor as
// [rows, dims...] at the geometry's row stride, broadcast tensors contiguous. Throws
// std::runtime_error when a tensor has more than kRefMaxDims dims left.
std::vector<op::RefTensor> exact_layout(const op::Declaration& decl, const op::CallArgs& call,
                                        const op::Validated& v);
std::vector<op::RefTensor> rows_layout(const op::Declaration& decl, const op::CallGeometry& geom);

// A benchmark-style call: `rows` rows of contiguous-within-row batched tensors, each at its row
// stride (row_strides[t], elements; 0 or absent: the row's elements), broadcast tensors
// contiguous, at `addresses` (one per declared tensor).
op::CallGeometry rows_geometry(const op::Declaration& decl, DType dtype, std::int64_t rows,
                               const std::vector<std::int64_t>& axes,
                               const std::vector<std::int64_t>& row_strides,
                               const std::vector<std::uintptr_t>& addresses);

// The metadata of one benchmark shape as the wrapper validates it: a one-row call (tensors of
// shape [1, dims...] or [dims...], the operator's benchmark scalars) and its validation with rows
// set to the shape's. Throws std::runtime_error when the operator rejects it.
struct ShapeCall {
  op::CallArgs meta;
  op::Validated v;
};
ShapeCall shape_call(const op::Operator& op, const op::BenchShape& shape);

class CallLauncher {
public:
  // Plans one call of `op` whose tensors live at geom.tensors[i].addr. `cand` may be null (the
  // reference serves). A variant whose shared-memory opt-in or occupancy the device refuses
  // leaves failure() set (a launch failure of the candidate, reported at the call). `meta` is the
  // call's metadata that wrapper_call validates each time (benchmark calls only).
  CallLauncher(const op::Operator& op, const LoadedCandidate* cand, const op::DeviceInfo& device,
               const op::CallGeometry& geom, const op::Validated& v,
               std::vector<op::RefTensor> layout, const op::CallArgs* meta = nullptr);
  op::Route route() const { return decision_.route; }
  int variant() const { return decision_.variant; }
  const std::string& why() const { return decision_.why; }
  const std::string& failure() const { return failure_; }
  const op::LaunchPlan& plan() const { return plan_; }
  const std::string& entry() const { return entry_; }
  const op::CallGeometry& geometry() const { return geom_; }
  // {"route", "variant", "why", "entry", "plan"} for evidence.
  nlohmann::json to_json() const;
  // The planned launch with the tensors at `addresses` (one per declared tensor; the same
  // alignment as planned); returns cudaGetLastError() right after it. kNoLaunch launches nothing.
  cudaError_t launch(const std::vector<std::uintptr_t>& addresses, cudaStream_t stream) const;
  // Every step of the trusted wrapper for each call: op.validate on the metadata given at
  // construction, the geometry at `addresses`, the dispatch predicate, the occupancy query and
  // plan, then the launch (what the wrapper timing brackets). Returns the launch error, or
  // cudaErrorInvalidValue when validation rejects the call or no metadata was given.
  cudaError_t wrapper_call(const std::vector<std::uintptr_t>& addresses, cudaStream_t stream) const;

private:
  const op::Operator& op_;
  const LoadedCandidate* cand_;
  op::DeviceInfo device_;
  op::CallGeometry geom_;
  op::Validated v_;
  std::vector<op::RefTensor> layout_;
  std::optional<op::CallArgs> meta_;
  std::vector<op::AbiParam> abi_;
  op::DispatchDecision decision_;
  op::LaunchPlan plan_;
  std::string entry_ = "reference";
  std::string failure_;
  op::CallGeometry at(const std::vector<std::uintptr_t>& addresses) const;
  // Shared-memory opt-in and occupancy of variant `variant`; "" or the failure.
  std::string prepare(int variant, int* blocks_per_sm) const;
  cudaError_t launch_variant(int variant, const op::LaunchPlan& plan, const op::CallGeometry& geom,
                             cudaStream_t stream) const;
  cudaError_t launch_reference(const op::CallGeometry& geom, cudaStream_t stream) const;
};

// Device facts of the current device (cudaGetDeviceProperties / attributes).
op::DeviceInfo query_device_info(int device);

} // namespace kloop::gpu
