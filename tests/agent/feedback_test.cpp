// Unit tests of the feedback builder on producer-made public reports (the CPU emulation of the GPU
// worker, and the H200 recording), its budgets and determinism, malformed evidence, and the
// holdout wall: a holdout result type does not compile into build_feedback, and no holdout shape,
// seed or value reaches any rendered prompt. The golden texts are feedback_golden_test's.
#include <string>

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "evaluator/candidate.h"
#include "feedback/feedback.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/family.h"
#include "prompts/prompt_builder.h"
#include "tests/agent/cpu_device.h"
#include "tests/agent/golden.h"
#include "tests/support/test_files.h"

namespace kloop::feedback {
namespace {

// Stand-in for holdout/'s result type, with distinctive markers that must never reach a prompt.
struct FakeHoldoutResult {
  std::uint64_t seed = 0x5EC12E7D00D1ULL; // 104227224043729
  std::vector<long long> shape = {7919, 31337};
  std::string value = "6.02214076e+23";
  std::string marker = "HOLDOUT_MARKER_Q7";
};
struct DerivedReport : evaluator::PublicReport {};

template <class T>
concept FeedbackAccepts = requires(const T& t) {
  build_feedback(t);
};
static_assert(FeedbackAccepts<evaluator::PublicReport>, "a public report must be accepted");
static_assert(!FeedbackAccepts<FakeHoldoutResult>, "a holdout result must not compile");
static_assert(!FeedbackAccepts<nlohmann::json>, "raw JSON must not compile");
static_assert(!FeedbackAccepts<DerivedReport>, "a type posing as a report must not compile");

const FeedbackSection* section(const FeedbackPayload& p, const std::string& name) {
  for (const auto& s : p.sections)
    if (s.name == name) return &s;
  return nullptr;
}

bool has(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// Producer-made reports: the correctness gate of a defective kernel through the CPU emulation of
// the GPU worker (the stride defect of repair_test: the sliced P7 case fails), and the H200
// recording of the flagship's benchmark, roofline and stall evidence.
evaluator::PublicReport correctness_report() {
  const rmsnorm::Variant v = *rmsnorm::variant_by_name("v16-tauto-b512-c4-shfl-pers-peel");
  return kloop::testing::report_of(
      kloop::testing::cpu_gates(rmsnorm::emit_kernel_source(v), rmsnorm::emit_manifest(v),
                                kloop::testing::packed_rows_kernel, rmsnorm::public_cases(1)));
}

evaluator::PublicReport h200_report() {
  return evaluator::PublicReport::from_json(nlohmann::json::parse(test_support::read_file(
      std::string(KLOOP_SOURCE_DIR) + "/tests/offline/fixtures/h200_flagship_report.json")));
}

TEST(FeedbackBuilder, EverySectionStaysWithinItsBudget) {
  FeedbackOptions opt;
  opt.budgets = {.summary = 120,
                 .format = 80,
                 .contract = 80,
                 .build = 150,
                 .static_inspection = 100,
                 .correctness = 200,
                 .sanitizer = 90,
                 .benchmark = 100,
                 .profile = 60};
  const std::map<std::string, std::size_t> budget = {
      {"summary", 120},     {"format", 80},    {"contract", 80},   {"build", 150}, {"static", 100},
      {"correctness", 200}, {"sanitizer", 90}, {"benchmark", 100}, {"profile", 60}};
  for (const auto& report : {correctness_report(), h200_report()}) {
    const FeedbackPayload p = build_feedback(report, opt);
    ASSERT_FALSE(p.sections.empty());
    for (const auto& s : p.sections)
      EXPECT_LE(s.text.size(), budget.at(s.name)) << s.name;
  }
  const FeedbackPayload p = build_feedback(correctness_report(), opt);
  ASSERT_NE(section(p, "correctness"), nullptr);
  EXPECT_TRUE(section(p, "correctness")->truncated);
  EXPECT_TRUE(has(section(p, "correctness")->text, "bytes cut]"));
  // Most useful first: the cut keeps the failing case's name.
  EXPECT_TRUE(has(section(p, "correctness")->text, "first failing public case: P7"));
}

// Issue 26: the feedback on K candidates of one iteration names each one's sections, shares the
// budgets among them, says pass when one passed, and is build_feedback itself for one candidate.
TEST(FeedbackBuilder, BatchFeedbackCoversEveryCandidateWithinTheSharedBudget) {
  const auto fail = correctness_report();
  const auto pass = h200_report();
  // The second candidate's kernel.cu: the recording's hottest line (kernel.cu:25) is quoted from
  // it.
  std::string source;
  for (int line = 1; line <= 200; ++line)
    source +=
        line == 25 ? "  float v = x[threadIdx.x];\n" : "// line " + std::to_string(line) + "\n";
  const FeedbackPayload p = build_batch_feedback({{&fail, ""}, {&pass, source}});
  EXPECT_EQ(p.verdict, "pass");
  ASSERT_NE(section(p, "candidate 1 of 2: correctness"), nullptr);
  ASSERT_NE(section(p, "candidate 2 of 2: benchmark"), nullptr);
  const FeedbackSection* prof = section(p, "candidate 2 of 2: profile");
  ASSERT_NE(prof, nullptr);
  EXPECT_TRUE(has(prof->text, "`float v = x[threadIdx.x];`")) << "its own source is quoted";
  const FeedbackBudgets whole;
  for (const auto& s : p.sections)
    EXPECT_LE(s.text.size(), std::max(kMinBatchSectionBytes, whole.correctness / 2)) << s.name;
  EXPECT_EQ(build_batch_feedback({{&fail, ""}}).to_json(), build_feedback(fail).to_json());
  EXPECT_EQ(build_batch_feedback({{&fail, ""}, {&fail, ""}}).verdict, build_feedback(fail).verdict);
}

TEST(FeedbackBuilder, PayloadIsDeterministic) {
  const auto report = h200_report();
  EXPECT_EQ(build_feedback(report).to_json().dump(), build_feedback(report).to_json().dump());
}

TEST(FeedbackBuilder, MalformedEvidenceIsNamedNotFatal) {
  evaluator::PublicReport r;
  r.gates = {
      {"build", evaluator::GateStatus::kFail, "compile failed", nlohmann::json::array({1, 2})},
      {"static", evaluator::GateStatus::kPass, "", {{"resources", "oops"}, {"findings", 3}}},
      {"correctness",
       evaluator::GateStatus::kFail,
       "bad",
       {{"suite", {{"failed", "one"}, {"first_failure", {{"spec", 5}, {"comparison", "x"}}}}}}},
      {"sanitizer", evaluator::GateStatus::kFail, "", {{"tools", {{{"hazards", {1}}}}}}},
      {"benchmark", evaluator::GateStatus::kPass, "", {{"shapes", {{{"states", 1}}}}}},
      {"roofline", evaluator::GateStatus::kFail, "implausible", nlohmann::json(nullptr)}};
  FeedbackPayload p;
  ASSERT_NO_THROW(p = build_feedback(r));
  ASSERT_NE(section(p, "build"), nullptr);
  EXPECT_TRUE(has(section(p, "build")->text, "compile failed"));
  EXPECT_TRUE(has(section(p, "build")->text, "kloop could not read part of this gate's evidence"));
  EXPECT_TRUE(has(section(p, "correctness")->text, "suite.failed: expected an integer, got string"))
      << section(p, "correctness")->text;
  EXPECT_TRUE(has(section(p, "correctness")->text, "suite.first_failure.spec"));
  EXPECT_TRUE(has(section(p, "benchmark")->text, "roofline: implausible"));
}

TEST(FeedbackHelpers, FitToBudgetCutsAtUtf8Boundary) {
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += "\xc3\xa9"; // 'é' x100, no newlines
  bool cut = false;
  const std::string out = fit_to_budget(text, 80, &cut);
  EXPECT_TRUE(cut);
  EXPECT_LE(out.size(), 80u);
  const std::string body = out.substr(0, out.find("[..."));
  EXPECT_EQ(body.size() % 2, 0u);
  EXPECT_EQ(fit_to_budget("short", 80), "short");
}

TEST(FeedbackHelpers, RedactsAbsolutePathsButNotCodeOrComments) {
  EXPECT_EQ(redact_host_paths("see /usr/local/cuda/include/x.h here"), "see <path> here");
  EXPECT_EQ(redact_host_paths("a / b; // comment; c/d/e"), "a / b; // comment; c/d/e");
}

TEST(HoldoutWall, NoHoldoutShapeSeedOrValueAppearsInAnyRenderedPrompt) {
  const FakeHoldoutResult holdout;
  const std::vector<std::string> markers = {std::to_string(holdout.seed),
                                            "5EC12E7D00D1",
                                            "5ec12e7d00d1",
                                            std::to_string(holdout.shape[0]),
                                            std::to_string(holdout.shape[1]),
                                            holdout.value,
                                            holdout.marker};
  const prompts::PromptBuilder builder(rmsnorm::contract_json());
  std::vector<std::string> rendered = {builder.system_prompt(), builder.contract_prompt()};
  for (const auto& report : {correctness_report(), h200_report()})
    rendered.push_back(builder.feedback_prompt(build_feedback(report), 2, 3));
  // Public case shapes do flow into the feedback prompt, so the absence below is meaningful.
  EXPECT_TRUE(has(rendered[2], "shape [4, 16, 128]")) << rendered[2];
  for (const auto& text : rendered) {
    ASSERT_FALSE(text.empty());
    for (const auto& m : markers)
      EXPECT_FALSE(has(text, m)) << "marker " << m << " leaked";
  }
}

} // namespace
} // namespace kloop::feedback
