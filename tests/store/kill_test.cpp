// SIGKILL at random moments of a session written by store_fake_session_driver: after each kill
// the store opens cleanly, integrity_check is ok, every committed iteration is complete (all rows
// present, blobs present and hash-correct) and the dead owner's session is `interrupted`.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "store/store.h"
#include "tests/store/fixture.h"

extern char** environ;

namespace kloop::store {
namespace {

using testing::TempDir;

pid_t spawn_driver(const std::string& dir, int iterations) {
  const std::string exe = std::string(KLOOP_BINARY_DIR) + "/bin/store_fake_session_driver";
  const std::string n = std::to_string(iterations);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(dir.c_str()),
                  const_cast<char*>(n.c_str()), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

void check_committed_iterations_complete(Store& st) {
  for (const auto& summary : st.list_sessions()) {
    const SessionDetail d = st.load_session(summary.session.id);
    EXPECT_NE(d.session.status, SessionStatus::kRunning) << "session " << d.session.id;
    for (const auto& it : d.iterations) {
      SCOPED_TRACE("session " + std::to_string(d.session.id) + " iteration " +
                   std::to_string(it.iteration.index));
      ASSERT_EQ(it.prompts.size(), 1u);
      ASSERT_EQ(it.responses.size(), 1u);
      ASSERT_EQ(it.candidates.size(), 1u);
      const auto& c = it.candidates[0];
      EXPECT_EQ(c.gates.size(), static_cast<std::size_t>(testing::kGatesPerCandidate));
      EXPECT_EQ(c.cases.size(), static_cast<std::size_t>(testing::kCasesPerCandidate));
      EXPECT_EQ(c.artifacts.size(), static_cast<std::size_t>(testing::kArtifactsPerCandidate));
      EXPECT_EQ(c.tool_calls.size(), 1u);
      EXPECT_EQ(c.benchmarks.size(), 1u);
      EXPECT_EQ(st.blob(c.candidate.source_sha256),
                "// kernel " + std::to_string(it.iteration.index) + "\n");
      EXPECT_EQ(st.blobs().check(it.prompts[0].blob_sha256), BlobState::kOk);
      for (const auto& a : c.artifacts)
        EXPECT_EQ(st.blobs().check(a.sha256), BlobState::kOk);
    }
  }
}

TEST(StoreKillTest, SigkillAtRandomMomentsKeepsEveryCommittedIterationIntact) {
  TempDir t;
  std::mt19937 rng(20261010);
  std::uniform_int_distribution<int> delay_ms(5, 400);
  int interrupted_seen = 0, committed = 0;
  constexpr int kKills = 12;
  for (int round = 0; round < kKills; ++round) {
    const pid_t pid = spawn_driver(t.path(), 1000);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Store st = Store::open(t.path()); // marks the dead owner's session interrupted
    const VerifyReport rep = st.verify();
    ASSERT_EQ(rep.integrity, "ok");
    EXPECT_TRUE(rep.missing.empty());
    EXPECT_TRUE(rep.altered.empty());
    check_committed_iterations_complete(st);
    committed = 0;
    for (const auto& s : st.list_sessions()) {
      if (s.session.status == SessionStatus::kInterrupted) ++interrupted_seen;
      committed += s.iterations;
    }
    // What --resume needs is there for the newest session.
    const auto sessions = st.list_sessions();
    if (!sessions.empty()) {
      const ResumeInfo info = st.resume_info(sessions.front().session.id);
      EXPECT_EQ(info.committed_iterations, sessions.front().iterations);
      if (info.committed_iterations > 0) {
        EXPECT_EQ(*info.last_committed_iteration, info.committed_iterations - 1);
      }
    }
  }
  EXPECT_GT(interrupted_seen, 0);
  EXPECT_GT(committed, 0) << "no iteration was ever committed: the test checked nothing";
}

} // namespace
} // namespace kloop::store
