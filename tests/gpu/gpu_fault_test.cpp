// Fault containment: a kernel that writes to an illegal address ends its worker as `crashed` with
// the fault class and the case named; an endless kernel is stopped by the watchdog as `timeout`;
// in both cases the next evaluation starts a fresh worker and works.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

const nlohmann::json kSmall = {{"suite", "cases_md"}};

void expect_next_evaluation_works() {
  const TreeCandidate base = load_candidate(tree("baseline"));
  const auto r = run_correctness(&base, kSmall, std::chrono::seconds(60));
  EXPECT_EQ(r.status, GateStatus::kPass) << describe(r);
}

TEST(GpuFaultTest, IllegalAddressIsCrashedWithTheFaultNamedAndTheNextRunWorks) {
  const TreeCandidate c = load_candidate(tree("corpus/fault_illegal_address"));
  const auto r = run_correctness(&c, kSmall, std::chrono::seconds(60));
  ASSERT_EQ(r.status, GateStatus::kCrashed) << describe(r);
  EXPECT_EQ(r.fault_class, "illegal_address") << describe(r);
  EXPECT_EQ(r.exit_code, evaluator::kGpuWorkerStickyFault);
  EXPECT_FALSE(r.result.at("fault").value("case_name", "").empty()) << describe(r);
  expect_next_evaluation_works();
}

TEST(GpuFaultTest, EndlessKernelTimesOutWithTheCaseNamedAndTheNextRunWorks) {
  const TreeCandidate c = load_candidate(tree("corpus/fault_infinite_loop"));
  const auto r = run_correctness(&c, kSmall, std::chrono::seconds(8));
  ASSERT_EQ(r.status, GateStatus::kTimeout) << describe(r);
  EXPECT_EQ(r.fault_class, "timeout");
  EXPECT_TRUE(r.progress.is_object()) << describe(r);
  EXPECT_NE(r.reason.find(r.progress.value("name", "?")), std::string::npos) << r.reason;
  expect_next_evaluation_works();
}

} // namespace
} // namespace kloop::gputest
