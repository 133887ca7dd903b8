// Every defect-corpus entry of every operator (kernels/<op>/corpus/, tests/support/
// corpus_entries.h) gets its expected verdict from the first gate that rejects it, as far as gates
// are built: contract (parse_manifest), static (PTX scan, evaluator/static_inspection.h),
// then device correctness. Entries whose expect.json names a gate that is not wired here
// ("pending": true, e.g. sanitizer) only record what correctness did.
#include <filesystem>

#include <gtest/gtest.h>

#include "evaluator/static_inspection.h"
#include "kernels/manifest.h"
#include "kernels/registry.h"
#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

class GpuCorpusTest : public testing::TestWithParam<test_support::CorpusEntry> {};

TEST_P(GpuCorpusTest, EntryGetsItsExpectedVerdictAtItsGate) {
  const TreeCandidate c = load_candidate(GetParam());
  const std::string want_gate = c.expect.at("gate");
  const bool want_pass = c.expect.at("verdict") == "pass";
  // Gates this tier can run: contract, static (PTX scan) and correctness. A later gate (sanitizer)
  // is pending here whether or not expect.json says so.
  const bool pending =
      c.expect.value("pending", false) ||
      (want_gate != "contract" && want_gate != "static" && want_gate != "correctness");

  const op::Operator* oper =
      op::find_operator(nlohmann::json::parse(c.manifest_text).value("contract", ""));
  ASSERT_NE(oper, nullptr) << GetParam().dir << ": manifest names no registered contract";
  const op::Declaration& decl = oper->declaration();
  const op::ManifestParse mp = op::parse_manifest(decl, c.manifest_text);
  if (!mp.manifest) {
    EXPECT_EQ(want_gate, "contract") << mp.errors.front().message;
    EXPECT_FALSE(want_pass);
    return;
  }
  const auto findings = evaluator::check_ptx(c.ptx, decl, *mp.manifest);
  if (!findings.empty()) {
    EXPECT_EQ(want_gate, "static") << findings.front().message;
    EXPECT_FALSE(want_pass);
    return;
  }
  ASSERT_NE(want_gate, "contract") << "the manifest was expected to be rejected";
  ASSERT_NE(want_gate, "static") << "the static scan was expected to find something";
  const bool endless = c.expect.value("status", "") == "timeout";
  const auto r =
      run_correctness(&c, {{"suite", "public"}, {"seed", 11}},
                      std::chrono::seconds(endless ? 8 : 120), {{"stop_at_first_failure", true}});
  std::printf("[corpus] %s: correctness %s: %s\n", GetParam().param_name().c_str(),
              std::string(evaluator::gate_status_name(r.status)).c_str(), r.reason.c_str());
  if (pending) {
    GTEST_SKIP() << "gate " << want_gate << " is pending; correctness said "
                 << evaluator::gate_status_name(r.status) << ": " << r.reason;
  }
  ASSERT_EQ(want_gate, "correctness");
  if (want_pass) {
    EXPECT_EQ(r.status, GateStatus::kPass) << describe(r);
    return;
  }
  EXPECT_NE(r.status, GateStatus::kPass) << describe(r);
  EXPECT_NE(r.status, GateStatus::kInfraError) << describe(r);
  EXPECT_NE(r.status, GateStatus::kNotRun) << describe(r);
  if (c.expect.contains("status")) {
    EXPECT_EQ(evaluator::gate_status_name(r.status), c.expect.at("status").get<std::string>())
        << describe(r);
  }
  if (c.expect.contains("fault_class")) {
    EXPECT_EQ(r.fault_class, c.expect.at("fault_class").get<std::string>()) << describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuCorpusTest,
                         testing::ValuesIn(test_support::corpus_entries("corpus")),
                         [](const testing::TestParamInfo<test_support::CorpusEntry>& info) {
                           return info.param.param_name();
                         });

} // namespace
} // namespace kloop::gputest
