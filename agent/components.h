// The production components of the refinement loop: the evaluator (sandboxed build + static
// inspection + GPU worker device gates, evaluator/pipeline.h) and the holdout runner (one fresh GPU
// worker on the unsealed suite). A probe worker at start-up tells whether a device is present, so
// the session records the device and a CPU-only run says once why the device gates do not run.
//
// Several GPUs (issue 26): the probe lists every device the worker sees, `--devices` picks some
// (default all), and the evaluator of each operator is a multi-device Scheduler
// (agent/scheduler.h) with one GpuDeviceWorker per chosen device, its processes pinned with
// CUDA_VISIBLE_DEVICES.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/loop.h"
#include "agent/scheduler.h"
#include "evaluator/device_gates.h"
#include "evaluator/throughput.h"

namespace kloop::agent {

struct DeviceOptions {
  bool no_sandbox = false;       // build without namespace isolation (recorded)
  double worker_timeout_s = 120; // watchdog per GPU worker batch (public suite)
  std::uint64_t public_seed = 1; // seed of the public suite
  double build_timeout_s = 60;   // wall-clock deadline of one sandboxed build
  // `--devices`: "all" (every device the probe sees; none on a machine without one), "none" (no
  // device gates: they report not_run), or a comma list of indices among the visible devices
  // and GPU-/MIG- UUIDs ("0,1").
  std::string devices = "all";
  evaluator::ThroughputOptions throughput; // KLOOP_THROUGHPUT (evaluator/throughput.h)
};

// A `--devices` value that cannot be honoured (bad syntax, an index the machine does not have, a
// device named twice): a usage error; the message names the entry and what is accepted.
class DeviceSelectionError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Checks the syntax of a `--devices` value (no device count needed): every entry an index or a
// UUID, none named twice ("0,00" counts as twice); throws DeviceSelectionError.
void check_devices_syntax(const std::string& spec);

// The CUDA_VISIBLE_DEVICES value of every device `spec` selects among `count` visible devices.
// `parent` is kloop's own CUDA_VISIBLE_DEVICES ("" when unset): index i then means its i-th entry,
// so a pinned worker sees the GPU kloop sees as i (a Slurm task's GPUs stay its own); UUIDs are
// passed as given. "none", or no device visible (count 0), selects none. Throws
// DeviceSelectionError for bad syntax, an index >= count or a device named twice.
std::vector<std::string> select_devices(const std::string& spec, int count,
                                        const std::string& parent);

class DeviceContext {
public:
  // Probes the device once (a `probe` worker batch) and prints one line about it to `progress`,
  // which must outlive this object; with several devices chosen, each is probed pinned. Throws
  // DeviceSelectionError for a `--devices` value this machine cannot honour.
  DeviceContext(const DeviceOptions& options, ProgressSink& progress);
  // The evaluator of candidates of `op`, made on first use: with a device, the operator's in-tree
  // baseline is built then, once, for the benchmark gate (a line about it goes to `progress`).
  CandidateEvaluator& evaluator(const op::Operator& op);
  HoldoutRunner& holdout_runner() { return *holdout_; }
  // The chosen devices (CUDA_VISIBLE_DEVICES values); empty without a device.
  const std::vector<std::string>& devices() const { return devices_; }
  // What the session records under params "throughput": the switches, the devices, and the
  // start-up phases (probe, baseline build) with their wall times.
  nlohmann::json throughput_record() const;
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
  std::vector<std::string> devices_;
  evaluator::ThroughputOptions throughput_;
  nlohmann::json startup_ = nlohmann::json::array();
  std::string no_device_reason_; // what every device gate says without a chosen device
  // One copy-ceiling slot per chosen device (KLOOP_THROUGHPUT copy_ceiling_once), shared by the
  // evaluators of every operator: the ceiling is the device's, measured once per session.
  std::map<std::string, std::shared_ptr<evaluator::GpuGatesOptions::CopyCeiling>> copy_ceilings_;
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
