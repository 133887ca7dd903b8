// Golden feedback texts, one per gate failure class (tests/agent/golden/), each rendered from
// evidence made by the producer's own code: the reply parser, the contract gate, the build gate's
// include pre-scan, the correctness core through the CPU emulation of the GPU worker
// (cpu_device.h), the sanitizer gate's judge on compute-sanitizer reports, and the benchmark,
// roofline and CUPTI evidence recorded from a real H200 run. The NVRTC build error and the static
// PTX finding need the compiler: feedback_build_golden_test (integration tier).
#include <gtest/gtest.h>

#include "agent/reply_parser.h"
#include "evaluator/build.h"
#include "evaluator/candidate.h"
#include "evaluator/pipeline.h"
#include "evaluator/sanitizer.h"
#include "feedback/feedback.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/operator.h"
#include "kernels/rmsnorm/reference.h"
#include "store/hash.h"
#include "tests/agent/cpu_device.h"
#include "tests/agent/golden.h"
#include "tests/support/test_files.h"

namespace kloop::testing {
namespace {

using evaluator::GateResult;
using evaluator::GateStatus;

const std::string kManifest = std::string(
    rmsnorm::emit_manifest(*rmsnorm::variant_by_name("v16-tauto-b512-c4-shfl-pers-peel")));
const std::string kSource = std::string(
    rmsnorm::emit_kernel_source(*rmsnorm::variant_by_name("v16-tauto-b512-c4-shfl-pers-peel")));

std::string reply_with(const std::string& source, const std::string& manifest) {
  return "Here is the revised kernel.\n\n```cuda\n" + source + "```\n\n```json\n" + manifest +
         "\n```\n";
}

// What the loop does with one reply: parse it (the format gate), then the public gates, the format
// gate first.
evaluator::PublicReport loop_report(const std::string& reply, const CpuKernel& kernel) {
  const agent::ParsedReply parsed = agent::parse_reply(reply);
  std::vector<GateResult> gates{agent::format_gate_result(parsed, reply.size())};
  if (parsed.ok) {
    for (auto& g :
         cpu_gates(parsed.kernel_source, parsed.manifest_text, kernel, rmsnorm::public_cases(1)))
      gates.push_back(std::move(g));
  }
  return report_of(std::move(gates));
}

std::string render(const evaluator::PublicReport& report, const std::string& source = "") {
  feedback::FeedbackOptions o;
  o.kernel_source = source;
  return feedback::build_feedback(report, o).render();
}

// ---- C++ stand-ins of defective kernels (each a defect class of ../shared/docs/CASES.md) ----

std::int64_t rows_of(const HostTensor& y) {
  return y.shape()[0];
}
std::int64_t width_of(const HostTensor& y) {
  return y.shape()[1];
}

// Vectorised by 8 with a tail that reads the weight 8 lanes back (w[j - 8]).
void tail_weight_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y) {
  reference_kernel(x, w, eps, y);
  const std::int64_t h = width_of(y), body = h / 8 * 8;
  if (h % 8 == 0 || h < 8) return;
  const HostTensor r = rmsnorm::reference_compute(x, w, eps);
  for (std::int64_t row = 0; row < rows_of(y); ++row)
    for (std::int64_t j = body; j < h; ++j) {
      const float wj = w.get(j), wk = w.get(j - 8);
      y.set(row * h + j, wj == 0 ? 0.0f : r.get(row * h + j) / wj * wk);
    }
}

// Leaves the last column of every row unwritten.
void last_column_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y) {
  const HostTensor r = rmsnorm::reference_compute(x, w, eps);
  const std::int64_t h = width_of(y);
  for (std::int64_t i = 0; i < r.numel(); ++i)
    if (i % h != h - 1 || h == 1) y.set(i, r.get(i));
}

// Writes one element past the end of y.
void overrun_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y) {
  reference_kernel(x, w, eps, y);
  const std::int64_t n = y.numel();
  y.as_strided({n + 1}, {1}, y.offset()).set(n, 0.0f);
}

// Uses x's first element as scratch space.
void scratch_in_x_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y) {
  reference_kernel(x, w, eps, y);
  HostTensor scratch = x;
  scratch.set(0, 0.0f);
}

TEST(FeedbackGolden, ManifestErrorNamesTheFieldAndTheFix) {
  nlohmann::json m = nlohmann::json::parse(kManifest);
  m["launch"]["block_threads"] = 2000;
  const std::string reply = reply_with(kSource, m.dump(2));
  const auto report = loop_report(reply, reference_kernel);
  ASSERT_EQ(report.find("contract")->status, GateStatus::kFail);
  const std::string text = render(report);
  EXPECT_NE(text.find("manifest.json launch.block_threads"), std::string::npos) << text;
  expect_golden("contract_manifest_error", text);
}

