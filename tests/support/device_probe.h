// Whether this machine has a usable CUDA device, decided from the GPU worker's probe and nothing
// else (never from the outcome a test checks). "No device" needs a clear no-device answer: the
// worker ran and cudaGetDeviceCount said cudaErrorNoDevice, cudaErrorInsufficientDriver (no
// driver: DEVICE.md, the build machines) or zero devices; or this build has no GPU worker at all
// (KLOOP_WITH_CUDA=OFF). Anything else (a crash, a timeout, an infrastructure error, a missing
// worker in a CUDA build, any other CUDA error) means a device may be there and the tier cannot
// use it: a failure, never a skip. KLOOP_REQUIRE_DEVICE=1 (set by scripts/device-run.sh on the GPU
// machine) turns "no device" into a failure too.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "evaluator/gpu_runner.h"

namespace kloop::test_support {

enum class DeviceState {
  kAbsent,  // a clear no-device answer: GPU tests skip (exit 77) with the reason
  kPresent, // the probe passed: GPU tests run
  kBroken,  // anything else: GPU tests fail with the reason
};

struct DeviceProbe {
  DeviceState state = DeviceState::kBroken;
  std::string reason; // the worker's answer, with why it counts as it does (present: the device)
};

// CUDA errors of cudaGetDeviceCount that mean "no device here" (cudaGetErrorName spelling).
inline bool is_no_device_error(std::string_view error) {
  return error == "cudaErrorNoDevice" || error == "cudaErrorInsufficientDriver";
}

// Classifies one probe run. `built_with_cuda`: whether this build configured the GPU worker;
// `require_device`: KLOOP_REQUIRE_DEVICE was set.
inline DeviceProbe classify_device_probe(const evaluator::GpuRunResult& r, bool built_with_cuda,
                                         bool require_device) {
  const std::string answer = std::string(evaluator::gate_status_name(r.status)) + ": " + r.reason;
  DeviceProbe p{DeviceState::kBroken, answer};
  if (r.status == evaluator::GateStatus::kPass) {
    p.state = DeviceState::kPresent;
    p.reason = (r.result.is_object() ? r.result.value("device", nlohmann::json()).dump()
                                     : std::string("{}")) +
               "; network isolation: " + (r.network_isolated ? "unshare -n" : "not applied");
    return p;
  }
  const bool worker_missing = r.status == evaluator::GateStatus::kNotRun && r.exit_code == -1 &&
                              r.reason.rfind("GPU worker not built", 0) == 0;
  const nlohmann::json query =
      r.result.is_object() ? r.result.value("device_query", nlohmann::json()) : nlohmann::json();
  const std::string error = query.is_object() ? query.value("error", std::string()) : "";
  const bool no_device_answer = r.status == evaluator::GateStatus::kNotRun &&
                                r.exit_code == evaluator::kGpuWorkerNoDevice &&
                                (is_no_device_error(error) ||
                                 (error == "cudaSuccess" && query.value("device_count", -1) == 0));
  if (no_device_answer || (worker_missing && !built_with_cuda)) {
    p.state = require_device ? DeviceState::kBroken : DeviceState::kAbsent;
    if (require_device) p.reason = "KLOOP_REQUIRE_DEVICE=1 but the probe found none: " + answer;
    return p;
  }
  p.reason = "the GPU probe gave no clear no-device answer, so a device may be present and "
             "unusable: " +
             answer +
             (r.stderr_tail.empty() ? std::string() : " (worker stderr: " + r.stderr_tail + ")");
  return p;
}

// Runs the probe in a fresh worker (the same runner the gates use) and classifies it.
inline DeviceProbe probe_device() {
  evaluator::GpuRunRequest probe;
  probe.mode = "probe";
  evaluator::GpuRunResult r;
  try {
    r = evaluator::run_gpu_worker(probe);
  } catch (const std::exception& e) {
    return {DeviceState::kBroken, std::string("the GPU probe could not run: ") + e.what()};
  }
  const char* require = std::getenv("KLOOP_REQUIRE_DEVICE");
  return classify_device_probe(r, KLOOP_TEST_BUILT_WITH_CUDA,
                               require != nullptr && std::string_view(require) == "1");
}

} // namespace kloop::test_support
