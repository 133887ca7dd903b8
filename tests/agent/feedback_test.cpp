// Unit tests of the feedback builder on recorded public reports (fixtures/), its budgets and
// determinism, and the holdout wall: a holdout result type does not compile into build_feedback,
// and no holdout shape, seed or value reaches any rendered prompt.
#include <string>

#include <gtest/gtest.h>

#include "feedback/feedback.h"
#include "kernels/rmsnorm/contract.h"
#include "prompts/prompt_builder.h"
#include "tests/agent/report_json.h"

namespace kloop::feedback {
namespace {

using kloop::testing::load_report;

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

const std::string kKernel = "#include <cuda_bf16.h>\n"                               // 1
                            "extern \"C\" __global__ void rms_f32(const float* x,\n" // 2
                            "    const float* w, float* y, long long rows, int H,\n" // 3
                            "    long long xs, long long ys, float eps) {\n"         // 4
                            "  float v = x[threadIdx.x];\n"                          // 5
                            "  red[threadIdx.x] = v * v;\n"                          // 6
                            "  // missing __syncthreads()\n"                         // 7
                            "  float s = red[0] + red[1];\n"                         // 8
                            "}\n";

TEST(FeedbackBuilder, BuildFailureShowsFirstErrorsWithLinesAndHostPathsRedacted) {
  const FeedbackPayload p = build_feedback(load_report("report_build_fail.json"));
  EXPECT_EQ(p.verdict, "reject");
  const FeedbackSection* b = section(p, "build");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(has(b->text, "kernel.cu(14): error: identifier \"rsqrtff\" is undefined"));
  EXPECT_TRUE(has(b->text, "kernel.cu(31)"));
  EXPECT_TRUE(has(b->text, "kernel.cu(2):"));
  const std::string all = p.render();
  EXPECT_FALSE(has(all, "/tmp/kloop-build")) << all;
  EXPECT_FALSE(has(all, "/home/alice")) << all;
  EXPECT_TRUE(has(all, "<path>/kernel.cu(40)"));
  ASSERT_NE(section(p, "summary"), nullptr);
  EXPECT_TRUE(has(section(p, "summary")->text, "- static: not_run - build failed"));
}

TEST(FeedbackBuilder, RuntimeFailureShowsResourcesCasesAndSanitizerLines) {
  FeedbackOptions opt;
  opt.kernel_source = kKernel;
  const FeedbackPayload p = build_feedback(load_report("report_runtime_fail.json"), opt);
  const FeedbackSection* st = section(p, "static");
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(has(st->text, "rms_f32: 168 registers, spill stores 16 B, spill loads 16 B"));
  EXPECT_TRUE(has(st->text, "rms_f32: local-memory loads 2"));
  const FeedbackSection* c = section(p, "correctness");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(has(c->text, "41 passed, 2 failed"));
  EXPECT_TRUE(has(c->text, "family tail_widths dtype bfloat16 shape [3, 129]"));
  EXPECT_TRUE(has(c->text, "max abs err 0.75"));
  EXPECT_TRUE(has(c->text, "shape [4, 16, 128] layout sliced"));
  EXPECT_FALSE(has(c->text, "contiguous_4096")); // passing cases are not listed
  EXPECT_FALSE(has(p.render(), "9001"));         // case seeds are never shown
  const FeedbackSection* s = section(p, "sanitizer");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(has(s->text, "race_write_read in rms_f32"));
  EXPECT_TRUE(has(s->text, "kernel.cu:6 `red[threadIdx.x] = v * v;`"));
  EXPECT_TRUE(has(s->text, "kernel.cu:8 `float s = red[0] + red[1];`"));
  EXPECT_TRUE(has(s->text, "memcheck: clean"));
}

TEST(FeedbackBuilder, BenchmarkRooflineAndStallHistogram) {
  FeedbackOptions opt;
  opt.kernel_source = kKernel;
  const FeedbackPayload p = build_feedback(load_report("report_pass_bench.json"), opt);
  const FeedbackSection* b = section(p, "benchmark");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(has(b->text, "geomean speedup 1.13"));
  EXPECT_TRUE(has(b->text, "bfloat16 [4096, 4096] cold: candidate 0.0241 ms, baseline 0.0302 ms"));
  EXPECT_TRUE(has(b->text, "roofline dram: median 0.71 of the copy ceiling"));
  const FeedbackSection* prof = section(p, "profile");
  ASSERT_NE(prof, nullptr);
  EXPECT_TRUE(has(prof->text, "long_scoreboard 62%; barrier 25%; selected 13%"));
  EXPECT_TRUE(
      has(prof->text, "kernel.cu:5 long_scoreboard (410 samples) `float v = x[threadIdx.x];`"));
}

TEST(FeedbackBuilder, EverySectionStaysWithinItsBudget) {
  FeedbackOptions opt;
  opt.budgets = {.summary = 120,
                 .build = 150,
                 .static_inspection = 100,
                 .correctness = 200,
                 .sanitizer = 90,
                 .benchmark = 100,
                 .profile = 60};
  for (const char* f :
       {"report_build_fail.json", "report_runtime_fail.json", "report_pass_bench.json"}) {
    const FeedbackPayload p = build_feedback(load_report(f), opt);
    for (const auto& s : p.sections) {
      const std::size_t budget = s.name == "summary"       ? 120
                                 : s.name == "build"       ? 150
                                 : s.name == "static"      ? 100
                                 : s.name == "correctness" ? 200
                                 : s.name == "sanitizer"   ? 90
                                 : s.name == "benchmark"   ? 100
                                                           : 60;
      EXPECT_LE(s.text.size(), budget) << f << " " << s.name;
    }
  }
  const FeedbackPayload p = build_feedback(load_report("report_runtime_fail.json"), opt);
  ASSERT_NE(section(p, "correctness"), nullptr);
  EXPECT_TRUE(section(p, "correctness")->truncated);
  EXPECT_TRUE(has(section(p, "correctness")->text, "bytes cut]"));
}

// Issue 26: the feedback on K candidates of one iteration names each one's sections, shares the
// budgets among them, says pass when one passed, and is build_feedback itself for one candidate.
TEST(FeedbackBuilder, BatchFeedbackCoversEveryCandidateWithinTheSharedBudget) {
  const auto fail = load_report("report_runtime_fail.json");
  const auto pass = load_report("report_pass_bench.json");
  const FeedbackPayload p = build_batch_feedback({{&fail, ""}, {&pass, kKernel}});
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
  const auto report = load_report("report_runtime_fail.json");
  EXPECT_EQ(build_feedback(report).to_json().dump(), build_feedback(report).to_json().dump());
}

TEST(FeedbackBuilder, MalformedEvidenceIsSkippedNotFatal) {
  evaluator::PublicReport r;
  r.gates = {
      {"build", evaluator::GateStatus::kFail, "compile failed", nlohmann::json::array({1, 2})},
      {"static", evaluator::GateStatus::kPass, "", {{"resources", "oops"}, {"findings", 3}}},
      {"correctness",
       evaluator::GateStatus::kFail,
       "bad",
       {{"cases", {{{"pass", false}, {"case_spec", 5}, {"comparison", "x"}}}}}},
      {"sanitizer", evaluator::GateStatus::kFail, "", {{"tools", {{{"hazards", {1}}}}}}},
      {"benchmark", evaluator::GateStatus::kPass, "", {{"shapes", {{{"states", 1}}}}}},
      {"roofline", evaluator::GateStatus::kFail, "implausible", nlohmann::json(nullptr)}};
  FeedbackPayload p;
  ASSERT_NO_THROW(p = build_feedback(r));
  ASSERT_NE(section(p, "build"), nullptr);
  EXPECT_TRUE(has(section(p, "build")->text, "compile failed"));
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
  for (const char* f :
       {"report_build_fail.json", "report_runtime_fail.json", "report_pass_bench.json"}) {
    FeedbackOptions opt;
    opt.kernel_source = kKernel;
    rendered.push_back(builder.feedback_prompt(build_feedback(load_report(f), opt), 2, 3));
  }
  // Public case shapes do flow into the feedback prompt, so the absence below is meaningful.
  EXPECT_TRUE(has(rendered[3], "shape [3, 129]"));
  for (const auto& text : rendered) {
    ASSERT_FALSE(text.empty());
    for (const auto& m : markers)
      EXPECT_FALSE(has(text, m)) << "marker " << m << " leaked";
  }
}

} // namespace
} // namespace kloop::feedback
