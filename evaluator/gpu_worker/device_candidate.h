// The device adapter of the correctness gate: a CandidateFn (evaluator/correctness.h) that runs
// one call of any registered operator on the GPU through the trusted wrapper (launch.h), so the
// device gate uses the very same correctness core as the CPU. Per call it validates the call with
// the operator's own validate (declared errors before any launch), copies every passed tensor's
// whole storage into a device buffer with guard regions before and after, allocates every output
// fresh, guarded and poisoned with 0xFF bytes (NaN in every dtype), evaluates the dispatch
// predicate (the first matching manifest variant, else the trusted reference kernel), launches,
// checks the launch error at the call, synchronises, and audits on the device by role: guard
// bytes untouched, every input's storage byte-identical, the call repeated with a second (finite)
// poison pattern gives bit-identical outputs (an element left unwritten shows both poisons), and
// two concurrent calls on two streams match the first. An input-output tensor is re-uploaded
// before each call and its final bytes are written back into the passed tensor. Findings go to
// CandidateCall::audit_failures; the route and variant that served go to CandidateCall.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/correctness.h"
#include "evaluator/gpu_worker/cuda_rt.h"
#include "evaluator/gpu_worker/launch.h"
#include "kernels/operator.h"

namespace kloop::gpu {

struct AdapterOptions {
  std::size_t guard_bytes = 256; // per side; a multiple of 256 keeps storage bases 256-aligned
  int repeats = 2;               // calls per case (>= 1); all must be bit-identical
  int small_repeats = 20;        // calls per case with at most 65536 elements (CASES.md P15)
  bool concurrency = true;       // two extra concurrent calls on two streams (small cases)
  static AdapterOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

class DeviceAdapter {
public:
  DeviceAdapter(const op::Operator& op, LoadedCandidate candidate, op::DeviceInfo device,
                AdapterOptions options);
  // One call; never throws for candidate misbehaviour. A sticky CUDA fault is recorded (sticky())
  // and returned as a raised failure; every later call is refused without touching the device.
  // The worker checks sticky() after each case and ends the process (the core's catch-all
  // handler would otherwise hide it).
  evaluator::CandidateCall call(const op::CallArgs& call);
  const std::optional<StickyFault>& sticky() const { return sticky_; }
  // The adapter as the correctness core's CandidateFn (refers to *this).
  evaluator::CandidateFn as_candidate();
  const op::PathCounts& path_counts() const { return counts_; }
  // {"path_counts", "reference_reasons": [distinct why strings], "launch_plans": [first few],
  //  "launch_errors": n, "options": {...}}
  nlohmann::json evidence() const;

private:
  const op::Operator& op_;
  LoadedCandidate cand_;
  op::DeviceInfo device_;
  AdapterOptions opt_;
  op::PathCounts counts_;
  std::set<std::string> reference_reasons_;
  nlohmann::json plans_ = nlohmann::json::array();
  std::int64_t launch_errors_ = 0;
  std::optional<StickyFault> sticky_;
  evaluator::CandidateCall call_impl(const op::CallArgs& call);
};

} // namespace kloop::gpu
