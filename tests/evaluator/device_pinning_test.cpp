// The GPU worker runner pins a worker to its device and holds the device's lock (issue 26), and
// its ToolCall carries what the phase timings read: run with a stand-in worker (a shell script
// that answers like kloop-gpu-worker: result.json with its environment's CUDA_VISIBLE_DEVICES and
// a "timings" object) through the real runner (evaluator/gpu_runner.h) and the real phase
// reader (evaluator/phases.h). The real worker's timings are checked on the device by
// gpu_bench_test.
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "evaluator/device_access.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/phases.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator {
namespace {

using test_support::read_file;
using test_support::TempDir;

// A worker that writes result.json ({"status": "pass", "env": $CUDA_VISIBLE_DEVICES, "timings"})
// into its request folder and exits 0.
std::string fake_worker(const TempDir& dir) {
  const auto path = dir.dir() / "fake-gpu-worker.sh";
  std::ofstream(path) << "#!/bin/sh\n"
                         "printf '{\"status\": \"pass\", \"env\": \"%s\", \"timings\": "
                         "{\"context_ms\": 250.5, \"load_ms\": 4.5}}' \"$CUDA_VISIBLE_DEVICES\" "
                         "> \"$1/result.json\"\n";
  ::chmod(path.c_str(), 0755);
  return path.string();
}

GpuRunRequest request() {
  GpuRunRequest r;
  r.mode = "correctness";
  r.cases = {{"suite", "public"}, {"seed", 1}};
  return r;
}

TEST(DevicePinningTest, TheWorkerSeesItsDeviceAndTheCallCarriesItsPhases) {
  TempDir dir("pin");
  GpuRunOptions o;
  o.worker = fake_worker(dir);
  o.isolate_network = false;
  o.device = "1";
  const double origin = steady_now_ms();
  const GpuRunResult r = run_gpu_worker(request(), o);
  ASSERT_EQ(r.status, GateStatus::kPass) << r.reason << r.stderr_tail;
  EXPECT_EQ(r.result["env"], "1");
  EXPECT_EQ(r.call.detail["device"], "1");
  EXPECT_EQ(r.call.detail["suite"], "public");
  EXPECT_EQ(r.call.detail["worker_timings"]["context_ms"], 250.5);
  const auto phases = phases_from_tool_calls({r.call}, origin);
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].name, "correctness:public");
  EXPECT_EQ(phases[0].device, "1");
  EXPECT_FALSE(phases[0].nested);
  EXPECT_DOUBLE_EQ(phases[0].wall_ms, r.call.wall_ms);
  EXPECT_GE(phases[0].start_ms, 0);
  EXPECT_EQ(phases[1].name, "worker_start");
  EXPECT_TRUE(phases[1].nested);
  EXPECT_DOUBLE_EQ(phases[1].wall_ms, 255.0);
}

TEST(DevicePinningTest, WithoutADeviceTheWorkerKeepsKloopsEnvironment) {
  TempDir dir("pin");
  GpuRunOptions o;
  o.worker = fake_worker(dir);
  o.isolate_network = false;
  ::setenv("CUDA_VISIBLE_DEVICES", "7", 1);
  const GpuRunResult r = run_gpu_worker(request(), o);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_EQ(r.status, GateStatus::kPass) << r.reason;
  EXPECT_EQ(r.result["env"], "7");
  EXPECT_EQ(r.call.detail["device"], "");
}

