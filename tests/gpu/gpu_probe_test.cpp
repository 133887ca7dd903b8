// Which probe answers let the GPU tier skip (tests/support/device_probe.h, gpu_test_main.cpp):
// only a clear no-device answer. The classification on fabricated runner results, then a real gpu
// test binary (gpu_reference_test) started with stand-in workers (KLOOP_WORKER_DIR): a no-device
// answer exits 77; a crashing worker, another CUDA error, a worker missing from a CUDA build, a
// result without the CUDA answer, or no device under KLOOP_REQUIRE_DEVICE=1 exit 1.
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "evaluator/subprocess.h"
#include "tests/support/device_probe.h"
#include "tests/support/test_files.h"

namespace kloop::test_support {
namespace {

namespace fs = std::filesystem;
using evaluator::GateStatus;
using evaluator::GpuRunResult;
using nlohmann::json;

json not_run_result(const std::string& error) {
  return {
      {"status", "not_run"},
      {"reason", "no CUDA device: " + error + ": (text)"},
      {"device_query", {{"call", "cudaGetDeviceCount"}, {"error", error}, {"device_count", 0}}}};
}

GpuRunResult classified(int exit_code, const json& result, int signal = 0, bool timed_out = false) {
  return evaluator::classify_gpu_run(exit_code, signal, timed_out, result, nullptr);
}

TEST(DeviceProbeClassifyTest, OnlyAClearNoDeviceAnswerIsAbsent) {
  using evaluator::kGpuWorkerNoDevice;
  for (const char* e : {"cudaErrorNoDevice", "cudaErrorInsufficientDriver"}) {
    const auto r = classified(kGpuWorkerNoDevice, not_run_result(e));
    EXPECT_EQ(classify_device_probe(r, true, false).state, DeviceState::kAbsent) << e;
    // Under KLOOP_REQUIRE_DEVICE=1 (the GPU machine) even that fails.
    const DeviceProbe required = classify_device_probe(r, true, true);
    EXPECT_EQ(required.state, DeviceState::kBroken) << e;
    EXPECT_NE(required.reason.find("KLOOP_REQUIRE_DEVICE=1"), std::string::npos);
  }
  json zero = not_run_result("cudaSuccess");
  EXPECT_EQ(classify_device_probe(classified(kGpuWorkerNoDevice, zero), true, false).state,
            DeviceState::kAbsent);
  zero["device_query"]["device_count"] = 1; // "no device" with a device counted: not clear
  EXPECT_EQ(classify_device_probe(classified(kGpuWorkerNoDevice, zero), true, false).state,
            DeviceState::kBroken);
  // A device that is there but unusable, or a driver that does not initialise.
  for (const char* e : {"cudaErrorDevicesUnavailable", "cudaErrorInitializationError",
                        "cudaErrorSystemDriverMismatch", "cudaErrorUnknown"}) {
    const DeviceProbe p =
        classify_device_probe(classified(kGpuWorkerNoDevice, not_run_result(e)), true, false);
    EXPECT_EQ(p.state, DeviceState::kBroken) << e;
    EXPECT_NE(p.reason.find(e), std::string::npos) << p.reason;
  }
  // A not_run without the CUDA answer (a worker before it reported one) is not clear either.
  EXPECT_EQ(classify_device_probe(classified(kGpuWorkerNoDevice,
                                             {{"status", "not_run"}, {"reason", "no CUDA device"}}),
                                  true, false)
                .state,
            DeviceState::kBroken);
}

TEST(DeviceProbeClassifyTest, CrashesTimeoutsAndInfraErrorsFailAndAPassIsPresent) {
  EXPECT_EQ(classify_device_probe(classified(-1, nullptr, 11), true, false).state,
            DeviceState::kBroken); // killed by SIGSEGV
  EXPECT_EQ(classify_device_probe(classified(-1, nullptr, 9, true), true, false).state,
            DeviceState::kBroken); // the watchdog fired
  EXPECT_EQ(classify_device_probe(classified(evaluator::kGpuWorkerInternal,
                                             {{"status", "infra_error"}, {"reason", "bug"}}),
                                  true, false)
                .state,
            DeviceState::kBroken);
  EXPECT_EQ(classify_device_probe(classified(evaluator::kGpuWorkerOk,
                                             {{"status", "pass"}, {"device", {{"name", "H200"}}}}),
                                  true, true)
                .state,
            DeviceState::kPresent);
}

TEST(DeviceProbeClassifyTest, AMissingWorkerIsAbsentOnlyInABuildWithoutCuda) {
  GpuRunResult r;
  r.status = GateStatus::kNotRun;
  r.reason = "GPU worker not built: worker executable /x/kloop-gpu-worker not found";
  EXPECT_EQ(classify_device_probe(r, false, false).state, DeviceState::kAbsent);
  EXPECT_EQ(classify_device_probe(r, true, false).state, DeviceState::kBroken);
}

// gpu_reference_test with the worker replaced by `script` (none: no worker at all); its exit code.
int gpu_binary_exit(const std::string& script, bool require_device = false) {
  TempDir t("probe");
  if (!script.empty()) {
    std::ofstream(t.dir() / "kloop-gpu-worker") << "#!/bin/sh\n" << script;
    fs::permissions(t.dir() / "kloop-gpu-worker", fs::perms(0755));
  }
  evaluator::SubprocessOptions o;
  o.deadline = std::chrono::seconds(60);
  o.env = {{"PATH", "/usr/bin:/bin"}, {"KLOOP_WORKER_DIR", t.path()}};
  if (require_device) o.env["KLOOP_REQUIRE_DEVICE"] = "1";
  const auto r =
      evaluator::run_subprocess({std::string(KLOOP_BINARY_DIR) + "/bin/gpu_reference_test"}, o);
  EXPECT_FALSE(r.timed_out);
  std::printf("%s", r.stdout_text.c_str());
  return r.exit_code;
}

std::string writes(const json& result, int exit_code) {
  return "cat > \"$1/result.json\" <<'EOF'\n" + result.dump() + "\nEOF\nexit " +
         std::to_string(exit_code) + "\n";
}

TEST(GpuTestMainTest, SkipsOnlyOnAClearNoDeviceAnswer) {
  EXPECT_EQ(gpu_binary_exit(writes(not_run_result("cudaErrorNoDevice"), 3)), 77);
  EXPECT_EQ(gpu_binary_exit(writes(not_run_result("cudaErrorInsufficientDriver"), 3)), 77);
  // Everything else fails the binary instead of skipping it.
  EXPECT_EQ(gpu_binary_exit(writes(not_run_result("cudaErrorDevicesUnavailable"), 3)), 1);
  EXPECT_EQ(gpu_binary_exit(writes({{"status", "not_run"}, {"reason", "no CUDA device"}}, 3)), 1);
  EXPECT_EQ(gpu_binary_exit("kill -SEGV $$\n"), 1);
  EXPECT_EQ(gpu_binary_exit("exit 5\n"), 1);
  EXPECT_EQ(gpu_binary_exit(""), 1) << "no worker in a CUDA build";
  EXPECT_EQ(gpu_binary_exit(writes(not_run_result("cudaErrorNoDevice"), 3), true), 1)
      << "KLOOP_REQUIRE_DEVICE=1";
}

} // namespace
} // namespace kloop::test_support
