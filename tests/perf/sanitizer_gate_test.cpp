// Unit tests of the sanitizer gate's decisions (evaluator/sanitizer.h): judging tool runs, the
// shared-memory poisoning verdict, and run_gate with a fake process runner.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "evaluator/gpu_runner.h"
#include "evaluator/sanitizer.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator::sanitizer {
namespace {

std::string fixture(const std::string& name) {
  return test_support::read_file(std::string(KLOOP_PERF_FIXTURES) + "/" + name);
}

ToolCall call_with(int exit_code, bool timed_out = false) {
  ToolCall c;
  c.argv = {"/cs", "--tool", "memcheck"};
  c.exit_code = exit_code;
  c.timed_out = timed_out;
  c.wall_ms = 12;
  return c;
}

const nlohmann::json kOk = {{"status", "pass"}};

nlohmann::json poison(bool identical, bool correct) {
  return {{"status", "pass"},
          {"poison",
           {{"patterns", {"0xdeadbeef", "0x7fc00001"}},
            {"cases", {{{"case", "bf16 4099"}, {"identical", identical}, {"correct", correct}}}}}}};
}

TEST(SanitizerGateTest, CleanRunNeedsExitZeroZeroSummaryAndWorkerSuccess) {
  EXPECT_EQ(judge_tool_run("memcheck", call_with(0), fixture("clean.txt"), kOk).outcome,
            ToolOutcome::kClean);
  EXPECT_EQ(
      judge_tool_run("memcheck", call_with(0), fixture("clean.txt"), {{"status", "fail"}}).outcome,
      ToolOutcome::kUnexplained);
}

TEST(SanitizerGateTest, HazardsKeepHashAndNameTheLine) {
  const std::string text = fixture("racecheck_missing_barrier.txt");
  const ToolRun r = judge_tool_run("racecheck", call_with(kErrorExitCode), text, kOk);
  EXPECT_EQ(r.outcome, ToolOutcome::kHazards);
  EXPECT_NE(r.reason.find("kernel.cu:30"), std::string::npos) << r.reason;
  EXPECT_EQ(r.report_sha256.size(), 64u);
  EXPECT_EQ(r.report_text, text);
  EXPECT_EQ(r.to_json()["hazard_count"], 2);
}

TEST(SanitizerGateTest, UnparsedErrorsAreUnexplained) {
  const ToolRun r =
      judge_tool_run("memcheck", call_with(kErrorExitCode), fixture("unknown_kind.txt"), kOk);
  EXPECT_EQ(r.outcome, ToolOutcome::kUnexplained);
  EXPECT_NE(r.reason.find("unexplained"), std::string::npos);
  EXPECT_EQ(judge_tool_run("memcheck", call_with(1), "", kOk).outcome, ToolOutcome::kUnexplained);
}

TEST(SanitizerGateTest, DeadlineAndWorkerInfraFailureAreNotHazards) {
  EXPECT_EQ(judge_tool_run("racecheck", call_with(-1, true), "", kOk).outcome,
            ToolOutcome::kTimeout);
  EXPECT_EQ(judge_tool_run("racecheck", call_with(kGpuWorkerInternal), "", nullptr).outcome,
            ToolOutcome::kInfraError);
  EXPECT_EQ(judge_tool_run("racecheck", call_with(kGpuWorkerNoDevice), "", nullptr).outcome,
            ToolOutcome::kNotRun);
}

TEST(SanitizerGateTest, PoisonMismatchOrWrongResultFails) {
  EXPECT_EQ(judge_poison(poison(true, true)), "");
  EXPECT_NE(judge_poison(poison(false, true)).find("uninitialised shared"), std::string::npos);
  EXPECT_NE(judge_poison(poison(true, false)).find("wrong result"), std::string::npos);
  EXPECT_FALSE(judge_poison(kOk).empty());
}

// The worker's result is untrusted (it runs the candidate): members of the wrong type fail the
// poisoning check or are read as absent, never throw out of the gate.
TEST(SanitizerGateTest, MalformedWorkerResultsAreJudgedWithoutThrowing) {
  using nlohmann::json;
  for (const json& bad :
       {json{{"poison", 5}}, json{{"poison", {{"cases", "x"}}}},
        json{{"poison", {{"cases", {1, "a", nullptr}}}}},
        json{{"poison", {{"cases", {{{"case", 3}, {"identical", "yes"}}}}}}},
        json{{"poison",
              {{"patterns", 7},
               {"cases", {{{"identical", true}, {"correct", false}, {"reason", {1}}}}}}}}}) {
    std::string why;
    EXPECT_NO_THROW(why = judge_poison(bad)) << bad.dump();
    EXPECT_FALSE(why.empty()) << bad.dump();
  }
  ToolCall call;
  call.exit_code = kGpuWorkerInternal;
  ToolRun run;
  EXPECT_NO_THROW(run = judge_tool_run("memcheck", call, "", json{{"reason", {{"x", 1}}}}));
  EXPECT_EQ(run.outcome, ToolOutcome::kInfraError);
  call.exit_code = 0;
  EXPECT_NO_THROW(run = judge_tool_run("memcheck", call, "", json{{"status", 1}}));
  EXPECT_EQ(run.outcome, ToolOutcome::kUnexplained);
}

TEST(SanitizerGateTest, GateFailsOnHazardsOrPoisonAndPassesWhenAllClean) {
  std::vector<ToolRun> clean;
  for (auto tool : kTools) {
    clean.push_back(judge_tool_run(tool, call_with(0), fixture("clean.txt"), kOk));
  }
  const GateResult pass = gate_from_runs(clean, "2025.3.1.0", poison(true, true));
  EXPECT_EQ(pass.status, GateStatus::kPass) << pass.reason;
  EXPECT_EQ(pass.evidence["tools"].size(), 4u);
  EXPECT_EQ(pass.evidence["tool_version"], "2025.3.1.0");
  EXPECT_EQ(gate_from_runs(clean, "v", poison(false, true)).status, GateStatus::kFail);
  auto with_race = clean;
  with_race[1] = judge_tool_run("racecheck", call_with(kErrorExitCode),
                                fixture("racecheck_missing_barrier.txt"), kOk);
  EXPECT_EQ(gate_from_runs(with_race, "v", poison(true, true)).status, GateStatus::kFail);
}

TEST(SanitizerGateTest, MissingToolIsNotRunWithReason) {
  GateConfig config;
  config.sanitizer_path = "";
  int calls = 0;
  const GateResult g = run_gate(
      config,
      [&](const auto&, const auto&) {
        ++calls;
        return ToolCall{};
      },
      nullptr);
  EXPECT_EQ(g.status, GateStatus::kNotRun);
  EXPECT_NE(g.reason.find("compute-sanitizer"), std::string::npos);
  EXPECT_EQ(calls, 0);
}

TEST(SanitizerGateTest, RunGateRunsEveryToolWithErrorExitcodeAndKeepsReports) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kloop-sanitizer-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  GateConfig config;
  config.sanitizer_path = "/bin/true"; // executable; the fake runner never runs it
  config.worker_argv = {"/w", "--request", "req.json"};
  config.work_dir = dir.string();
  config.worker_result_path = (dir / "result.json").string();
  std::vector<std::vector<std::string>> seen;
  auto runner = [&](const std::vector<std::string>& argv, const SubprocessOptions&) {
    seen.push_back(argv);
    ToolCall c;
    c.argv = argv;
    c.exit_code = 0;
    if (argv.size() == 2) {
      c.stdout_text = fixture("version.txt");
      return c;
    }
    const std::string tool = argv[2];
    const std::string log = argv[6];
    std::ofstream(log) << (tool == "racecheck" ? fixture("racecheck_missing_barrier.txt")
                                               : fixture("clean.txt"));
    std::ofstream(config.worker_result_path) << poison(true, true).dump();
    if (tool == "racecheck") c.exit_code = kErrorExitCode;
    return c;
  };
  std::map<std::string, std::string> reports;
  const GateResult g = run_gate(config, runner, &reports);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(seen.size(), 5u); // --version + four tools
  EXPECT_EQ(seen[1][1], "--tool");
  EXPECT_EQ(seen[1][3], "--error-exitcode");
  EXPECT_EQ(seen[1][4], std::to_string(kErrorExitCode));
  EXPECT_EQ(seen[1].back(), "req.json");
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_NE(g.reason.find("racecheck"), std::string::npos) << g.reason;
  EXPECT_EQ(reports.size(), 4u);
  EXPECT_NE(reports["racecheck"].find("Race reported"), std::string::npos);
  EXPECT_EQ(g.evidence["tool_version"], "2025.3.1.0");
  EXPECT_EQ(g.evidence["poison"]["status"], "pass");
}

