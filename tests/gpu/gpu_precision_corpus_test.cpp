// The precision corpus on the device (CASES.md Q1-Q8): every correct kernel of every operator's
// kernels/<op>/precision/ (tests/support/corpus_entries.h) goes through the whole public pipeline
// exactly as `kloop evaluate` runs it on a GPU machine: contract, sandboxed NVRTC build, static
// inspection, then the real device gates (GpuWorkerGates: correctness with the audit,
// compute-sanitizer's four tools and shared-memory poisoning, benchmark, roofline), and must pass
// every one (verdict pass, the exit 0 of `kloop evaluate`). A second check runs the nvcc-built
// cubin of each kernel (tests/gpu/CMakeLists.txt) through the correctness gate, so the corpus is
// correct whichever compiler built it. About 20-30 s per kernel on the H200: shard with
// GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX (or --gtest_filter) to stay under a per-command limit.
#include <filesystem>

#include <gtest/gtest.h>

#include "evaluator/candidate.h"
#include "evaluator/device_gates.h"
#include "evaluator/pipeline.h"
#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

std::string gates_text(const evaluator::Evaluation& ev) {
  std::string s;
  for (const auto& g : ev.report.gates)
    s += g.name + ": " + std::string(evaluator::gate_status_name(g.status)) + " " + g.reason + "\n";
  return s;
}

class GpuPrecisionCorpusTest : public testing::TestWithParam<test_support::CorpusEntry> {};

TEST_P(GpuPrecisionCorpusTest, PassesEveryGateThroughThePipeline) {
  const auto load = evaluator::load_candidate_dir(GetParam().dir.string());
  ASSERT_TRUE(load.candidate) << load.error;
  evaluator::EvaluateOptions eo;
  eo.build.deadline = std::chrono::milliseconds(180000);
  evaluator::GpuGatesOptions go;
  go.pc_sampling = false;   // profiler feedback, not a gate
  go.measured_dram = false; // optional evidence, never decides
  go.bench_time_cap_s = 0.05;
  evaluator::GpuWorkerGates gates(go);
  const evaluator::Evaluation ev = evaluator::evaluate_candidate(*load.candidate, eo, gates);
  std::printf("[precision] %s:\n%s", GetParam().param_name().c_str(), gates_text(ev).c_str());
  for (const auto& g : ev.report.gates)
    EXPECT_EQ(g.status, GateStatus::kPass) << g.name << ": " << g.reason;
  EXPECT_EQ(ev.report.verdict, evaluator::Verdict::kPass) << gates_text(ev);
}

TEST_P(GpuPrecisionCorpusTest, NvccBuildPassesTheCorrectnessGate) {
  const TreeCandidate c = load_candidate(GetParam());
  ASSERT_FALSE(c.cubin.empty()) << "no nvcc-built cubin for " << GetParam().param_name();
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 11}}, std::chrono::seconds(120),
                                 {{"stop_at_first_failure", true}});
  EXPECT_EQ(r.status, GateStatus::kPass) << describe(r);
}

INSTANTIATE_TEST_SUITE_P(Precision, GpuPrecisionCorpusTest,
                         testing::ValuesIn(test_support::corpus_entries("precision")),
                         [](const testing::TestParamInfo<test_support::CorpusEntry>& info) {
                           return info.param.param_name();
                         });

} // namespace
} // namespace kloop::gputest
