// One path (a candidate cubin, the in-tree baseline cubin, or the trusted reference kernel) planned
// for repeated launches on device buffers of x [rows, h] (row stride in elements), weight [h] and
// a contiguous y. Used by the worker's benchmark, sanitize and pcsample modes (h7-api.md). Two
// ways to call it: `launch` replays the planned launch only (what the kernel timing brackets), and
// `wrapper_call` runs the whole trusted-wrapper path each time: validation of the call's metadata
// (rmsnorm::validate), call geometry, the dispatch predicate, the occupancy query and launch plan,
// then the launch (what the wrapper timing brackets; output allocation excluded).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/gpu_worker/device_candidate.h"
#include "kernels/rmsnorm/reference.h"

namespace kloop::gpu {

class PathLauncher {
public:
  // `cand` may be null (every call goes to the reference kernel). Plans with the addresses given
  // (dispatch checks alignment on them). Throws std::runtime_error when the candidate route needs
  // a shared-memory opt-in or occupancy that the device refuses (reported as a launch failure).
  PathLauncher(const LoadedCandidate* cand, const rmsnorm::DeviceInfo& device, DType dtype,
               long long rows, int h, long long x_row_stride, const void* x, const void* w, void* y,
               float eps);
  rmsnorm::Route route() const { return route_.route; }
  const std::string& why() const { return route_.why; }
  // {"route","why","plan"} for evidence.
  nlohmann::json to_json() const;
  // The planned launch on new buffers of the same geometry; returns cudaGetLastError() after it.
  cudaError_t launch(const void* x, const void* w, void* y, cudaStream_t stream) const;
  // validate + geometry + dispatch + plan + launch, every call; returns the launch error, or
  // cudaErrorInvalidValue when validation rejects the call (never for benchmark shapes).
  cudaError_t wrapper_call(const void* x, const void* w, void* y, cudaStream_t stream) const;

private:
  const LoadedCandidate* cand_;
  rmsnorm::DeviceInfo device_;
  DType dtype_;
  long long rows_, x_stride_;
  int h_;
  float eps_;
  HostTensor x_meta_, w_meta_; // [1, h] / [h] metadata for validation (no row data)
  rmsnorm::DispatchDecision route_;
  rmsnorm::LaunchPlan plan_;
  std::string entry_;
  cudaError_t launch_with(const rmsnorm::LaunchPlan& plan, const void* x, const void* w, void* y,
                          cudaStream_t stream) const;
};

} // namespace kloop::gpu