// Issue 26: fail-fast and concurrent tools decide as the sequential gate does. The fake runner
// answers each tool with a canned report (recorded from compute-sanitizer on the H200) and writes
// the worker's result into the request folder it was given (the last argument).
class SanitizerModesTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kloop-sanitizer-modes-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "request.json") << "{\"mode\": \"sanitize\"}";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  GateConfig config(bool fail_fast, bool concurrent) const {
    GateConfig c;
    c.sanitizer_path = "/bin/true";
    c.worker_argv = {"/w", dir_.string()};
    c.work_dir = dir_.string();
    c.worker_result_path = (dir_ / "result.json").string();
    c.fail_fast = fail_fast;
    c.concurrent = concurrent;
    c.request_files = {"request.json"};
    return c;
  }

  // Runs the gate with `reports` (tool -> fixture file) and returns it; `seen` gets every tool
  // run's request folder.
  GateResult run(const GateConfig& c, const std::map<std::string, std::string>& reports) {
    seen.clear();
    auto runner = [&](const std::vector<std::string>& argv, const SubprocessOptions&) {
      ToolCall call;
      call.argv = argv;
      call.exit_code = 0;
      if (argv.size() == 2) {
        call.stdout_text = fixture("version.txt");
        return call;
      }
      const std::string tool = argv[2];
      const auto it = reports.find(tool);
      const std::string file = it == reports.end() ? "clean.txt" : it->second;
      std::ofstream(argv[6]) << fixture(file);
      std::ofstream(argv.back() + "/result.json") << poison(true, true).dump();
      if (file != "clean.txt") call.exit_code = kErrorExitCode;
      std::lock_guard<std::mutex> lock(mu_);
      seen[tool] = argv.back();
      request[tool] = test_support::read_file(argv.back() + "/request.json");
      EXPECT_TRUE(std::filesystem::exists(argv.back() + "/request.json")) << tool;
      return call;
    };
    return run_gate(c, runner, nullptr);
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> seen;    // tool -> the folder it ran in
  std::map<std::string, std::string> request; // tool -> the request.json its worker read
  std::mutex mu_;
};

