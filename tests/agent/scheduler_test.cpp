// The multi-device scheduler (agent/scheduler.h) on the CPU with fake device workers: results in
// the batch's order, timed work alone on its device, host stages overlapping device stages, a
// crash or a hang on one device costing only its candidate while the other device keeps going,
// Ctrl-C starting nothing new, the sequential mode, no devices; and the device lock itself
// (evaluator/device_access.h). The fakes sleep for a few tens of milliseconds per stage and record
// every interval they held the device, so the assertions are about order and overlap, not speed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "agent/scheduler.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"
#include "tests/support/test_files.h"

namespace kloop::agent {
namespace {

using evaluator::DeviceAccess;
using evaluator::DeviceHold;
using evaluator::DeviceWork;
using evaluator::GateResult;
using evaluator::GateStatus;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::filesystem::path kGood =
    std::filesystem::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good";

// One interval of work: which candidate, where ("host" or the device), shared or timed.
struct Interval {
  std::string label, where, kind;
  Clock::time_point start, end;
};

class Timeline {
public:
  void add(Interval i) {
    std::lock_guard<std::mutex> lock(mu_);
    v_.push_back(std::move(i));
  }
  std::vector<Interval> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    return v_;
  }

private:
  mutable std::mutex mu_;
  std::vector<Interval> v_;
};

bool overlap(const Interval& a, const Interval& b) {
  return a.start < b.end && b.start < a.end;
}

// What a fake candidate does on the device, from a marker in its source.
struct Script {
  milliseconds shared{40}, timed{30}, host{20};
  milliseconds hang{1500}; // a "hang" candidate blocks this long, then its watchdog fires
  std::atomic<bool>* cancel_on_device = nullptr; // set when the first device stage starts
};

// Device gates that hold the device like GpuWorkerGates: correctness shared, benchmark timed.
class FakeGates final : public evaluator::DeviceGates {
public:
  FakeGates(std::string device, DeviceAccess& access, Timeline& timeline, const Script& script)
      : device_(std::move(device)), access_(access), timeline_(timeline), script_(script) {}
  std::vector<GateResult> run(const evaluator::BuiltCandidate& built) override {
    const std::string label = built.candidate.source.substr(0, built.candidate.source.find('\n'));
    const auto held = [&](DeviceWork work, milliseconds how_long) {
      DeviceHold hold(&access_, work);
      Interval i{label, device_, std::string(evaluator::device_work_name(work)), Clock::now(), {}};
      if (script_.cancel_on_device) script_.cancel_on_device->store(true);
      std::this_thread::sleep_for(how_long);
      i.end = Clock::now();
      timeline_.add(i);
    };
    std::vector<GateResult> out;
    const auto rest = [&](const char* why) {
      for (const char* g : {"sanitizer", "benchmark", "roofline"})
        out.push_back(GateResult{g, GateStatus::kNotRun, why, nlohmann::json::object()});
      return out;
    };
    if (label.find("crash") != std::string::npos) {
      held(DeviceWork::kShared, milliseconds(5));
      out.push_back(GateResult{"correctness",
                               GateStatus::kCrashed,
                               "crashed: illegal_address (fake) during case 3",
                               {{"label", label}, {"device", device_}}});
      return rest("correctness did not pass");
    }
    if (label.find("hang") != std::string::npos) {
      held(DeviceWork::kShared, script_.hang); // the watchdog ends it
      out.push_back(GateResult{"correctness",
                               GateStatus::kTimeout,
                               "timeout: the GPU worker passed its watchdog deadline (fake)",
                               {{"label", label}, {"device", device_}}});
      return rest("correctness did not pass");
    }
    held(DeviceWork::kShared, script_.shared); // correctness and sanitizer
    out.push_back(
        GateResult{"correctness", GateStatus::kPass, "", {{"label", label}, {"device", device_}}});
    out.push_back(GateResult{"sanitizer", GateStatus::kPass, "", nlohmann::json::object()});
    held(DeviceWork::kTimed, script_.timed); // benchmark and roofline
    out.push_back(GateResult{"benchmark", GateStatus::kPass, "", nlohmann::json::object()});
    out.push_back(GateResult{"roofline", GateStatus::kPass, "", nlohmann::json::object()});
    return out;
  }

private:
  std::string device_;
  DeviceAccess& access_;
  Timeline& timeline_;
  const Script& script_;
};

class FakeDeviceWorker final : public DeviceWorker {
public:
  FakeDeviceWorker(std::string device, Timeline& timeline, const Script& script)
      : device_(std::move(device)), timeline_(timeline), script_(script) {}
  std::string device() const override { return device_; }
  std::unique_ptr<evaluator::DeviceGates> gates(DeviceAccess& access, bool) override {
    return std::make_unique<FakeGates>(device_, access, timeline_, script_);
  }

private:
  std::string device_;
  Timeline& timeline_;
  const Script& script_;
};

class SchedulerTest : public ::testing::Test {
protected:
  // Candidates whose first source line is their label ("c0", "c1 crash", ...), with the good
  // fixture's manifest (parsed by the fake host stage as the real contract gate does).
  std::vector<evaluator::Candidate> candidates(const std::vector<std::string>& labels) {
    std::vector<evaluator::Candidate> out;
    for (const auto& l : labels) {
      evaluator::Candidate c;
      c.source = l + "\n" + test_support::read_file(kGood / "kernel.cu");
      c.manifest_text = test_support::read_file(kGood / "manifest.json");
      out.push_back(std::move(c));
    }
    return out;
  }