TEST(FeedbackGolden, IncludeEscapePrintsEachRejectedLine) {
  // The build gate's pre-scan runs before any compiler or sandbox, so this needs no NVRTC.
  const std::string source = "#include <cuda_bf16.h>\n#include \"/etc/passwd\"\n"
                             "#include \"../holdout/suite.h\"\n" +
                             kSource;
  const auto parsed = op::parse_manifest(rmsnorm::declaration(), kManifest);
  ASSERT_TRUE(parsed.manifest);
  evaluator::BuildOptions bo;
  const evaluator::BuildResult b = evaluator::build_candidate(source, *parsed.manifest, bo);
  ASSERT_EQ(b.gate.status, GateStatus::kFail);
  const auto report =
      report_of({gate("format", GateStatus::kPass), gate("contract", GateStatus::kPass), b.gate,
                 gate("static", GateStatus::kNotRun, "build gate did not pass")});
  const std::string text = render(report);
  // The rejected path is the model's own text, but absolute paths never reach a prompt.
  EXPECT_NE(text.find("kernel.cu line 2: #include \"<path>\" rejected"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel.cu line 3:"), std::string::npos) << text;
  expect_golden("build_include_escape", text);
}

TEST(FeedbackGolden, ToleranceFailureShowsTheCaseElementUlpsAndTolerance) {
  const auto report = loop_report(reply_with(kSource, kManifest), tail_weight_kernel);
  const std::string text = render(report);
  // dtype, outer shape, H, layout with strides and offset, values, eps, index, expected/actual,
  // ULPs and the tolerance.
  for (const char* fact :
       {"x: float16, outer shape [7], H 769, layout contiguous", "strides [769, 1]",
        "storage offset 0", "values: normal", "eps ", "worst element: flat index", "expected ",
        "actual ", "ULP of float16", "tolerance atol"})
    EXPECT_NE(text.find(fact), std::string::npos) << fact << "\n" << text;
  expect_golden("correctness_tolerance", text);
}

TEST(FeedbackGolden, StridedLayoutFailureShowsStridesAndTheNonFiniteElement) {
  const std::string text = render(loop_report(reply_with(kSource, kManifest), packed_rows_kernel));
  EXPECT_NE(text.find("layout sliced_gaps: shape [4, 16, 128], strides [6144, 128, 1]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("first non-finite mismatch at flat index"), std::string::npos) << text;
  expect_golden("correctness_strided_nonfinite", text);
}

TEST(FeedbackGolden, InputMutationIsNamed) {
  const std::string text = render(loop_report(reply_with(kSource, kManifest), scratch_in_x_kernel));
  EXPECT_NE(text.find("x's device storage changed during the call"), std::string::npos) << text;
  expect_golden("correctness_input_mutation", text);
}

TEST(FeedbackGolden, UnwrittenOutputIsNamed) {
  const std::string text = render(loop_report(reply_with(kSource, kManifest), last_column_kernel));
  EXPECT_NE(text.find("output elements were never written"), std::string::npos) << text;
  expect_golden("correctness_unwritten_output", text);
}

TEST(FeedbackGolden, GuardOverwriteIsNamed) {
  const std::string text = render(loop_report(reply_with(kSource, kManifest), overrun_kernel));
  EXPECT_NE(text.find("guard bytes after y were overwritten"), std::string::npos) << text;
  expect_golden("correctness_guard_overwrite", text);
}

TEST(FeedbackGolden, AliasedOutputIsNamed) {
  // An in-process CPU callable that returns its input: the core's own aliasing audit.
  const WorkerFiles files = cpu_callable_result(
      [](const HostTensor& x, const HostTensor&, float) { return x; }, rmsnorm::public_cases(1));
  const auto report =
      report_of({gate("format", GateStatus::kPass), gate("contract", GateStatus::kPass),
                 gate_from_worker_result(files)});
  const std::string text = render(report);
  EXPECT_NE(text.find("output aliases input x"), std::string::npos) << text;
  expect_golden("correctness_aliasing", text);
}

TEST(FeedbackGolden, SanitizerHazardsShowToolKindLineAndAccess) {
  const std::string dir = std::string(KLOOP_SOURCE_DIR) + "/tests/perf/fixtures/";
  // The sanitize worker's result as bench_sanitize.cpp writes it: poisoning clean.
  const nlohmann::json worker = {
      {"status", "pass"},
      {"poison",
       {{"patterns", {"0xffffffff", "0x42424242"}},
        {"cases", {{{"case", "P9-7x769-float16"}, {"identical", true}, {"correct", true}}}}}}};
  std::vector<evaluator::sanitizer::ToolRun> runs;
  for (const auto& [tool, file] : std::vector<std::pair<std::string, std::string>>{
           {"memcheck", "memcheck_oob.txt"},
           {"racecheck", "racecheck_missing_barrier.txt"},
           {"initcheck", "clean.txt"},
           {"synccheck", "clean.txt"}}) {
    const std::string text = test_support::read_file(dir + file);
    evaluator::ToolCall call;
    call.argv = evaluator::sanitizer::tool_command("compute-sanitizer", tool, "log", {"worker"});
    call.exit_code = text.find("ERROR SUMMARY: 0") != std::string::npos
                         ? 0
                         : evaluator::sanitizer::kErrorExitCode;
    runs.push_back(evaluator::sanitizer::judge_tool_run(tool, call, text, worker));
  }
  const GateResult san = evaluator::sanitizer::gate_from_runs(runs, "2025.3.1.0", worker);
  const auto report = report_of({gate("correctness", GateStatus::kPass), san});
  // The source lines the reports point at (42 and 30/35), as the candidate's kernel.cu holds them.
  std::string source;
  for (int i = 1; i <= 45; ++i)
    source += i == 42   ? "  y[i] = __float2bfloat16(v * inv * w[i]);\n"
              : i == 30 ? "  red[threadIdx.x] = partial;\n"
              : i == 35 ? "  float total = red[0] + red[1];\n"
                        : "  // line " + std::to_string(i) + "\n";
  const std::string text = render(report, source);
  EXPECT_NE(text.find("memcheck invalid_global_read in rms_bf16 at kernel.cu:42"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("access of 2 bytes"), std::string::npos) << text;
  expect_golden("sanitizer_hazards", text);
}

// The public report of the flagship on an H200 (2026-11-29, commit 8050563; sample batches
// stripped): benchmark, roofline and CUPTI stall evidence as the producers wrote them there.
evaluator::PublicReport recorded_h200_report() {
  return evaluator::PublicReport::from_json(nlohmann::json::parse(test_support::read_file(
      std::string(KLOOP_SOURCE_DIR) + "/tests/offline/fixtures/h200_flagship_report.json")));
}

TEST(FeedbackGolden, BenchmarkSlowerStatesByShapeClassAndRoofline) {
  const auto report = recorded_h200_report();
  const std::string text = section_text(feedback::build_feedback(report), "benchmark");
  EXPECT_NE(text.find("25 slower"), std::string::npos) << text;
  EXPECT_NE(text.find("launch_bound ("), std::string::npos) << text;
  EXPECT_NE(text.find("roofline, median fraction of the measured copy ceiling"), std::string::npos)
      << text;
  expect_golden("benchmark_roofline", text);
}

TEST(FeedbackGolden, StallReasonsPerSourceLine) {
  const auto report = recorded_h200_report();
  // The kernel.cu the recorded report names (its artifact hash), when the family still emits it:
  // then the hottest lines are quoted.
  const bool same = store::sha256_hex(kSource) == report.artifacts.at("kernel.cu");
  feedback::FeedbackOptions o;
  if (same) o.kernel_source = kSource;
  const std::string text = section_text(feedback::build_feedback(report, o), "profile");
  EXPECT_NE(text.find("long_scoreboard"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel.cu:25"), std::string::npos) << text;
  expect_golden(same ? "profile_stalls_quoted" : "profile_stalls", text);
}

TEST(FeedbackGolden, TruncatedReplySaysSoInsteadOfBuildingHalfAKernel) {
  const std::string reply = "```cuda\n" + kSource.substr(0, kSource.size() / 2);
  const agent::ParsedReply parsed =
      agent::parse_reply(reply, agent::ReplyContext{true, "length", ""});
  ASSERT_EQ(parsed.outcome, agent::ReplyOutcome::kTruncated);
  const auto report = report_of({agent::format_gate_result(parsed, reply.size())});
  const std::string text = render(report);
  EXPECT_NE(text.find("cut at the token limit"), std::string::npos) << text;
  expect_golden("format_truncated", text);
}

TEST(FeedbackGolden, EveryGoldenReportReadsWithoutProblems) {
  // No section says it could not read its evidence: the readers and the producers agree.
  for (const auto& text : {render(loop_report(reply_with(kSource, kManifest), tail_weight_kernel)),
                           render(recorded_h200_report())})
    EXPECT_EQ(text.find("could not read"), std::string::npos) << text;
}

} // namespace
} // namespace kloop::testing
