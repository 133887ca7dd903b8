// The scripted repair test (issue 24): a fake model that can fix a defect only when the feedback
// carries the fact it needs, driven through the real loop (prompts, reply parsing, feedback from
// the stored report) with the correctness gate from the CPU emulation of the GPU worker
// (cpu_device.h: the real correctness core, the worker's result.json writer, kloop's reader).
//
// The defect: the kernel addresses row r at offset + r * H, which is right only when rows are
// packed; the first public case it fails is a sliced view (P7, qkv[:, :2048] style). The model
// repairs the addressing only when the feedback shows the failing case's H and its layout with the
// row stride ("H 128, layout sliced_gaps: shape [4, 16, 128], strides [6144, 128, 1]"). With the
// real feedback the loop reaches a candidate that passes correctness within the budget; with the
// failing case's details removed from the evidence (what the feedback showed before issue 24,
// when it looked for them under the wrong keys) it never does.
#include <atomic>
#include <filesystem>
#include <regex>

#include <gtest/gtest.h>

#include "agent/loop.h"
#include "evaluator/candidate.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/operator.h"
#include "kernels/rmsnorm/reference.h"
#include "store/store.h"
#include "tests/agent/cpu_device.h"
#include "tests/agent/golden.h"
#include "tests/support/test_files.h"

