// The real DeviceGates (evaluator/pipeline.h): runs the correctness gate in a fresh
// kloop-gpu-worker per batch through the runner (evaluator/gpu_runner.h) on the public suite, with
// the device audit, and maps the worker's outcome onto the gate: pass / fail (first failing case
// and rule) / crashed (fault class and case) / timeout (case in flight) / not_run (no device) /
// infra_error. The sanitizer, benchmark and roofline gates are not wired here yet: they are
// returned `not_run` with that reason (or because correctness did not pass).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/gpu_runner.h"
#include "evaluator/pipeline.h"

namespace kloop::evaluator {

struct GpuGatesOptions {
  std::uint64_t public_seed = 1;                    // public_cases(seed)
  bool large_cases = false;                         // also run large_cases(seed) in a second batch
  std::chrono::milliseconds deadline{30000};        // watchdog of the public batch
  std::chrono::milliseconds large_deadline{300000}; // watchdog of the large batch
  GpuRunOptions runner; // worker path, isolation (deadline is overridden)
};

class GpuWorkerGates : public DeviceGates {
public:
  explicit GpuWorkerGates(GpuGatesOptions options = {}) : options_(std::move(options)) {}
  // One GateResult each for correctness, sanitizer, benchmark, roofline (in that order).
  std::vector<GateResult> run(const BuiltCandidate& built) override;
  // The raw worker outcomes of the last run (for the store's tool-call records).
  const std::vector<GpuRunResult>& last_runs() const { return runs_; }

private:
  GpuGatesOptions options_;
  std::vector<GpuRunResult> runs_;
};

// The correctness GateResult of one worker outcome (exposed for unit tests).
GateResult correctness_gate_from(const GpuRunResult& run);

} // namespace kloop::evaluator
