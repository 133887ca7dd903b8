// The real MutantBackend: the sandboxed build and static gate of evaluator::evaluate_candidate,
// and device gates through fresh kloop-gpu-worker processes. By default the device gates are
// correctness (public suite, device audit, first failure stops the batch) and the sanitizer gate
// (memcheck, racecheck, initcheck, synccheck and shared-memory poisoning); the benchmark and
// roofline timing is skipped (reported not_run with kSkippedPrefix) because the gates offer no
// integrity-only mode and a timed batch per mutant would exceed the device budget. With
// `with_benchmark` the full evaluator::GpuWorkerGates run instead (short timing cap, no stall
// sampling). A probe worker at construction tells whether a device is present; without one every
// device gate is not_run and the analysis covers contract, build and static only. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <semaphore>
#include <string>

#include "evaluator/build.h"
#include "mutation/runner.h"

namespace kloop::mutation {

struct WorkerBackendOptions {
  const op::Operator* op = nullptr;                     // the analysed operator (required)
  evaluator::BuildOptions build;                        // sandbox, build deadline
  std::uint64_t public_seed = 1;                        // public_cases(seed)
  std::chrono::milliseconds worker_deadline{120000};    // correctness / holdout / search batch
  std::chrono::milliseconds sanitizer_deadline{120000}; // per compute-sanitizer tool
  bool with_benchmark = false;                          // run the benchmark and roofline gates too
  // Sanitizer gates run at once across threads (1..64). compute-sanitizer runs share the one GPU
  // by time slicing with every other context, so several at once each take many times longer
  // (H200 runs 5 and 7: 60-150 s under --jobs 4-8 against about 15 s alone); the other phases
  // still overlap. Ignored with with_benchmark (GpuWorkerGates runs its own sanitizer).
  int max_concurrent_sanitizers = 1;
  std::string gpu_worker; // empty: worker_path("kloop-gpu-worker")
};

// At most `count` holders at once (a counting semaphore shared by the gates of every thread).
using SanitizerSlots = std::counting_semaphore<64>;

class WorkerBackend : public MutantBackend {
public:
  // Probes the device once (a `probe` worker); never throws for a missing device.
  explicit WorkerBackend(WorkerBackendOptions options);
  evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) override;
  evaluator::GpuRunResult run_cases(const evaluator::Candidate& candidate, const std::string& cubin,
                                    const std::vector<nlohmann::json>& cases) override;
  bool has_device() const override { return has_device_; }
  std::string device_name() const override { return device_name_; }
  const std::string& no_device_reason() const { return no_device_reason_; }

private:
  WorkerBackendOptions options_;
  std::shared_ptr<SanitizerSlots> sanitizer_slots_;
  bool has_device_ = false;
  std::string device_name_, no_device_reason_;
};

// Device gates of the default mode: correctness then sanitizer; benchmark and roofline not_run
// with kSkippedPrefix. Stateless, so one instance may serve several threads.
class CorrectnessSanitizerGates : public evaluator::DeviceGates {
public:
  // `slots`, when given, bounds how many sanitizer gates run at once (see WorkerBackendOptions).
  explicit CorrectnessSanitizerGates(WorkerBackendOptions options,
                                     std::shared_ptr<SanitizerSlots> slots = nullptr)
      : options_(std::move(options)), slots_(std::move(slots)) {}
  std::vector<evaluator::GateResult> run(const evaluator::BuiltCandidate& built) override;

private:
  WorkerBackendOptions options_;
  std::shared_ptr<SanitizerSlots> slots_;
};

} // namespace kloop::mutation
