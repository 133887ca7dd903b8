// The in-tree baseline passes the full device correctness gate (public suite for all dtypes with
// the device audit: poison, guards, input bytes, repeats, concurrent streams), the large cases,
// and routes what its manifest excludes (transposed x) to the reference.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

TEST(GpuBaselineTest, BaselinePassesThePublicSuiteWithTheDeviceAudit) {
  const TreeCandidate c = load_candidate(tree("baseline"));
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
  const TreeCandidate c = load_candidate(tree("baseline"));
  const auto r = run_correctness(&c, {{"suite", "large"}, {"seed", 3}}, std::chrono::seconds(280),
                                 {{"concurrency", false}});
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_GT(r.result.at("path_counts").at("candidate").get<int>(), 0);
}

} // namespace
} // namespace kloop::gputest
