// Whether a test that builds candidates may run, skip or must fail for want of a build sandbox.
// It skips only where bubblewrap is not installed and unshare cannot isolate either; where
// bubblewrap is installed (scripts/bootstrap.sh installs it, so CI has it) a sandbox that cannot
// be resolved is a failure: the machine or kloop's sandbox probe is broken, and a skip would hide
// that every build test stopped running.
#pragma once

#include <unistd.h>

#include <optional>
#include <string>

#include "evaluator/gate.h"
#include "evaluator/sandbox.h"

namespace kloop::test_support {

struct SandboxCheck {
  enum class Verdict { kRun, kSkip, kFail } verdict = Verdict::kFail;
  std::string message; // why it skips or fails ("" to run)
};

// The rule alone: `bwrap_installed` (/usr/bin/bwrap is executable) and the error of
// resolve_sandbox(kAuto) (nullopt when a sandbox resolved).
inline SandboxCheck decide_sandbox_check(bool bwrap_installed,
                                         const std::optional<std::string>& resolve_error) {
  if (!resolve_error) return {SandboxCheck::Verdict::kRun, ""};
  if (bwrap_installed)
    return {SandboxCheck::Verdict::kFail,
            "bubblewrap is installed (/usr/bin/bwrap) but no build sandbox could be resolved: " +
                *resolve_error};
  return {SandboxCheck::Verdict::kSkip, *resolve_error};
}

// The rule on this machine (/usr/bin/bwrap is the path evaluator/sandbox.cpp runs).
inline SandboxCheck check_sandbox() {
  std::optional<std::string> error;
  try {
    evaluator::resolve_sandbox(evaluator::SandboxRequest::kAuto);
  } catch (const evaluator::InfraError& e) {
    error = e.what();
  }
  return decide_sandbox_check(::access("/usr/bin/bwrap", X_OK) == 0, error);
}

} // namespace kloop::test_support

// In a fixture's SetUp: skip or fail as check_sandbox() says.
#define KLOOP_REQUIRE_SANDBOX_OR_SKIP()                                                            \
  do {                                                                                             \
    const auto kloop_sandbox_check = ::kloop::test_support::check_sandbox();                       \
    if (kloop_sandbox_check.verdict == ::kloop::test_support::SandboxCheck::Verdict::kSkip)        \
      GTEST_SKIP() << kloop_sandbox_check.message;                                                 \
    ASSERT_EQ(kloop_sandbox_check.verdict, ::kloop::test_support::SandboxCheck::Verdict::kRun)     \
        << kloop_sandbox_check.message;                                                            \
  } while (0)
