// The GPU worker starts on any machine (cudart_static, no libcuda) and answers a probe cleanly:
// not_run with exit code 3, a reason naming the missing device and the CUDA answer behind it (a
// clear no-device answer: tests/support/device_probe.h), or pass with device facts. Labelled
// integration and gpu: CI runs it on the CPU machine, scripts/device-run.sh on the GPU machine,
// where KLOOP_REQUIRE_DEVICE=1 makes anything but pass a failure.
#include <cstdlib>

#include <gtest/gtest.h>

#include "evaluator/gpu_runner.h"
#include "tests/support/device_probe.h"

namespace kloop::evaluator {
namespace {

TEST(GpuWorkerStartTest, ProbeAnswersNotRunWithoutADeviceOrDescribesTheDevice) {
  GpuRunRequest probe;
  probe.mode = "probe";
  const GpuRunResult r = run_gpu_worker(probe);
  // Every mode reports its device memory, even without a device (nothing allocated then), and the
  // runner keeps it with the process record (issue 8).
  ASSERT_TRUE(r.device_memory.is_object()) << r.result.dump();
  EXPECT_TRUE(r.device_memory.contains("peak_allocated_bytes"));
  EXPECT_EQ(r.call.detail["device_memory"], r.device_memory);
  EXPECT_EQ(r.call.detail["mode"], "probe");
  EXPECT_GT(r.call.max_rss_kib, 0);
  const char* require = std::getenv("KLOOP_REQUIRE_DEVICE");
  const test_support::DeviceProbe answer = test_support::classify_device_probe(
      r, KLOOP_TEST_BUILT_WITH_CUDA, require != nullptr && std::string(require) == "1");
  ASSERT_NE(answer.state, test_support::DeviceState::kBroken) << answer.reason;
  if (r.status == GateStatus::kNotRun) {
    EXPECT_EQ(r.exit_code, kGpuWorkerNoDevice);
    EXPECT_NE(r.reason.find("no CUDA device"), std::string::npos) << r.reason;
    EXPECT_EQ(r.result.value("status", ""), "not_run");
    EXPECT_EQ(r.result.at("device_query").value("call", ""), "cudaGetDeviceCount");
  } else {
    ASSERT_EQ(r.status, GateStatus::kPass) << r.reason << r.stderr_tail;
    EXPECT_TRUE(r.result.at("device").contains("sm_count"));
  }
}

TEST(GpuWorkerStartTest, MalformedRequestIsAnInfraErrorNotTheCandidates) {
  GpuRunResult r =
      classify_gpu_run(kGpuWorkerBadRequest, 0, false,
                       {{"status", "infra_error"}, {"reason", "bad request.json"}}, nullptr);
  EXPECT_EQ(r.status, GateStatus::kInfraError);
  r = classify_gpu_run(kGpuWorkerStickyFault, 0, false,
                       {{"status", "crashed"},
                        {"reason", "crashed: illegal_address"},
                        {"fault", {{"class", "illegal_address"}}}},
                       {{"index", 3}, {"name", "w127"}});
  EXPECT_EQ(r.status, GateStatus::kCrashed);
  EXPECT_EQ(r.fault_class, "illegal_address");
  r = classify_gpu_run(-1, 9, true, nullptr, {{"index", 7}, {"name", "width-1009"}});
  EXPECT_EQ(r.status, GateStatus::kTimeout);
  EXPECT_NE(r.reason.find("width-1009"), std::string::npos) << r.reason;
  r = classify_gpu_run(-1, 11, false, nullptr, nullptr);
  EXPECT_EQ(r.status, GateStatus::kCrashed);
  EXPECT_EQ(r.fault_class, "signal");
}

} // namespace
} // namespace kloop::evaluator
