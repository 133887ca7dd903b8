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
#include <string>

#include "evaluator/build.h"
#include "mutation/runner.h"

namespace kloop::mutation {

struct WorkerBackendOptions {
  evaluator::BuildOptions build;                        // sandbox, build deadline
  std::uint64_t public_seed = 1;                        // public_cases(seed)
  std::chrono::milliseconds worker_deadline{120000};    // correctness / holdout / search batch
  std::chrono::milliseconds sanitizer_deadline{120000}; // per compute-sanitizer tool
  bool with_benchmark = false;                          // run the benchmark and roofline gates too
  std::string gpu_worker;                               // empty: worker_path("kloop-gpu-worker")
};

class WorkerBackend : public MutantBackend {
public:
  // Probes the device once (a `probe` worker); never throws for a missing device.
  explicit WorkerBackend(WorkerBackendOptions options);
  evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) override;
  evaluator::GpuRunResult run_cases(const evaluator::Candidate& candidate, const std::string& cubin,
                                    const std::vector<rmsnorm::CaseSpec>& cases) override;
  bool has_device() const override { return has_device_; }
  std::string device_name() const override { return device_name_; }
  const std::string& no_device_reason() const { return no_device_reason_; }

private:
  WorkerBackendOptions options_;
  bool has_device_ = false;
  std::string device_name_, no_device_reason_;
};

// Device gates of the default mode: correctness then sanitizer; benchmark and roofline not_run
// with kSkippedPrefix. Stateless, so one instance may serve several threads.
class CorrectnessSanitizerGates : public evaluator::DeviceGates {
public:
  explicit CorrectnessSanitizerGates(WorkerBackendOptions options) : options_(std::move(options)) {}
  std::vector<evaluator::GateResult> run(const evaluator::BuiltCandidate& built) override;

private:
  WorkerBackendOptions options_;
};

} // namespace kloop::mutation
