// The production components of the refinement loop: the evaluator (sandboxed build + static
// inspection + GPU worker device gates, evaluator/pipeline.h) and the holdout runner (one fresh GPU
// worker on the unsealed suite). A probe worker at start-up tells whether a device is present, so
// the session records the device and a CPU-only run says once why the device gates do not run.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "agent/loop.h"
#include "evaluator/device_gates.h"

namespace kloop::agent {

struct DeviceOptions {
  bool no_sandbox = false;       // build without namespace isolation (recorded)
  double worker_timeout_s = 120; // watchdog per GPU worker batch (public suite)
  std::uint64_t public_seed = 1; // seed of the public suite
  double build_timeout_s = 60;   // wall-clock deadline of one sandboxed build
};

class DeviceContext {
public:
  // Probes the device once (a `probe` worker batch) and prints one line about it to `progress`,
  // which must outlive this object.
  DeviceContext(const DeviceOptions& options, ProgressSink& progress);
  // The evaluator of candidates of `op`, made on first use: with a device, the operator's in-tree
  // baseline is built then, once, for the benchmark gate (a line about it goes to `progress`).
  CandidateEvaluator& evaluator(const op::Operator& op);
  HoldoutRunner& holdout_runner() { return *holdout_; }
  const std::string& device_name() const { return device_name_; }
  const std::string& driver_version() const { return driver_version_; }
  // nvidia-smi's "GPU-..." form from the probe; "" without a device.
  const std::string& device_uuid() const { return device_uuid_; }
  bool has_device() const { return has_device_; }

private:
  DeviceOptions options_;
  ProgressSink& progress_;
  std::map<const op::Operator*, std::unique_ptr<CandidateEvaluator>> evaluators_;
  std::unique_ptr<HoldoutRunner> holdout_;
  std::string device_uuid_;
  std::string device_name_, driver_version_;
  bool has_device_ = false;
};

// The NVIDIA kernel driver's version (e.g. "580.159.04", the number nvidia-smi prints) from the
// first line of `proc_file` ("NVRM version: NVIDIA UNIX ... Kernel Module ...  580.159.04  Release
// Build ..."): the first whitespace-separated token of the form digits.digits[.digits]. "" when the
// file is missing or unreadable (no NVIDIA driver, a sandbox without /proc) or holds no such token.
std::string nvidia_driver_version(const std::string& proc_file = "/proc/driver/nvidia/version");

// The session's driver field: "580.159.04 (CUDA driver API 13.0)" from the kernel driver version
// (may be "") and the CUDA driver API version cudaDriverGetVersion returns (1000 * major + 10 *
// minor, e.g. 13000); "CUDA driver API 13.0" alone without the kernel driver version.
std::string driver_description(const std::string& kernel_driver, long long cuda_api_version);

// The holdout result of one worker outcome (exposed for unit tests): pass/fail counts from the
// suite result, failing case names only (never values), fault classes named.
holdout::HoldoutResult holdout_result_from(const evaluator::GpuRunResult& run);

} // namespace kloop::agent
