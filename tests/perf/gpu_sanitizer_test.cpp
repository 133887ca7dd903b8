// GPU tier of the sanitizer gate: the real worker in "sanitize" mode under the real
// compute-sanitizer (memcheck, racecheck, initcheck, synccheck) and the shared-memory poisoning
// method, on the defect corpus's sanitizer cases (tests/gpu/sanitizer_cases.h) and on the in-tree
// baseline. A missing compute-sanitizer fails these tests (they run only where a device is).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "evaluator/gpu_runner.h"
#include "evaluator/sanitizer.h"
#include "evaluator/subprocess.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/sanitizer_cases.h"

namespace kloop::evaluator::sanitizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string sanitizer_path() {
  const char* env = std::getenv("KLOOP_COMPUTE_SANITIZER");
  const std::string p = env ? env : "/usr/local/cuda/bin/compute-sanitizer";
  return ::access(p.c_str(), X_OK) == 0 ? p : std::string();
}

// How the gate runs its tools (issue 26, evaluator/throughput.h): one after another on every
// case as before, or memcheck first with fail-fast and the three narrower tools at once. The
// corpus must give the same verdicts, with the same tool reporting, in both.
enum class Mode { kSequential, kFast };
std::string mode_name(Mode m) {
  return m == Mode::kFast ? "fast" : "sequential";
}

// Writes the request folder of `c` and runs the whole gate; `small_cases`: RMSNorm's small calls
// (sanitizer_cases.h), else the worker's default representative cases for c's operator.
GateResult sanitize(const gputest::TreeCandidate& c, Mode mode, bool small_cases) {
  const fs::path dir =
      fs::temp_directory_path() / ("kloop-sanitize-" + c.name + "-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.cubin", std::ios::binary) << c.cubin;
  std::ofstream(dir / "kernel.cu") << c.source;
  json req{{"mode", "sanitize"},
           {"cubin", "kernel.cubin"},
           {"source", "kernel.cu"},
           {"manifest", json::parse(c.manifest_text)},
           {"sanitize", json::object()}};
  if (small_cases) req["sanitize"]["cases"] = gputest::sanitizer_small_cases();
  std::ofstream(dir / "request.json") << req.dump();
  GateConfig cfg;
  cfg.sanitizer_path = sanitizer_path();
  cfg.worker_argv = {worker_path("kloop-gpu-worker"), dir.string()};
  cfg.work_dir = dir.string();
  cfg.worker_result_path = (dir / "result.json").string();
  cfg.deadline_per_tool = std::chrono::milliseconds(120000);
  cfg.env = {{"PATH", "/usr/local/cuda/bin:/usr/bin:/bin"},
             {"HOME", dir.string()},
             {"TMPDIR", dir.string()}};
  cfg.fail_fast = cfg.concurrent = mode == Mode::kFast;
  cfg.request_files = {"kernel.cubin", "kernel.cu", "request.json"};
  std::map<std::string, std::string> reports;
  GateResult g = run_gate(cfg, run_subprocess, &reports); // thread-safe for the concurrent tools
  fs::remove_all(dir);
  return g;
}

// RMSNorm's `rel` (corpus/<name> or baseline) on the small calls.
GateResult sanitize(const std::string& rel, Mode mode = Mode::kSequential) {
  return sanitize(gputest::load_candidate(gputest::tree(rel)), mode, true);
}

// A corpus entry of any operator: RMSNorm's on the small calls, another's on its default cases.
GateResult sanitize(const gputest::SanitizerCase& c, Mode mode) {
  const std::string op(c.op), entry(c.entry);
  for (const test_support::CorpusEntry& e : test_support::corpus_entries("corpus", op))
    if (e.name == entry) return sanitize(gputest::load_candidate(e), mode, op == "rmsnorm");
  throw std::runtime_error("no corpus entry kernels/" + op + "/corpus/" + entry);
}

const json& tool(const GateResult& g, const std::string& name) {
  for (const json& t : g.evidence["tools"]) {
    if (t["tool"] == name) return t;
  }
  static const json none;
  return none;
}