  // Host stages that take script.host and pass: the real stages would build with NVRTC.
  HostStageFn fake_host() {
    return [this](const evaluator::Candidate& c, double origin_ms) {
      const auto start = Clock::now();
      std::this_thread::sleep_for(script.host);
      evaluator::HostStages h;
      h.evaluation.origin_ms = origin_ms;
      h.op = &rmsnorm::operator_instance();
      h.evaluation.manifest = op::parse_manifest(h.op->declaration(), c.manifest_text).manifest;
      evaluator::BuildResult b;
      b.cubin = "\x7f"
                "ELF fake";
      b.gate = GateResult{"build", GateStatus::kPass, "", nlohmann::json::object()};
      h.evaluation.build = b;
      h.evaluation.report.gates = {
          GateResult{"contract", GateStatus::kPass, "", nlohmann::json::object()}, b.gate,
          GateResult{"static", GateStatus::kPass, "", nlohmann::json::object()}};
      h.device_ready = h.evaluation.manifest.has_value();
      timeline.add({c.source.substr(0, c.source.find('\n')), "host", "host", start, Clock::now()});
      return h;
    };
  }

  Scheduler make(int devices, int per_device, int shared, bool pipeline = true, int host_jobs = 2) {
    std::vector<std::unique_ptr<DeviceWorker>> workers;
    for (int d = 0; d < devices; ++d)
      workers.push_back(std::make_unique<FakeDeviceWorker>(std::to_string(d), timeline, script));
    SchedulerOptions o;
    o.pipeline = pipeline;
    o.host_jobs = host_jobs;
    o.device_candidates = per_device;
    o.shared_per_device = shared;
    o.host_stages = fake_host();
    o.no_device_reason = "no usable CUDA device (test)";
    return Scheduler(std::move(workers), std::move(o));
  }

  static std::string label_of(const evaluator::Evaluation& ev) {
    const auto* g = ev.report.find("correctness");
    return g ? g->evidence.value("label", std::string()) : std::string();
  }

  Timeline timeline;
  Script script;
};

TEST_F(SchedulerTest, EvaluationsComeBackInTheBatchOrder) {
  Scheduler s = make(2, 2, 2);
  const auto cands = candidates({"c0", "c1", "c2", "c3", "c4", "c5"});
  const auto out = s.evaluate_batch(cands, nullptr);
  ASSERT_EQ(out.size(), 6u);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(out[i]) << i;
    EXPECT_EQ(label_of(*out[i]), "c" + std::to_string(i));
    EXPECT_EQ(out[i]->report.verdict, evaluator::Verdict::kPass);
    EXPECT_EQ(out[i]->report.gates.size(), 7u); // contract, build, static + four device gates
  }
  std::set<std::string> used;
  for (const auto& i : timeline.all())
    if (i.where != "host") used.insert(i.where);
  EXPECT_EQ(used, (std::set<std::string>{"0", "1"})) << "both devices took candidates";
}

