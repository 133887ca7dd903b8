// The in-tree baseline passes the full device correctness gate (public suite for all dtypes with
// the device audit: poison, guards, input bytes, repeats, concurrent streams), the large cases,
// and routes what its manifest excludes (transposed x) to the reference.
#include <cstdlib>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/cases.h"
#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

// KLOOP_BASELINE=baseline_next runs the same gate on a revision before it replaces the baseline.
std::string baseline_dir() {
  const char* env = std::getenv("KLOOP_BASELINE");
  return env ? env : "baseline";
}

TEST(GpuBaselineTest, BaselinePassesThePublicSuiteWithTheDeviceAudit) {
  const TreeCandidate c = load_candidate(tree(baseline_dir()));
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 7}}, std::chrono::seconds(240));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  const auto& ev = r.result.at("evidence");
  EXPECT_GT(ev.at("path_counts").at("candidate").get<int>(), 0);
  EXPECT_GT(ev.at("path_counts").at("reference").get<int>(), 0); // transposed views
  bool transposed_routed = false;
  for (const auto& why : ev.at("reference_reasons")) {
    const std::string s = why.get<std::string>();
    transposed_routed = transposed_routed || s.find("last-dimension stride") != std::string::npos;
    // alignment_bytes is 2: no contract dtype view is routed away for alignment.
    EXPECT_EQ(s.find("alignment_bytes"), std::string::npos) << s;
  }
  EXPECT_TRUE(transposed_routed) << ev.dump();
}

TEST(GpuBaselineTest, BaselinePassesTheLargeCases) {
  // One tensor over 2^31 bytes (the fp32 one: fewest elements, so the CPU side stays quick) and
  // every case with more than 65535 rows.
  nlohmann::json cases = nlohmann::json::array();
  for (const rmsnorm::CaseSpec& s : rmsnorm::large_cases(3))
    if (s.name.find("131073x4096") != std::string::npos || s.name.rfind("rows-", 0) == 0)
      cases.push_back(s.to_json());
  ASSERT_GE(cases.size(), 2u);
  const TreeCandidate c = load_candidate(tree(baseline_dir()));
  const auto r = run_correctness(&c, cases, std::chrono::seconds(200), {{"concurrency", false}});
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_GT(r.result.at("path_counts").at("candidate").get<int>(), 0);
  EXPECT_GT(r.result.at("path_counts").at("reference").get<int>(), 0); // transposed ones
  EXPECT_EQ(r.result.at("suite").at("passed").get<std::size_t>(), cases.size());
}

} // namespace
} // namespace kloop::gputest
