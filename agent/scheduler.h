// The multi-device scheduler (issue 26): evaluates a batch of candidates (the K candidates of one
// iteration, `--candidates-per-iteration`) across every GPU of the host (`--devices`) and returns
// their evaluations in the batch's order. Each candidate goes through the host stages (contract,
// sandboxed build, static inspection: evaluator::run_host_stages) on a pool of host threads, then
// through the device stages (evaluator::run_device_stages) on the first device with a free
// candidate slot. Every device has one DeviceLock: the processes of its candidates' device gates
// hold it shared (correctness, sanitizer) or alone (benchmark, CUPTI sampling, ncu), so timed work
// never shares its device (evaluator/device_access.h). So the build and static inspection of the
// next candidates overlap the device gates of the current ones, and K candidates keep every
// device busy. A device is reached through the DeviceWorker interface: the real one runs
// GpuWorkerGates whose processes are pinned to the device with CUDA_VISIBLE_DEVICES; tests use
// fakes. A worker that crashes or hangs costs only its own candidate (its gate says crashed or
// timeout, the watchdog ends a hang) while the other devices keep going. Cancellation (Ctrl-C)
// starts no further stage; stages in flight finish, and candidates that never started come back
// empty.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/loop.h"
#include "evaluator/device_access.h"
#include "evaluator/device_gates.h"
#include "evaluator/pipeline.h"
#include "evaluator/throughput.h"

namespace kloop::agent {

// One GPU of the pool.
class DeviceWorker {
public:
  virtual ~DeviceWorker() = default;
  // The device as its processes see it: the CUDA_VISIBLE_DEVICES value they get ("0", "GPU-...").
  virtual std::string device() const = 0;
  // The device gates of one candidate on this device. Every process they start holds `access`
  // (shared or timed, as above). `profile`: CUPTI stall sampling is wanted for this candidate
  // (its report feeds a next prompt; CandidateEvaluator::want_profile). Called from any thread;
  // the gates are used by one thread.
  virtual std::unique_ptr<evaluator::DeviceGates> gates(evaluator::DeviceAccess& access,
                                                        bool profile) = 0;
};

// The real device worker: evaluator::GpuWorkerGates with `options` (deadlines, baseline,
// profiling) whose worker, compute-sanitizer and ncu processes get CUDA_VISIBLE_DEVICES=`device`.
class GpuDeviceWorker final : public DeviceWorker {
public:
  GpuDeviceWorker(std::string device, evaluator::GpuGatesOptions options)
      : device_(std::move(device)), options_(std::move(options)) {}
  std::string device() const override { return device_; }
  std::unique_ptr<evaluator::DeviceGates> gates(evaluator::DeviceAccess& access,
                                                bool profile) override;

private:
  std::string device_;
  evaluator::GpuGatesOptions options_;
};

// The host stages of one candidate (default evaluator::run_host_stages with the build options);
// `origin_ms` is the start of its evaluation. Tests put a fake here.
using HostStageFn =
    std::function<evaluator::HostStages(const evaluator::Candidate& candidate, double origin_ms)>;

struct SchedulerOptions {
  evaluator::EvaluateOptions evaluate; // build options of the host stages
  HostStageFn host_stages;             // empty: run_host_stages(candidate, evaluate, origin)
  // false: one candidate at a time through every stage, on the first device (before issue 26).
  bool pipeline = false;
  int host_jobs = 1;         // candidates in host stages at once (>= 1)
  int device_candidates = 1; // candidates in device stages at once per device (>= 1)
  int shared_per_device = 1; // shared processes at once per device (>= 1)
  // Without devices: the reason every device gate gives (not_run).
  std::string no_device_reason = "no usable CUDA device";
  // want_profile(false) turns CUPTI stall sampling off for the next batches (else ignored).
  bool profile_on_demand = false;
};

// The scheduler's options from the throughput switches: host_jobs min(cores / 2, 8) (at least 1)
// unless set, device_candidates and shared_per_device as switched; without the pipeline one
// candidate at a time (pipeline false, every count 1).
SchedulerOptions scheduler_options(const evaluator::ThroughputOptions& t);

class Scheduler final : public CandidateEvaluator {
public:
  Scheduler(std::vector<std::unique_ptr<DeviceWorker>> devices, SchedulerOptions options);
  ~Scheduler() override;
  // One candidate (a batch of one).
  evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) override;
  // The batch, in order; nullopt for a candidate whose evaluation never started because `cancel`
  // was set. Phases gain "host_wait" (waiting for a host thread) and "device_wait" with detail
  // {"work": "queue"} (waiting for a device slot); times are from the batch's start.
  std::vector<std::optional<evaluator::Evaluation>>
  evaluate_batch(const std::vector<evaluator::Candidate>& candidates,
                 const std::atomic<bool>* cancel) override;
  void want_profile(bool wanted) override { profile_ = wanted || !options_.profile_on_demand; }
  std::size_t device_count() const { return devices_.size(); }
  const SchedulerOptions& options() const { return options_; }

private:
  struct Device;
  // The evaluation of a candidate whose host stages ended it (not device-ready) or that has no
  // device to go to (NoDeviceGates: the device gates are recorded not_run with
  // options_.no_device_reason); nullopt when it goes on to a device.
  std::optional<evaluator::Evaluation> settle_on_host(evaluator::HostStages& h,
                                                      const evaluator::Candidate& c) const;
  std::vector<std::unique_ptr<Device>> devices_;
  SchedulerOptions options_;
  std::atomic<bool> profile_{true};
};

} // namespace kloop::agent