TEST(DevicePinningTest, TimedWorkWaitsForTheDeviceAndTheWaitIsAPhase) {
  TempDir dir("pin");
  DeviceLock lock(2);
  GpuRunOptions o;
  o.worker = fake_worker(dir);
  o.isolate_network = false;
  o.device = "0";
  o.access = &lock;
  o.work = DeviceWork::kTimed;
  std::jthread holder([&] { // another candidate's correctness batch holds the device
    DeviceHold h(&lock, DeviceWork::kShared);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double origin = steady_now_ms();
  const GpuRunResult r = run_gpu_worker(request(), o);
  ASSERT_EQ(r.status, GateStatus::kPass) << r.reason;
  EXPECT_EQ(r.call.detail["device_work"], "timed");
  EXPECT_GT(r.call.detail["device_wait_ms"].get<double>(), 150.0);
  const auto phases = phases_from_tool_calls({r.call}, origin);
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases[0].name, "device_wait");
  EXPECT_EQ(phases[0].detail["work"], "timed");
  EXPECT_EQ(phases[0].detail["for"], "correctness:public");
}

// A worker that hangs (writing progress.json first) on its first run in a request folder and
// passes on the next one; with `always_hang` it hangs every time.
std::string slow_first_worker(const TempDir& dir, bool always_hang) {
  const auto path = dir.dir() / (always_hang ? "hanging-worker.sh" : "slow-first-worker.sh");
  std::ofstream(path)
      << "#!/bin/sh\n"
      << (always_hang ? ""
                      : "if [ -e \"$1/attempted\" ]; then\n"
                        "  printf '{\"status\": \"pass\"}' > \"$1/result.json\"\n"
                        "  exit 0\n"
                        "fi\n")
      << "touch \"$1/attempted\"\n"
         "printf '{\"index\": 3, \"name\": \"P1-8x4096-float32\"}' > \"$1/progress.json\"\n"
         "exec sleep 30\n";
  ::chmod(path.c_str(), 0755);
  return path.string();
}

// Records every acquire and release, and lets everything run at once.
struct RecordingAccess final : DeviceAccess {
  std::vector<std::string> events;
  void acquire(DeviceWork w) override {
    events.push_back("acquire " + std::string(device_work_name(w)));
  }
  void release(DeviceWork w) override {
    events.push_back("release " + std::string(device_work_name(w)));
  }
};

TEST(DeviceRetryTest, ASharedBatchPastItsDeadlineIsRunAgainAloneAndThatRunDecides) {
  TempDir dir("retry");
  RecordingAccess access;
  GpuRunOptions o;
  o.worker = slow_first_worker(dir, false);
  o.isolate_network = false;
  o.access = &access;
  o.work = DeviceWork::kShared;
  o.deadline = std::chrono::milliseconds(700);
  const GpuRunResult r = run_gpu_worker(request(), o);
  EXPECT_EQ(r.status, GateStatus::kPass) << r.reason;
  EXPECT_TRUE(r.progress.is_null()) << "the first attempt's progress stood for the retry";
  EXPECT_EQ(r.call.detail["retried_alone"], true);
  EXPECT_EQ(r.call.detail["device_work"], "timed");
  EXPECT_GE(r.call.detail["shared_attempt_wall_ms"].get<double>(), 600.0);
  EXPECT_EQ(access.events, (std::vector<std::string>{"acquire shared", "release shared",
                                                     "acquire timed", "release timed"}));
}

TEST(DeviceRetryTest, AKernelThatHangsAloneTooIsATimeout) {
  TempDir dir("retry");
  RecordingAccess access;
  GpuRunOptions o;
  o.worker = slow_first_worker(dir, true);
  o.isolate_network = false;
  o.access = &access;
  o.deadline = std::chrono::milliseconds(500);
  const GpuRunResult r = run_gpu_worker(request(), o);
  EXPECT_EQ(r.status, GateStatus::kTimeout) << r.reason;
  EXPECT_EQ(r.fault_class, "timeout") << r.reason;
  EXPECT_NE(r.reason.find("case 3 (P1-8x4096-float32)"), std::string::npos) << r.reason;
  EXPECT_EQ(r.call.detail["retried_alone"], true);
  EXPECT_EQ(access.events.size(), 4u);
}

TEST(DeviceRetryTest, WithoutADeviceLockATimeoutIsNotRetried) {
  TempDir dir("retry");
  GpuRunOptions o;
  o.worker = slow_first_worker(dir, false); // would pass a second time: it must not get one
  o.isolate_network = false;
  o.deadline = std::chrono::milliseconds(500);
  const GpuRunResult r = run_gpu_worker(request(), o);
  EXPECT_EQ(r.status, GateStatus::kTimeout) << r.reason;
  EXPECT_EQ(r.fault_class, "timeout");
  EXPECT_FALSE(r.call.detail.contains("retried_alone"));
}

// A worker that begins `cases` cases (progress.json) 0.25 s apart, then passes; cases < 0: it
// keeps beginning cases and never finishes.
std::string progressing_worker(const TempDir& dir, int cases) {
  const auto path = dir.dir() / ("progressing-worker-" + std::to_string(cases) + ".sh");
  const std::string condition = cases < 0 ? "1 -eq 1" : "$i -lt " + std::to_string(cases);
  std::ofstream script(path);
  script << "#!/bin/sh\ni=0\n";
  script << "while [ " << condition << " ]; do\n";
  script << "  printf '{\"index\": %d, \"name\": \"c%d\"}' $i $i > \"$1/progress.json\"\n";
  script << "  i=$((i+1)); sleep 0.25\ndone\n";
  script << "printf '{\"status\": \"pass\"}' > \"$1/result.json\"\n";
  script.close();
  ::chmod(path.c_str(), 0755);
  return path.string();
}

// The watchdog restarts at each case the worker begins (progress.json): a batch slower than its
// deadline that keeps making progress passes (here 2 s of cases against a 0.7 s deadline).
TEST(WatchdogTest, AWorkerThatKeepsBeginningCasesRunsPastItsDeadlineUpToTheCap) {
  TempDir dir("watch");
  GpuRunOptions o;
  o.worker = progressing_worker(dir, 8);
  o.isolate_network = false;
  o.deadline = std::chrono::milliseconds(700);
  o.deadline_cap = std::chrono::milliseconds(8000);
  const GpuRunResult r = run_gpu_worker(request(), o);
  EXPECT_EQ(r.status, GateStatus::kPass) << r.reason;
  EXPECT_GE(r.call.detail["progress_changes"].get<int>(), 4);
  EXPECT_GT(r.wall_ms, 1500.0);
  // Without a cap the batch's deadline is its whole allowance, as before.
  o.deadline_cap = std::chrono::milliseconds(0);
  const GpuRunResult capped = run_gpu_worker(request(), o);
  EXPECT_EQ(capped.status, GateStatus::kTimeout) << capped.reason;
  EXPECT_LT(capped.wall_ms, 1500.0 + 2000.0); // deadline plus the kill grace
  EXPECT_EQ(capped.call.detail["deadline_capped"], false);
  EXPECT_NE(capped.reason.find("passed its watchdog deadline of 0.7 s during case"),
            std::string::npos)
      << capped.reason;
}

// A worker that keeps beginning cases is stopped at the cap, and the reason says it was slow,
// not hung; a worker that stops beginning cases is stopped one deadline after its last case.
TEST(WatchdogTest, TheCapStopsASlowBatchAndAStallStopsAHungOne) {
  TempDir dir("watch");
  GpuRunOptions o;
  o.worker = progressing_worker(dir, -1);
  o.isolate_network = false;
  o.deadline = std::chrono::milliseconds(600);
  o.deadline_cap = std::chrono::milliseconds(1500);
  const GpuRunResult slow = run_gpu_worker(request(), o);
  EXPECT_EQ(slow.status, GateStatus::kTimeout) << slow.reason;
  EXPECT_EQ(slow.call.detail["deadline_capped"], true);
  EXPECT_NE(slow.reason.find("limit of 1.5 s"), std::string::npos) << slow.reason;
  EXPECT_NE(slow.reason.find("slow rather than hung"), std::string::npos) << slow.reason;
  EXPECT_GE(slow.wall_ms, 1400.0);

  o.worker = slow_first_worker(dir, true); // one case begun, then a hang
  const GpuRunResult hung = run_gpu_worker(request(), o);
  EXPECT_EQ(hung.status, GateStatus::kTimeout) << hung.reason;
  EXPECT_EQ(hung.call.detail["deadline_capped"], false);
  EXPECT_NE(hung.reason.find("case 3 (P1-8x4096-float32) (no new case began for 0.6 s)"),
            std::string::npos)
      << hung.reason;
  EXPECT_LT(hung.wall_ms, 1400.0 + 2000.0); // stopped at the stall, not the cap (plus grace)

  // A hang in the first case with no cap beyond the deadline (the H200 run of 955cd5f: the corpus'
  // endless loop was reported as "slow rather than hung") is reported as a hang.
  o.deadline_cap = std::chrono::milliseconds(0);
  const GpuRunResult first = run_gpu_worker(request(), o);
  EXPECT_EQ(first.status, GateStatus::kTimeout) << first.reason;
  EXPECT_EQ(first.call.detail["deadline_capped"], false);
  EXPECT_EQ(first.reason.find("slow rather than hung"), std::string::npos) << first.reason;
  EXPECT_NE(first.reason.find("did not finish"), std::string::npos) << first.reason;
}

TEST(PhaseTimingsTest, BenchmarkStatesAreGroupedByShapeClassAndState) {
  ToolCall c;
  c.wall_ms = 9000;
  c.detail = {{"tool", "kloop-gpu-worker"},
              {"mode", "benchmark"},
              {"device", "0"},
              {"worker_timings",
               {{"context_ms", 300},
                {"load_ms", 20},
                {"bench_setup_ms", 800},
                {"copy_ceiling_ms", 90},
                {"bench_states",
                 {{{"shape_class", "streaming"},
                   {"state", "cold"},
                   {"ms", 250},
                   {"rounds", 60},
                   {"stop", "time_cap"}},
                  {{"shape_class", "streaming"},
                   {"state", "cold"},
                   {"ms", 100},
                   {"rounds", 24},
                   {"stop", "noise"}},
                  {{"shape_class", "narrow"},
                   {"state", "warm"},
                   {"ms", 40},
                   {"rounds", 200},
                   {"stop", "max_rounds"}}}}}}};
  const auto phases = phases_from_tool_calls({c}, 0);
  std::map<std::string, Phase> by_name;
  for (const auto& p : phases)
    by_name[p.name] = p;
  ASSERT_TRUE(by_name.count("benchmark"));
  EXPECT_FALSE(by_name["benchmark"].nested);
  ASSERT_TRUE(by_name.count("benchmark:streaming:cold"));
  const Phase& s = by_name["benchmark:streaming:cold"];
  EXPECT_TRUE(s.nested);
  EXPECT_DOUBLE_EQ(s.wall_ms, 350);
  EXPECT_EQ(s.detail["states"], 2);
  EXPECT_EQ(s.detail["rounds"], 84);
  EXPECT_EQ(s.detail["max_rounds"], 60);
  EXPECT_EQ(s.detail["stop"]["noise"], 1);
  EXPECT_EQ(by_name["benchmark:narrow:warm"].detail["stop"]["max_rounds"], 1);
  EXPECT_DOUBLE_EQ(by_name["benchmark:setup"].wall_ms, 800);
  EXPECT_DOUBLE_EQ(by_name["benchmark:copy_ceiling"].wall_ms, 90);
  EXPECT_DOUBLE_EQ(by_name["worker_start"].wall_ms, 320);
  // Build and static tools are host phases timed where they run, not device processes.
  ToolCall build;
  build.detail = {{"tool", "kloop-build-worker"}};
  EXPECT_TRUE(phases_from_tool_calls({build}, 0).empty());
}

TEST(PhaseTimingsTest, SanitizerAndNcuRunsAreNamedByTool) {
  ToolCall a, b, v;
  a.detail = {{"tool", "compute-sanitizer"}, {"mode", "sanitize"}, {"sanitizer_tool", "racecheck"}};
  b.detail = {{"tool", "ncu"}, {"mode", "bench"}};
  v.detail = {{"tool", "compute-sanitizer"}, {"mode", "version"}};
  const auto phases = phases_from_tool_calls({a, b, v}, 0);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0].name, "sanitizer:racecheck");
  EXPECT_EQ(phases[1].name, "ncu");
  EXPECT_EQ(phases[2].name, "sanitizer:version");
  const Phase back = Phase::from_json(phases[0].to_json());
  EXPECT_EQ(back.to_json(), phases[0].to_json());
}

} // namespace
} // namespace kloop::evaluator