namespace kloop::testing {
namespace {

namespace fs = std::filesystem;
using evaluator::GateStatus;

const rmsnorm::Variant kVariant = *rmsnorm::variant_by_name("v16-tauto-b512-c4-shfl-pers-peel");

// The marker a reply's kernel.cu carries, naming which C++ stand-in "compiles" from it.
constexpr const char* kFixed = "// row addressing: x + row * row_stride (from the feedback)";
constexpr const char* kPacked = "// row addressing: x + row * H";

// A model that writes the defect first and can only repair it from the failing case's H and
// layout: it needs the row stride, which only the case details carry.
class ScriptedModel final : public agent::Provider {
public:
  std::string name() const override { return "scripted"; }
  agent::ProviderResponse complete(const agent::ProviderRequest& request) override {
    const std::string& prompt = request.messages.back().content;
    static const std::regex kCase(R"(H (\d+), layout (\w+): shape \[[^\]]*\], strides \[(\d+),)");
    std::smatch m;
    const bool knows = request.messages.size() > 1 && std::regex_search(prompt, m, kCase) &&
                       m[3].str() != m[1].str(); // a row stride that is not H
    if (knows) repaired_from = m[0].str();
    prompts.push_back(prompt);
    agent::ProviderResponse r;
    r.text = "Revised kernel below.\n\n```cuda\n" + std::string(knows ? kFixed : kPacked) + "\n" +
             rmsnorm::emit_kernel_source(kVariant) + "```\n\n```json\n" +
             rmsnorm::emit_manifest(kVariant) + "\n```\n";
    r.exchange.provider = name();
    r.stop_reason = "stop";
    return r;
  }
  std::vector<std::string> prompts;
  std::string repaired_from;
};

// The CPU test evaluator: the real contract gate, the correctness gate of the stand-in the
// source's marker names through the CPU emulation; `strip_case_details` drops the failing case's
// spec and comparison from the evidence (the reason line stays).
// The CASES.md part of the public suite (seed 1): the same cases the real batch runs first (P7 is
// the one the defect fails), small enough that a passing candidate runs all of them in well under
// a second, also under ASan in CI.
std::vector<rmsnorm::CaseSpec> cases() {
  std::vector<rmsnorm::CaseSpec> out;
  for (auto& s : rmsnorm::public_cases(1))
    if (s.family == "cases_md") out.push_back(std::move(s));
  return out;
}

class CpuEvaluator final : public agent::CandidateEvaluator {
public:
  explicit CpuEvaluator(bool strip_case_details) : strip_(strip_case_details) {}
  evaluator::Evaluation evaluate(const evaluator::Candidate& c) override {
    const bool fixed = c.source.find(kFixed) != std::string::npos;
    auto gates =
        cpu_gates(c.source, c.manifest_text,
                  fixed ? CpuKernel(reference_kernel) : CpuKernel(packed_rows_kernel), cases());
    for (auto& g : gates)
      if (g.name == evaluator::kGateCorrectness && strip_ && g.evidence.contains("suite") &&
          g.evidence["suite"]["first_failure"].is_object()) {
        g.evidence["suite"]["first_failure"].erase("spec");
        g.evidence["suite"]["first_failure"].erase("comparison");
      }
    evaluator::Evaluation ev;
    ev.report = report_of(std::move(gates));
    return ev;
  }

private:
  bool strip_;
};

class NoHoldout final : public agent::HoldoutRunner {
public:
  holdout::HoldoutResult run(const op::Operator&, const evaluator::Candidate&, const std::string&,
                             const std::vector<nlohmann::json>&) override {
    holdout::HoldoutResult r;
    r.status = GateStatus::kNotRun;
    r.reason = "no device in this CPU test";
    return r;
  }
};

class Lines final : public agent::ProgressSink {
public:
  void line(const std::string& text) override { lines.push_back(text); }
  std::vector<std::string> lines;
};

struct SessionRun {
  agent::LoopResult result;
  std::vector<std::string> prompts;
  std::string repaired_from;
};

SessionRun run_session(bool strip_case_details, int budget) {
  const test_support::TempDir tmp("repair"); // outlives the store below
  const fs::path dir = tmp.dir();
  store::Store st = store::Store::open((dir / "store").string());
  agent::LoopOptions o;
  o.op = &rmsnorm::operator_instance();
  o.budget = budget;
  o.provider_name = "scripted";
  o.holdout_dir = dir / "holdout";
  o.holdout_options = {4, 4096};
  o.export_dir = dir / "export";
  ScriptedModel model;
  CpuEvaluator eval(strip_case_details);
  NoHoldout holdout;
  Lines progress;
  const std::atomic<bool> cancel{false};
  SessionRun r;
  r.result = agent::run_loop(o, model, eval, holdout, st, progress, cancel);
  r.prompts = model.prompts;
  r.repaired_from = model.repaired_from;
  return r;
}

bool some_iteration_passed_correctness(const agent::LoopResult& r) {
  for (const auto& it : r.iterations)
    for (const auto& [name, status] : it.gates)
      if (name == "correctness" && status == "pass") return true;
  return false;
}

TEST(ScriptedRepair, RealFeedbackLetsTheModelFixTheStrideDefectWithinTheBudget) {
  const SessionRun r = run_session(false, 3);
  ASSERT_EQ(r.result.iterations.size(), 3u);
  EXPECT_EQ(r.result.iterations[0].gates[4].second, "fail"); // correctness of the defect
  EXPECT_TRUE(some_iteration_passed_correctness(r.result));
  EXPECT_EQ(r.repaired_from, "H 128, layout sliced_gaps: shape [4, 16, 128], strides [6144,");
  // The second prompt carried the case; the repair came at once.
  ASSERT_GE(r.prompts.size(), 2u);
  EXPECT_NE(r.prompts[1].find("first failing public case: P7-fused-slice-bfloat16"),
            std::string::npos)
      << r.prompts[1];
  bool second = false;
  for (const auto& [name, status] : r.result.iterations[1].gates)
    second |= name == "correctness" && status == "pass";
  EXPECT_TRUE(second);
}

TEST(ScriptedRepair, WithoutTheFailingCaseDetailsTheModelNeverFixesIt) {
  const SessionRun r = run_session(true, 3);
  ASSERT_EQ(r.result.iterations.size(), 3u);
  EXPECT_FALSE(some_iteration_passed_correctness(r.result));
  EXPECT_TRUE(r.repaired_from.empty());
  // The feedback still names the case and the rule, just not its layout.
  ASSERT_GE(r.prompts.size(), 2u);
  EXPECT_NE(r.prompts[1].find("P7-fused-slice-bfloat16"), std::string::npos) << r.prompts[1];
  EXPECT_EQ(r.prompts[1].find("strides ["), std::string::npos) << r.prompts[1];
}

// Issue 22 item 9: a provider that stays unreachable ends the session after that iteration, not
// after asking again in every iteration; no holdout is spent and the session stays resumable.
class Unreachable final : public agent::Provider {
public:
  std::string name() const override { return "unreachable"; }
  agent::ProviderResponse complete(const agent::ProviderRequest&) override {
    ++calls;
    agent::ProviderResponse r;
    r.outcome = agent::ProviderOutcome::kTransport;
    r.error = "unreachable: POST http://127.0.0.1:1/v1/chat/completions failed (connect_error)";
    r.stop_session = true;
    return r;
  }
  int calls = 0;
};

TEST(ProviderStop, AnUnreachableProviderEndsTheSessionAfterTheFirstIteration) {
  const test_support::TempDir tmp("stop");
  const fs::path dir = tmp.dir();
  {
    store::Store st = store::Store::open((dir / "store").string());
    agent::LoopOptions o;
    o.op = &rmsnorm::operator_instance();
    o.budget = 5;
    o.provider_name = "unreachable";
    o.holdout_dir = dir / "holdout";
    o.holdout_options = {4, 4096};
    Unreachable provider;
    CpuEvaluator eval(false);
    NoHoldout holdout;
    Lines progress;
    const std::atomic<bool> cancel{false};
    const agent::LoopResult r = agent::run_loop(o, provider, eval, holdout, st, progress, cancel);
    EXPECT_EQ(provider.calls, 1);
    EXPECT_EQ(r.iterations.size(), 1u);
    EXPECT_EQ(r.decision, "failed");
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE(r.reason.find("--resume " + std::to_string(r.session_id)), std::string::npos)
        << r.reason;
    const auto d = st.load_session(r.session_id);
    EXPECT_EQ(d.session.status, store::SessionStatus::kFailed);
    EXPECT_TRUE(d.holdout_runs.empty());
  }
}

} // namespace
} // namespace kloop::testing