// On a machine with a usable device (the only place these tests run: gpu_test_main.cpp) the CUDA
// toolkit's compute-sanitizer is part of the gate, so a missing one fails, never skips.
void require_sanitizer() {
  ASSERT_FALSE(sanitizer_path().empty())
      << "compute-sanitizer not found at "
      << (std::getenv("KLOOP_COMPUTE_SANITIZER") ? std::getenv("KLOOP_COMPUTE_SANITIZER")
                                                 : "/usr/local/cuda/bin/compute-sanitizer")
      << " on a machine with a GPU; install the CUDA toolkit's compute-sanitizer or point "
         "KLOOP_COMPUTE_SANITIZER at it";
}

TEST(GpuSanitizerTest, BaselineIsCleanUnderAllFourToolsAndPoisoning) {
  require_sanitizer();
  for (Mode mode : {Mode::kSequential, Mode::kFast}) {
    const GateResult g = sanitize("baseline", mode);
    EXPECT_EQ(g.status, GateStatus::kPass) << mode_name(mode) << ": " << g.reason << "\n"
                                           << g.evidence.dump(1);
    for (auto t : kTools)
      EXPECT_EQ(tool(g, std::string(t))["outcome"], "clean") << mode_name(mode) << " " << t;
    EXPECT_EQ(g.evidence["poison"]["status"], "pass");
    EXPECT_FALSE(g.evidence["tool_version"].get<std::string>().empty());
  }
}

// Each corpus defect of tests/gpu/sanitizer_cases.h that a compute-sanitizer tool must catch:
// rejected, with that tool reporting hazards (the multi-row race of P15 included), in both modes.
class GpuSanitizerCaseTest
    : public testing::TestWithParam<std::tuple<gputest::SanitizerCase, Mode>> {};

TEST_P(GpuSanitizerCaseTest, DefectIsCaughtByItsTool) {
  require_sanitizer();
  const auto [c, mode] = GetParam();
  const GateResult g = sanitize(c, mode);
  EXPECT_EQ(g.status, GateStatus::kFail) << g.reason;
  EXPECT_EQ(tool(g, std::string(c.tool))["outcome"], "hazards") << g.evidence.dump(1);
}

std::vector<gputest::SanitizerCase> tool_cases() {
  std::vector<gputest::SanitizerCase> out;
  for (const auto& c : gputest::kSanitizerCases)
    if (c.tool != "poison") out.push_back(c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, GpuSanitizerCaseTest,
    testing::Combine(testing::ValuesIn(tool_cases()),
                     testing::Values(Mode::kSequential, Mode::kFast)),
    [](const testing::TestParamInfo<std::tuple<gputest::SanitizerCase, Mode>>& info) {
      const gputest::SanitizerCase& c = std::get<0>(info.param);
      return std::string(c.op) + "_" + std::string(c.entry) + "_" +
             mode_name(std::get<1>(info.param));
    });

// Poisoning alone (no compute-sanitizer): the worker's sanitize mode through the real runner.
TEST(GpuPoisonTest, UninitialisedSharedReadIsCaughtByPoisoningAndBaselineIsNot) {
  for (const std::string rel : {"corpus/uninit_shared_read", "baseline"}) {
    const gputest::TreeCandidate c = gputest::load_candidate(gputest::tree(rel));
    GpuRunRequest req;
    req.mode = "sanitize";
    req.cubin = c.cubin;
    req.source = c.source;
    req.manifest = json::parse(c.manifest_text);
    req.options = {{"sanitize", {{"cases", gputest::sanitizer_small_cases()}}}};
    GpuRunOptions opt;
    opt.deadline = std::chrono::milliseconds(60000);
    const GpuRunResult r = run_gpu_worker(req, opt);
    const std::string why = judge_poison(r.result);
    if (rel == "baseline") {
      EXPECT_EQ(why, "") << gputest::describe(r);
    } else {
      EXPECT_NE(why, "") << gputest::describe(r);
    }
  }
}

} // namespace
} // namespace kloop::evaluator::sanitizer
