// GPU tier of the sanitizer gate: the real worker in "sanitize" mode under the real
// compute-sanitizer (memcheck, racecheck, initcheck, synccheck) and the shared-memory poisoning
// method, on the defect corpus and on the in-tree baseline (kernels/rmsnorm/corpus, baseline).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "evaluator/gpu_runner.h"
#include "evaluator/sanitizer.h"
#include "evaluator/subprocess.h"
#include "tests/gpu/gpu_test_support.h"

namespace kloop::evaluator::sanitizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Small representative cases: tails around a 256-thread tile, all dtypes, a strided view.
json small_cases() {
  return json::array({{{"dtype", "float32"}, {"rows", 3}, {"h", 257}, {"x_row_stride", 257}},
                      {{"dtype", "float16"}, {"rows", 2}, {"h", 1009}, {"x_row_stride", 1009}},
                      {{"dtype", "bfloat16"}, {"rows", 3}, {"h", 129}, {"x_row_stride", 129}},
                      {{"dtype", "bfloat16"}, {"rows", 4}, {"h", 1000}, {"x_row_stride", 1032}}});
}

std::string sanitizer_path() {
  const char* env = std::getenv("KLOOP_COMPUTE_SANITIZER");
  const std::string p = env ? env : "/usr/local/cuda/bin/compute-sanitizer";
  return ::access(p.c_str(), X_OK) == 0 ? p : std::string();
}

// Writes the request folder of `rel` (corpus/<name> or baseline) and runs the whole gate.
GateResult sanitize(const std::string& rel) {
  const gputest::TreeCandidate c = gputest::load_candidate(gputest::tree(rel));
  const fs::path dir =
      fs::temp_directory_path() / ("kloop-sanitize-" + c.name + "-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.cubin", std::ios::binary) << c.cubin;
  std::ofstream(dir / "kernel.cu") << c.source;
  const json req{{"mode", "sanitize"},
                 {"cubin", "kernel.cubin"},
                 {"source", "kernel.cu"},
                 {"manifest", json::parse(c.manifest_text)},
                 {"sanitize", {{"cases", small_cases()}}}};
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
  std::map<std::string, std::string> reports;
  GateResult g = run_gate(cfg, run_subprocess, &reports);
  fs::remove_all(dir);
  return g;
}

const json& tool(const GateResult& g, const std::string& name) {
  for (const json& t : g.evidence["tools"]) {
    if (t["tool"] == name) return t;
  }
  static const json none;
  return none;
}

class GpuSanitizerTest : public testing::Test {
protected:
  void SetUp() override {
    if (sanitizer_path().empty()) GTEST_SKIP() << "compute-sanitizer not installed";
  }
};

TEST_F(GpuSanitizerTest, BaselineIsCleanUnderAllFourToolsAndPoisoning) {
  const GateResult g = sanitize("baseline");
  EXPECT_EQ(g.status, GateStatus::kPass) << g.reason << "\n" << g.evidence.dump(1);
  for (auto t : kTools)
    EXPECT_EQ(tool(g, std::string(t))["outcome"], "clean") << t;
  EXPECT_EQ(g.evidence["poison"]["status"], "pass");
  EXPECT_FALSE(g.evidence["tool_version"].get<std::string>().empty());
}

TEST_F(GpuSanitizerTest, MissingBarrierIsCaughtByRacecheck) {
  const GateResult g = sanitize("corpus/seed_missing_barrier");
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_EQ(tool(g, "racecheck")["outcome"], "hazards") << g.evidence.dump(1);
}

TEST_F(GpuSanitizerTest, SharedIndexPastAllocationIsCaughtByMemcheck) {
  const GateResult g = sanitize("corpus/seed_smem_index_oob");
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_EQ(tool(g, "memcheck")["outcome"], "hazards") << g.evidence.dump(1);
}

TEST_F(GpuSanitizerTest, UninitialisedGlobalReadIsCaughtByInitcheck) {
  const GateResult g = sanitize("corpus/uninit_global_read");
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_EQ(tool(g, "initcheck")["outcome"], "hazards") << g.evidence.dump(1);
}

TEST_F(GpuSanitizerTest, BarrierInDivergentBranchIsCaughtBySynccheck) {
  const GateResult g = sanitize("corpus/divergent_barrier");
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_EQ(tool(g, "synccheck")["outcome"], "hazards") << g.evidence.dump(1);
}

// Poisoning alone (no compute-sanitizer): the worker's sanitize mode through the real runner.
TEST(GpuPoisonTest, UninitialisedSharedReadIsCaughtByPoisoningAndBaselineIsNot) {
  for (const std::string rel : {"corpus/uninit_shared_read", "baseline"}) {
    const gputest::TreeCandidate c = gputest::load_candidate(gputest::tree(rel));
    GpuRunRequest req;
    req.mode = "sanitize";
    req.cubin = c.cubin;
    req.source = c.source;
    req.manifest = json::parse(c.manifest_text);
    req.options = {{"sanitize", {{"cases", small_cases()}}}};
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