TEST_F(SchedulerTest, TimedWorkRunsAloneOnItsDevice) {
  Scheduler s = make(2, 3, 3);
  const auto out =
      s.evaluate_batch(candidates({"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}), nullptr);
  ASSERT_EQ(out.size(), 8u);
  const auto all = timeline.all();
  int timed = 0;
  bool shared_together = false;
  for (const auto& a : all) {
    if (a.where == "host") continue;
    for (const auto& b : all) {
      if (&a == &b || b.where != a.where) continue;
      if (a.kind == "timed") {
        EXPECT_FALSE(overlap(a, b)) << a.label << " timed on device " << a.where << " overlaps "
                                    << b.label << " " << b.kind;
      }
      if (a.kind == "shared" && b.kind == "shared" && overlap(a, b)) shared_together = true;
    }
    timed += a.kind == "timed";
  }
  EXPECT_EQ(timed, 8);
  EXPECT_TRUE(shared_together) << "shared work of several candidates may share a device";
}

TEST_F(SchedulerTest, HostStagesOfLaterCandidatesOverlapDeviceStages) {
  script.shared = milliseconds(80);
  Scheduler s = make(1, 1, 1);
  (void)s.evaluate_batch(candidates({"c0", "c1", "c2", "c3"}), nullptr);
  const auto all = timeline.all();
  bool overlapped = false;
  for (const auto& h : all)
    for (const auto& d : all)
      if (h.where == "host" && d.where != "host" && h.label != d.label && overlap(h, d))
        overlapped = true;
  EXPECT_TRUE(overlapped) << "the next candidates are built while the device gates run";
}

TEST_F(SchedulerTest, ACrashOnOneDeviceCostsOnlyItsCandidate) {
  Scheduler s = make(2, 1, 1);
  const auto out = s.evaluate_batch(candidates({"c0", "c1 crash", "c2", "c3"}), nullptr);
  ASSERT_EQ(out.size(), 4u);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(out[i]);
    const auto* g = out[i]->report.find("correctness");
    ASSERT_NE(g, nullptr);
    if (i == 1) {
      EXPECT_EQ(g->status, GateStatus::kCrashed);
      EXPECT_EQ(out[i]->report.verdict, evaluator::Verdict::kReject);
    } else {
      EXPECT_EQ(g->status, GateStatus::kPass) << i;
      EXPECT_EQ(out[i]->report.verdict, evaluator::Verdict::kPass) << i;
    }
  }
}

TEST_F(SchedulerTest, AHangOnOneDeviceLetsTheOtherDeviceKeepGoing) {
  script.hang = milliseconds(1500);
  Scheduler s = make(2, 1, 1);
  const auto out = s.evaluate_batch(candidates({"c0 hang", "c1", "c2", "c3", "c4", "c5"}), nullptr);
  ASSERT_TRUE(out[0]);
  EXPECT_EQ(out[0]->report.find("correctness")->status, GateStatus::kTimeout);
  const auto all = timeline.all();
  const auto hung = std::find_if(all.begin(), all.end(), [](const Interval& i) {
    return i.label == "c0 hang" && i.where != "host";
  });
  ASSERT_NE(hung, all.end());
  for (std::size_t i = 1; i < out.size(); ++i) {
    ASSERT_TRUE(out[i]);
    EXPECT_EQ(out[i]->report.verdict, evaluator::Verdict::kPass) << i;
  }
  for (const auto& i : all) {
    if (i.where == "host" || i.label == "c0 hang") continue;
    EXPECT_NE(i.where, hung->where) << i.label << " waited for the hung device";
    EXPECT_LT(i.end, hung->end) << i.label << " finished only after the hang";
  }
}

TEST_F(SchedulerTest, CtrlCStartsNoFurtherStageAndKeepsWhatFinished) {
  std::atomic<bool> cancel{false};
  script.cancel_on_device = &cancel; // Ctrl-C as the first device stage starts
  script.shared = milliseconds(60);
  Scheduler s = make(1, 1, 1, true, 1);
  const auto out = s.evaluate_batch(candidates({"c0", "c1", "c2", "c3"}), &cancel);
  ASSERT_EQ(out.size(), 4u);
  ASSERT_TRUE(out[0]) << "the stage in flight finishes";
  EXPECT_EQ(out[0]->report.verdict, evaluator::Verdict::kPass);
  for (std::size_t i = 1; i < out.size(); ++i)
    EXPECT_FALSE(out[i]) << "candidate " << i << " started after Ctrl-C";
  for (const auto& i : timeline.all()) {
    if (i.where != "host") {
      EXPECT_EQ(i.label, "c0");
    }
  }
}

TEST_F(SchedulerTest, WithoutThePipelineOneCandidateAtATimeOnTheFirstDevice) {
  Scheduler s = make(2, 3, 3, /*pipeline=*/false);
  const auto out = s.evaluate_batch(candidates({"c0", "c1", "c2"}), nullptr);
  ASSERT_EQ(out.size(), 3u);
  const auto all = timeline.all();
  for (const auto& a : all) {
    if (a.where != "host") {
      EXPECT_EQ(a.where, "0");
    }
    for (const auto& b : all) {
      if (&a != &b) {
        EXPECT_FALSE(overlap(a, b)) << a.label << " " << a.kind << " / " << b.label;
      }
    }
  }
}

TEST_F(SchedulerTest, WithoutDevicesTheDeviceGatesAreNotRunWithTheReason) {
  Scheduler s = make(0, 1, 1);
  const auto out = s.evaluate_batch(candidates({"c0", "c1"}), nullptr);
  for (const auto& ev : out) {
    ASSERT_TRUE(ev);
    EXPECT_EQ(ev->report.verdict, evaluator::Verdict::kPendingDeviceValidation);
    const auto* g = ev->report.find("correctness");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->status, GateStatus::kNotRun);
    EXPECT_EQ(g->reason, "no usable CUDA device (test)");
  }
}

TEST_F(SchedulerTest, WaitsForAHostSlotAndForADeviceAreRecordedAsPhases) {
  script.shared = milliseconds(50);
  Scheduler s = make(1, 1, 1, true, 1);
  const auto out = s.evaluate_batch(candidates({"c0", "c1", "c2"}), nullptr);
  const auto has = [](const evaluator::Evaluation& ev, const std::string& name) {
    return std::any_of(ev.phases.begin(), ev.phases.end(),
                       [&](const evaluator::Phase& p) { return p.name == name; });
  };
  ASSERT_TRUE(out[2]);
  EXPECT_TRUE(has(*out[2], "host_wait")) << "c2 waited for the one host slot";
  EXPECT_TRUE(has(*out[2], "device_wait")) << "c2 waited for the one device slot";
}

// ---- the device lock ----

TEST(DeviceLockTest, TimedWorkWaitsForSharedWorkAndBlocksNewSharedWork) {
  evaluator::DeviceLock lock(4);
  std::vector<std::string> order;
  std::mutex mu;
  const auto note = [&](std::string what) {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(std::move(what));
  };
  std::optional<DeviceHold> first(std::in_place, &lock, DeviceWork::kShared);
  std::jthread timed([&] {
    DeviceHold h(&lock, DeviceWork::kTimed);
    note("timed");
  });
  std::this_thread::sleep_for(milliseconds(50)); // the timed holder is waiting now
  std::jthread late_shared([&] {
    DeviceHold h(&lock, DeviceWork::kShared);
    note("late shared");
  });
  std::this_thread::sleep_for(milliseconds(50));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_TRUE(order.empty()) << "nothing passes the first shared holder and the waiting timer";
  }
  first.reset();
  timed.join();
  late_shared.join();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "timed") << "writer preference: the waiting timed work goes first";
}

TEST(DeviceLockTest, SharedWorkIsBoundedPerDevice) {
  evaluator::DeviceLock lock(2);
  std::atomic<int> now{0}, peak{0};
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 6; ++i)
      threads.emplace_back([&] {
        DeviceHold h(&lock, DeviceWork::kShared);
        const int n = ++now;
        int p = peak.load();
        while (n > p && !peak.compare_exchange_weak(p, n)) {
        }
        std::this_thread::sleep_for(milliseconds(20));
        --now;
      });
  }
  EXPECT_EQ(peak.load(), 2);
}

TEST(DeviceLockTest, NoAccessMeansNoWait) {
  DeviceHold h(nullptr, DeviceWork::kTimed);
  EXPECT_EQ(h.wait_ms(), 0);
}

} // namespace
} // namespace kloop::agent
