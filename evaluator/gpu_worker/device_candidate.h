// The device adapter of the correctness gate: a Candidate callable (evaluator/correctness.h) that
// runs one call of weighted_rmsnorm on the GPU through the trusted wrapper, so the device gate uses
// the very same correctness core as the CPU. Per call it validates the inputs with
// rmsnorm::validate (declared errors before any launch), copies x's and weight's whole storage
// into device buffers with guard regions before and after, allocates a fresh guarded output
// poisoned with 0xFF bytes (NaN in every dtype), evaluates the manifest's dispatch predicate
// (kernels/rmsnorm/wrapper.h) and launches the candidate entry point or the trusted reference
// kernel, checks the launch error at the call, synchronises, and audits on the device: guard
// bytes untouched, input storage byte-identical, the call repeated with a second (finite) poison
// pattern gives bit-identical output (an element left unwritten shows both poisons), and two
// concurrent calls on two streams match the first. Findings go to CandidateCall::audit_failures.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/correctness.h"
#include "evaluator/gpu_worker/cuda_rt.h"
#include "kernels/rmsnorm/manifest.h"
#include "kernels/rmsnorm/wrapper.h"

namespace kloop::gpu {

struct AdapterOptions {
  std::size_t guard_bytes = 256; // per side; a multiple of 256 keeps storage bases 256-aligned
  int repeats = 2;               // calls per case (>= 1); all must be bit-identical
  int small_repeats = 20;        // calls per case with at most 65536 elements (CASES.md P15)
  bool concurrency = true;       // two extra concurrent calls on two streams (small cases)
  static AdapterOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// The candidate: manifest plus one loaded kernel per entry-point dtype. Without a manifest every
// call goes to the reference kernel (used to cross-check the reference kernel itself).
struct LoadedCandidate {
  std::optional<rmsnorm::Manifest> manifest;
  std::map<DType, cudaKernel_t> kernels;
};

class DeviceAdapter {
public:
  DeviceAdapter(LoadedCandidate candidate, rmsnorm::DeviceInfo device, AdapterOptions options);
  // One call; never throws for candidate misbehaviour. A sticky CUDA fault is recorded (sticky())
  // and returned as a raised failure; every later call is refused without touching the device.
  // The worker checks sticky() after each case and ends the process (the core's catch-all
  // handler would otherwise hide it).
  evaluator::CandidateCall call(const HostTensor& x, const HostTensor& weight,
                                const rmsnorm::EpsScalar& eps);
  const std::optional<StickyFault>& sticky() const { return sticky_; }
  // The adapter as the correctness core's Candidate (refers to *this).
  evaluator::Candidate as_candidate();
  const rmsnorm::PathCounts& path_counts() const { return counts_; }
  // {"path_counts", "reference_reasons": [distinct why strings], "launch_plans": [first few],
  //  "launch_errors": n, "options": {...}}
  nlohmann::json evidence() const;

private:
  LoadedCandidate cand_;
  rmsnorm::DeviceInfo device_;
  AdapterOptions opt_;
  rmsnorm::PathCounts counts_;
  std::set<std::string> reference_reasons_;
  nlohmann::json plans_ = nlohmann::json::array();
  std::int64_t launch_errors_ = 0;
  std::optional<StickyFault> sticky_;
  evaluator::CandidateCall call_impl(const HostTensor& x, const HostTensor& weight,
                                     const rmsnorm::EpsScalar& eps);
};

// Device facts of the current device (cudaGetDeviceProperties / attributes).
rmsnorm::DeviceInfo query_device_info(int device);

} // namespace kloop::gpu
