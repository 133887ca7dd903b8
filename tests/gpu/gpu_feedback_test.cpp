// The feedback of defect-corpus entries judged on the device, for the failure classes whose CPU
// goldens (tests/agent/feedback_golden_test.cpp) come from the CPU emulation of the worker: the
// device's correctness evidence must read without problems and carry the same facts (the failing
// case with its layout, and the class's finding). With KLOOP_RECORD_DIR set, each entry's worker
// result.json and gate are written there (NAME.result.json, NAME.gate.json) to be checked in as
// recorded fixtures, with the commit.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "evaluator/device_gates.h"
#include "feedback/feedback.h"
#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

struct Entry {
  const char* name;
  const char* finding; // what the correctness section must say
};

class GpuFeedbackTest : public testing::TestWithParam<Entry> {};

TEST_P(GpuFeedbackTest, DeviceEvidenceGivesTheFailingCaseAndTheFinding) {
  const Entry e = GetParam();
  const TreeCandidate c = load_candidate(tree(std::string("corpus/") + e.name));
  // As GpuWorkerGates runs the public batch.
  const evaluator::GpuRunResult run =
      run_correctness(&c, {{"suite", "public"}, {"seed", 1}}, std::chrono::milliseconds(120000),
                      {{"stop_at_first_failure", true}});
  ASSERT_EQ(run.status, evaluator::GateStatus::kFail) << describe(run);
  const evaluator::GateResult gate = evaluator::correctness_gate_from(run);
  evaluator::PublicReport report;
  report.gates = {gate};
  report.verdict = evaluator::decide_verdict(report.gates);
  std::string text;
  for (const auto& s : feedback::build_feedback(report).sections)
    if (s.name == "correctness") text = s.text;
  EXPECT_NE(text.find("first failing public case: "), std::string::npos) << text;
  EXPECT_NE(text.find("strides ["), std::string::npos) << text;
  EXPECT_NE(text.find(e.finding), std::string::npos) << text;
  EXPECT_EQ(text.find("could not read"), std::string::npos) << text;
  if (const char* dir = std::getenv("KLOOP_RECORD_DIR"); dir && *dir) {
    std::filesystem::create_directories(dir);
    std::ofstream(std::filesystem::path(dir) / (std::string(e.name) + ".result.json"))
        << run.result.dump(1) << "\n";
    std::ofstream(std::filesystem::path(dir) / (std::string(e.name) + ".gate.json"))
        << nlohmann::json{{"name", gate.name}, {"reason", gate.reason}, {"evidence", gate.evidence}}
               .dump(1)
        << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuFeedbackTest,
                         testing::Values(Entry{"p1_output_never_written", "never written"},
                                         Entry{"p14_writes_into_x", "device storage changed"},
                                         Entry{"p16_no_bound_check", "failed rule: "},
                                         Entry{"p7_assumes_contiguous_rows", "failed rule: "},
                                         Entry{"p9_wrong_tail", "failed rule: "}),
                         [](const auto& info) { return std::string(info.param.name); });

} // namespace
} // namespace kloop::gputest
