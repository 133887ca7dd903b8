// Precision and recall on the CPU gates, with the real pipeline, for every registered operator
// (kernels/registry.h) that has corpora: every candidate of its precision corpus
// (kernels/<op>/precision/, correct kernels in everyday idioms) and of its defect corpus
// (kernels/<op>/corpus/) goes through evaluate_candidate with the real build worker in the real
// sandbox and NoDeviceGates. Every precision kernel passes contract, build and static (verdict
// pending_device_validation, `kloop evaluate` exit 3); every defect whose expect.json names a CPU
// gate is rejected by that gate for its own defect (expect.json "finding": the static finding
// kind or the contract error field), and every other defect passes the CPU gates, so that it
// reaches the device gate that must reject it. The device half is tests/gpu/gpu_corpus_test.cpp
// and tests/gpu/gpu_precision_corpus_test.cpp. Test names are <op folder>_<kernel folder>.
//
// Builds run two at a time (NVRTC costs 1-8 s of CPU per candidate) in the suite's set-up; each
// test then checks one candidate's recorded evaluation.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "evaluator/build.h"
#include "evaluator/pipeline.h"
#include "evaluator/subprocess.h"
#include "tests/support/corpus_entries.h"
#include "tests/support/sandbox_check.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;
const fs::path kKernels = fs::path(KLOOP_SOURCE_DIR) / "kernels";

using Entry = test_support::CorpusEntry;
using test_support::corpus_entries;

std::string key(const Entry& e) {
  return e.op + "/" + e.corpus + "/" + e.name;
}

// Every evaluation of the run, made once by the first test that needs one.
class Evaluations {
public:
  static const Evaluation& of(const Entry& e) {
    static Evaluations all;
    return all.results_.at(key(e));
  }

private:
  Evaluations() {
    std::vector<Entry> todo = corpus_entries("precision");
    for (auto& e : corpus_entries("corpus"))
      todo.push_back(std::move(e));
    EvaluateOptions options;
    // The gates' precision is under test here, not the deadline: a loaded 2-core CI machine must
    // not turn a slow cub build into a timeout.
    options.build.deadline = std::chrono::milliseconds(180000);
    std::atomic<std::size_t> next{0};
    std::mutex m;
    auto work = [&] {
      for (std::size_t i; (i = next++) < todo.size();) {
        const auto load = load_candidate_dir(todo[i].dir.string());
        if (!load.candidate) throw std::runtime_error(load.error);
        NoDeviceGates device("no device in this test");
        Evaluation ev = evaluate_candidate(*load.candidate, options, device);
        std::lock_guard lock(m);
        results_.emplace(key(todo[i]), std::move(ev));
      }
    };
    std::thread a(work), b(work);
    a.join();
    b.join();
  }
  std::map<std::string, Evaluation> results_;
};

// A test that builds: skips where the toolkit or any sandbox is missing (a sandbox that cannot
// start where bubblewrap is installed fails instead; tests/support/sandbox_check.h).
template <typename Base> class NeedsBuilds : public Base {
protected:
  void SetUp() override {
    if (!fs::exists("/usr/local/cuda/include/cuda_fp16.h"))
      GTEST_SKIP() << "CUDA toolkit not installed at /usr/local/cuda";
    KLOOP_REQUIRE_SANDBOX_OR_SKIP();
  }
};

std::string gates_text(const Evaluation& ev) {
  std::string s;
  for (const auto& g : ev.report.gates)
    s += g.name + ": " + std::string(gate_status_name(g.status)) + " " + g.reason + "\n";
  return s;
}

class PrecisionCorpusTest : public NeedsBuilds<testing::TestWithParam<Entry>> {};

TEST_P(PrecisionCorpusTest, PassesEveryCpuGate) {
  const Entry& e = GetParam();
  ASSERT_EQ(e.expect.at("verdict"), "pass") << "a precision kernel must be expected to pass";
  const Evaluation& ev = Evaluations::of(e);
  for (auto gate : {kGateContract, kGateBuild, kGateStatic})
    EXPECT_EQ(ev.report.find(gate)->status, GateStatus::kPass) << gates_text(ev);
  for (auto gate : {kGateCorrectness, kGateSanitizer, kGateBenchmark, kGateRoofline})
    EXPECT_EQ(ev.report.find(gate)->status, GateStatus::kNotRun) << gates_text(ev);
  EXPECT_EQ(ev.report.verdict, Verdict::kPendingDeviceValidation) << gates_text(ev);
}

class DefectCorpusTest : public NeedsBuilds<testing::TestWithParam<Entry>> {};

