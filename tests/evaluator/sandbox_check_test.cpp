// When the build and CLI integration suites may skip for want of a sandbox
// (tests/support/sandbox_check.h): only where bubblewrap is not installed and nothing isolates;
// with bubblewrap installed (scripts/bootstrap.sh, so CI) a sandbox that cannot be resolved fails.
#include <gtest/gtest.h>

#include "tests/support/sandbox_check.h"

namespace kloop::test_support {
namespace {

using Verdict = SandboxCheck::Verdict;

TEST(SandboxCheckTest, RunsWhenASandboxResolves) {
  EXPECT_EQ(decide_sandbox_check(true, std::nullopt).verdict, Verdict::kRun);
  EXPECT_EQ(decide_sandbox_check(false, std::nullopt).verdict, Verdict::kRun); // unshare alone
}

TEST(SandboxCheckTest, FailsWhenBubblewrapIsInstalledButNothingResolves) {
  const SandboxCheck c = decide_sandbox_check(true, "sandbox: neither bubblewrap nor unshare ...");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.message.find("bubblewrap is installed"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("neither bubblewrap nor unshare"), std::string::npos) << c.message;
}

TEST(SandboxCheckTest, SkipsOnlyWithoutBubblewrapAndWithoutIsolation) {
  const SandboxCheck c = decide_sandbox_check(false, "sandbox: neither bubblewrap nor unshare");
  EXPECT_EQ(c.verdict, Verdict::kSkip);
  EXPECT_EQ(c.message, "sandbox: neither bubblewrap nor unshare");
}

// On this machine: where bubblewrap is installed, a sandbox resolves (CI installs it with the
// README's command), so the build suites run rather than skip.
TEST(SandboxCheckTest, ThisMachineRunsTheBuildSuitesWhereBubblewrapIsInstalled) {
  const SandboxCheck c = check_sandbox();
  EXPECT_NE(c.verdict, Verdict::kFail) << c.message;
}

} // namespace
} // namespace kloop::test_support
