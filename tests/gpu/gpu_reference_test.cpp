// The trusted GPU reference kernel against the CPU reference, through the same correctness core
// and the real worker: every call goes to the reference path when there is no candidate.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

TEST(GpuReferenceTest, ReferenceKernelMatchesTheCpuReferenceOnThePublicSuite) {
  const auto r =
      run_correctness(nullptr, {{"suite", "public"}, {"seed", 1}}, std::chrono::seconds(240));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  const auto& counts = r.result.at("path_counts");
  EXPECT_EQ(counts.at("candidate"), 0);
  EXPECT_GT(counts.at("reference").get<int>(), 0);
  EXPECT_GT(counts.at("no_launch").get<int>(), 0); // empty outer dimensions launch nothing
  EXPECT_GT(r.result.at("suite").at("passed").get<int>(), 50);
}

TEST(GpuReferenceTest, InvalidInputsRaiseTheDeclaredErrorBeforeAnyLaunch) {
  const auto r =
      run_correctness(nullptr, {{"suite", "invalid"}, {"seed", 1}}, std::chrono::seconds(60));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  const auto& counts = r.result.at("path_counts");
  EXPECT_EQ(counts.at("candidate"), 0);
  EXPECT_EQ(counts.at("reference"), 0); // validation happens before any launch
}

} // namespace
} // namespace kloop::gputest