// The finding of a failed CPU gate that names the defect: the contract error fields, or the
// static finding kinds.
std::vector<std::string> findings_of(const GateResult& g) {
  std::vector<std::string> out;
  if (g.name == kGateContract)
    for (const auto& e : g.evidence.value("errors", nlohmann::json::array()))
      out.push_back(e.value("field", ""));
  if (g.name == kGateStatic)
    for (const auto& f : g.evidence.value("findings", nlohmann::json::array()))
      out.push_back(f.value("kind", ""));
  return out;
}

TEST_P(DefectCorpusTest, CpuGateRejectsItsOwnDefectOrPassesItOn) {
  const Entry& e = GetParam();
  const Evaluation& ev = Evaluations::of(e);
  const std::string want = e.expect.at("gate");
  const bool cpu_gate = want == kGateContract || want == kGateBuild || want == kGateStatic;
  if (!cpu_gate) {
    // Rejected (or passed) only on the device: every CPU gate must let it through.
    for (auto gate : {kGateContract, kGateBuild, kGateStatic})
      EXPECT_EQ(ev.report.find(gate)->status, GateStatus::kPass) << gates_text(ev);
    EXPECT_EQ(ev.report.verdict, Verdict::kPendingDeviceValidation) << gates_text(ev);
    return;
  }
  EXPECT_EQ(e.expect.at("verdict"), "reject");
  for (auto gate : {kGateContract, kGateBuild, kGateStatic}) {
    const GateResult* g = ev.report.find(gate);
    if (gate != want) {
      EXPECT_EQ(g->status, GateStatus::kPass) << gate << " before " << want << "\n"
                                              << gates_text(ev);
      continue;
    }
    ASSERT_EQ(g->status, GateStatus::kFail) << gates_text(ev);
    ASSERT_TRUE(e.expect.contains("finding")) << "expect.json names no finding for " << e.name;
    const auto found = findings_of(*g);
    ASSERT_FALSE(found.empty()) << g->evidence.dump();
    // Its own defect, first: not an unrelated finding that happens to come from the same gate.
    EXPECT_EQ(found.front(), e.expect.at("finding").get<std::string>()) << g->reason;
    break;
  }
  EXPECT_EQ(ev.report.verdict, Verdict::kReject) << gates_text(ev);
}

std::string param_name(const testing::TestParamInfo<Entry>& info) {
  return info.param.param_name();
}

INSTANTIATE_TEST_SUITE_P(Precision, PrecisionCorpusTest,
                         testing::ValuesIn(corpus_entries("precision")), param_name);
INSTANTIATE_TEST_SUITE_P(Defects, DefectCorpusTest, testing::ValuesIn(corpus_entries("corpus")),
                         param_name);

// The corpora's sizes: RMSNorm's precision corpus of issue 21 and softmax's corpora of issue 25.
TEST(PrecisionCorpusSizeTest, EachOperatorHasItsCorpora) {
  EXPECT_GE(corpus_entries("precision", "rmsnorm").size(), 25u);
  EXPECT_GE(corpus_entries("precision", "softmax").size(), 10u);
  EXPECT_GE(corpus_entries("corpus", "rmsnorm").size(), 28u);
  EXPECT_GE(corpus_entries("corpus", "softmax").size(), 12u);
}

// The CLI's exit code for such a verdict: `kloop evaluate` exits 3 (pending_device_validation),
// for a precision kernel of each operator.
class PrecisionCorpusCliTest : public NeedsBuilds<testing::TestWithParam<std::string>> {};

TEST_P(PrecisionCorpusCliTest, KloopEvaluateExits3OnAPrecisionKernel) {
  const std::string kloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";
  ASSERT_TRUE(fs::exists(kloop)) << "the test target depends on kloop: " << kloop;
  const std::string op = GetParam().substr(0, GetParam().find('/'));
  SubprocessOptions o;
  o.deadline = std::chrono::milliseconds(200000);
  const ToolCall call = run_subprocess({kloop, "evaluate", op, "--candidate",
                                        (kKernels / GetParam()).string(), "--build-timeout", "180"},
                                       o);
  EXPECT_EQ(call.exit_code, 3) << call.stdout_text << call.stderr_text;
}

INSTANTIATE_TEST_SUITE_P(Operators, PrecisionCorpusCliTest,
                         testing::Values("rmsnorm/precision/macro_entries",
                                         "softmax/precision/macro_entries_online"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.find('/'));
                         });

} // namespace
} // namespace kloop::evaluator