TEST_F(SanitizerModesTest, FailFastStopsAfterMemcheckHazardsWithTheSameVerdict) {
  const std::map<std::string, std::string> reports{{"memcheck", "memcheck_oob.txt"},
                                                   {"racecheck", "racecheck_missing_barrier.txt"}};
  const GateResult full = run(config(false, false), reports);
  EXPECT_EQ(seen.size(), 4u);
  const GateResult fast = run(config(true, false), reports);
  EXPECT_EQ(seen.size(), 1u) << "only memcheck ran";
  EXPECT_EQ(fast.status, GateStatus::kFail);
  EXPECT_EQ(fast.status, full.status);
  EXPECT_EQ(fast.reason, full.reason);
  ASSERT_EQ(fast.evidence["tools"].size(), 4u);
  EXPECT_EQ(fast.evidence["tools"][1]["outcome"], "not_run");
  EXPECT_NE(fast.evidence["tools"][1]["reason"].get<std::string>().find("memcheck already"),
            std::string::npos);
}

TEST_F(SanitizerModesTest, FailFastAfterALaterToolKeepsItsReason) {
  const std::map<std::string, std::string> reports{{"racecheck", "racecheck_missing_barrier.txt"},
                                                   {"initcheck", "initcheck_uninit_global.txt"}};
  const GateResult full = run(config(false, false), reports);
  const GateResult fast = run(config(true, false), reports);
  EXPECT_EQ(seen.size(), 2u) << "memcheck and racecheck ran";
  EXPECT_EQ(fast.status, full.status);
  EXPECT_EQ(fast.reason, full.reason);
  EXPECT_NE(fast.reason.find("racecheck"), std::string::npos) << fast.reason;
}

TEST_F(SanitizerModesTest, ConcurrentToolsRunInTheirOwnFoldersWithTheSameVerdict) {
  for (const auto& reports : std::vector<std::map<std::string, std::string>>{
           {},
           {{"racecheck", "racecheck_missing_barrier.txt"}},
           {{"synccheck", "synccheck_divergent.txt"}, {"initcheck", "initcheck_uninit_global.txt"}},
           {{"memcheck", "memcheck_oob.txt"}}}) {
    const GateResult sequential = run(config(false, false), reports);
    const GateResult concurrent = run(config(false, true), reports);
    EXPECT_EQ(concurrent.status, sequential.status);
    EXPECT_EQ(concurrent.reason, sequential.reason);
    ASSERT_EQ(concurrent.evidence["tools"].size(), 4u);
    for (std::size_t i = 0; i < 4; ++i)
      EXPECT_EQ(concurrent.evidence["tools"][i]["tool"], std::string(kTools[i]));
    EXPECT_EQ(seen["memcheck"], dir_.string()) << "memcheck runs first, in the request folder";
    for (const char* tool : {"racecheck", "initcheck", "synccheck"})
      EXPECT_EQ(seen[tool], (dir_ / tool).string());
    EXPECT_EQ(concurrent.evidence["poison"]["status"], "pass");
  }
}

// The racecheck run without the shared-memory scrub (device_gates.cpp): prepare_folder writes each
// tool's request into the folder that tool runs in, before it runs, sequentially (one folder, so
// every tool must get its own request back) and concurrently.
TEST_F(SanitizerModesTest, PrepareFolderGivesEachToolItsOwnRequest) {
  for (const bool concurrent : {false, true}) {
    GateConfig c = config(false, concurrent);
    c.prepare_folder = [](std::string_view tool, const std::string& folder) {
      std::ofstream(folder + "/request.json", std::ios::trunc)
          << "{\"scrub\": " << (tool == "racecheck" ? "false" : "true") << "}";
    };
    const GateResult g = run(c, {});
    EXPECT_EQ(g.status, GateStatus::kPass) << g.reason;
    ASSERT_EQ(request.size(), 4u);
    for (const auto& [tool, text] : request)
      EXPECT_EQ(text, tool == "racecheck" ? "{\"scrub\": false}" : "{\"scrub\": true}")
          << tool << (concurrent ? " (concurrent)" : " (sequential)");
  }
}

} // namespace
} // namespace kloop::evaluator::sanitizer
