// Golden feedback texts of the two failure classes that need the compiler: an NVRTC error (file,
// line and the compiler's message) and a static finding (the PTX line and the rule), both from the
// real pipeline (evaluator::evaluate_candidate: contract, the sandboxed NVRTC build worker, the
// static gate). Integration tier: NVRTC, bubblewrap (or unshare) and kloop-build-worker.
#include <filesystem>

#include <gtest/gtest.h>

#include "evaluator/pipeline.h"
#include "evaluator/sandbox.h"
#include "feedback/feedback.h"
#include "kernels/rmsnorm/family.h"
#include "tests/agent/golden.h"
#include "tests/support/test_files.h"

namespace kloop::testing {
namespace {

namespace fs = std::filesystem;
using evaluator::GateStatus;

evaluator::PublicReport evaluate(const std::string& source, const std::string& manifest) {
  const evaluator::Candidate c{source, manifest, source.size(), manifest.size()};
  evaluator::NoDeviceGates device;
  auto ev = evaluator::evaluate_candidate(c, evaluator::EvaluateOptions{}, device);
  // The loop puts the format gate first (the reply parsed).
  ev.report.gates.insert(ev.report.gates.begin(), gate("format", GateStatus::kPass));
  return ev.report;
}

class FeedbackBuildGolden : public ::testing::Test {
protected:
  void SetUp() override {
    // On CI the toolkit and bubblewrap are installed by the README's commands: a missing one is a
    // failure there, so this fails rather than skips.
    ASSERT_TRUE(fs::exists("/usr/local/cuda/include/cuda_fp16.h")) << "no CUDA toolkit";
    ASSERT_NO_THROW(evaluator::resolve_sandbox(evaluator::SandboxRequest::kAuto));
  }
};

TEST_F(FeedbackBuildGolden, NvrtcErrorShowsFileLineAndTheCompilersMessage) {
  const rmsnorm::Variant v = *rmsnorm::variant_by_name("v16-tauto-b512-c4-shfl-pers-peel");
  std::string source = rmsnorm::emit_kernel_source(v);
  const auto lines = std::count(source.begin(), source.end(), '\n');
  source += "__device__ float scaled(float v) { return v * row_scale; }\n";
  const auto report = evaluate(source, rmsnorm::emit_manifest(v));
  ASSERT_EQ(report.find("build")->status, GateStatus::kFail) << report.to_json().dump(1);
  const std::string text = feedback::build_feedback(report).render();
  EXPECT_NE(text.find("kernel.cu(" + std::to_string(lines + 1) +
                      "): error: identifier \"row_scale\" is undefined"),
            std::string::npos)
      << text;
  expect_golden("build_nvrtc_error", text);
}

TEST_F(FeedbackBuildGolden, StaticFindingShowsThePtxLineAndTheRule) {
  const fs::path fixtures = fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/forbidden";
  const auto report = evaluate(test_support::read_file(fixtures / "clock64.cu"),
                               test_support::read_file(fixtures / "manifest.json"));
  ASSERT_EQ(report.find("static")->status, GateStatus::kFail) << report.to_json().dump(1);
  const std::string text = feedback::build_feedback(report).render();
  EXPECT_NE(text.find("rule clock at PTX line"), std::string::npos) << text;
  EXPECT_NE(text.find("%clock64"), std::string::npos) << text;
  expect_golden("static_ptx_rule", text);
}

} // namespace
} // namespace kloop::testing
