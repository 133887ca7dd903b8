// The production components of the refinement loop: the evaluator (sandboxed build + static
// inspection + GPU worker device gates, evaluator/pipeline.h) and the holdout runner (one fresh GPU
// worker on the unsealed suite). A probe worker at start-up tells whether a device is present, so
// the session records the device and a CPU-only run says once why the device gates do not run.
#pragma once

#include <memory>
#include <string>

#include "agent/loop.h"
#include "evaluator/device_gates.h"

namespace kloop::agent {

struct DeviceOptions {
  bool no_sandbox = false;       // build without namespace isolation (recorded)
  double worker_timeout_s = 120; // watchdog per GPU worker batch (public suite)
  std::uint64_t public_seed = 1; // seed of the public suite
  double build_timeout_s = 20;   // wall-clock deadline of one sandboxed build
};

class DeviceContext {
public:
  // Probes the device once (a `probe` worker batch) and prints one line about it to `progress`.
  DeviceContext(const DeviceOptions& options, ProgressSink& progress);
  CandidateEvaluator& evaluator() { return *evaluator_; }
  HoldoutRunner& holdout_runner() { return *holdout_; }
  const std::string& device_name() const { return device_name_; }
  const std::string& driver_version() const { return driver_version_; }
  // nvidia-smi's "GPU-..." form from the probe; "" without a device.
  const std::string& device_uuid() const { return device_uuid_; }
  bool has_device() const { return has_device_; }

private:
  std::unique_ptr<CandidateEvaluator> evaluator_;
  std::unique_ptr<HoldoutRunner> holdout_;
  std::string device_uuid_;
  std::string device_name_, driver_version_;
  bool has_device_ = false;
};

// The holdout result of one worker outcome (exposed for unit tests): pass/fail counts from the
// suite result, failing case names only (never values), fault classes named.
holdout::HoldoutResult holdout_result_from(const evaluator::GpuRunResult& run);

} // namespace kloop::agent
