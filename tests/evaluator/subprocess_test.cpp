// run_subprocess and the sandbox variants on real processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/build.h"
#include "evaluator/subprocess.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator {
namespace {

TEST(SubprocessTest, SigtermIgnoredEscalatesToSigkill) {
  SubprocessOptions o;
  o.deadline = std::chrono::milliseconds(200);
  o.kill_grace = std::chrono::milliseconds(200);
  auto c = run_subprocess({"/bin/sh", "-c", "trap '' TERM; while :; do :; done"}, o);
  EXPECT_TRUE(c.timed_out);
  EXPECT_EQ(c.term_signal, SIGKILL);
  EXPECT_LT(c.wall_ms, 3000);
}

TEST(SubprocessTest, EnvironmentIsOnlyTheAllowList) {
  setenv("KLOOP_SHOULD_NOT_LEAK", "1", 1);
  SubprocessOptions o;
  o.env = {{"A", "b"}};
  auto c = run_subprocess({"/usr/bin/env"}, o);
  EXPECT_EQ(c.exit_code, 0);
  EXPECT_EQ(c.stdout_text, "A=b\n");
  EXPECT_EQ(c.stdout_sha256.size(), 64u);
}

TEST(SubprocessTest, OutputIsCappedAndStdinIsDevNull) {
  SubprocessOptions o;
  o.output_cap = 1000;
  auto c =
      run_subprocess({"/bin/sh", "-c", "cat; head -c 100000 /dev/zero; echo e >&2; exit 7"}, o);
  EXPECT_EQ(c.exit_code, 7);
  EXPECT_EQ(c.stdout_text.size(), 1000u);
  EXPECT_TRUE(c.stdout_truncated);
  EXPECT_EQ(c.stderr_text, "e\n");
}

TEST(SubprocessTest, MissingExecutableIsInfraError) {
  EXPECT_THROW(run_subprocess({"/nonexistent/tool"}, {}), InfraError);
}

using test_support::read_file;

// The good fixture builds under each isolation this machine offers; the choice is recorded.
TEST(SandboxVariantsTest, UnshareAndNoSandboxBuildsAreRecorded) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_fp16.h")) GTEST_SKIP() << "no CUDA";
  const auto dir = std::filesystem::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good";
  auto parsed = op::parse_manifest(rmsnorm::declaration(), read_file(dir / "manifest.json"));
  ASSERT_TRUE(parsed.manifest);
  std::vector<std::pair<SandboxRequest, std::string>> kinds = {
      {SandboxRequest::kNoSandbox, "none"}};
  if (unshare_available()) kinds.push_back({SandboxRequest::kUnshare, "unshare"});
  for (const auto& [req, name] : kinds) {
    BuildOptions b;
    b.sandbox = req;
    auto r = build_candidate(read_file(dir / "kernel.cu"), *parsed.manifest, b);
    EXPECT_EQ(r.gate.status, GateStatus::kPass) << name << ": " << r.gate.reason;
    EXPECT_EQ(r.gate.evidence["sandbox"], name);
    EXPECT_EQ(r.sandbox, name);
  }
}

} // namespace
} // namespace kloop::evaluator
