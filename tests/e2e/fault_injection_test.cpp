// Fault injection of the refinement loop (issue 22): the real kloop executable is killed with
// SIGKILL at random moments of one session (a bounded number of times, from a fixed seed; set
// KLOOP_FAULT_SEED to try another), resumed each time, and finally run to its end. After every
// kill the store must still hold every step committed before it, unchanged (no committed step is
// lost or rewritten), and every blob a row names must be intact; at the end the session must be in
// a recorded final state (completed, or failed with its reason), never `running` or lost.
#include <random>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "store/error.h"
#include "store/store.h"
#include "tests/e2e/e2e_support.h"

namespace kloop::e2e {
namespace {

// What a committed iteration recorded: compared after every later kill.
struct IterationPrint {
  std::int64_t id = 0;
  int index = 0;
  std::string notes;
  std::vector<std::string> rows; // candidates, gates, artifacts, responses
  bool operator==(const IterationPrint&) const = default;
};

std::vector<IterationPrint> committed(const fs::path& dir) {
  auto st = store::Store::open(dir.string(), store::OpenMode::kReadOnly);
  const auto d = st.load_session(1);
  std::vector<IterationPrint> out;
  for (const auto& it : d.iterations) {
    IterationPrint p{it.iteration.id, it.iteration.index, it.iteration.notes.dump(), {}};
    for (const auto& r : it.responses)
      p.rows.push_back("response " + r.blob_sha256);
    for (const auto& c : it.candidates) {
      p.rows.push_back(fmt::format("candidate {} {} {}", c.candidate.id, c.candidate.source_sha256,
                                   static_cast<int>(c.candidate.verdict)));
      for (const auto& g : c.gates)
        p.rows.push_back(fmt::format("gate {} {}", g.name, static_cast<int>(g.status)));
      for (const auto& a : c.artifacts)
        p.rows.push_back("artifact " + a.name + " " + a.sha256);
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Whether the store holds session 1 (a kill can land before the store or the session exists).
bool has_session(const fs::path& dir) {
  if (!fs::exists(dir / "kloop.db")) return false;
  try {
    auto st = store::Store::open(dir.string(), store::OpenMode::kReadOnly);
    (void)st.load_session(1);
    return true;
  } catch (const store::StoreError&) {
    return false;
  }
}

TEST(FaultInjectionE2E, KilledAtRandomPointsLosesNoCommittedStepAndEndsRecorded) {
  unsigned seed = 22;
  if (const char* env = std::getenv("KLOOP_FAULT_SEED")) seed = std::stoul(env);
  std::mt19937 rng(seed);
  std::printf("fault injection seed %u\n", seed);
  // Replies: manifests the contract gate rejects at once (1e999) alternating with candidates that
  // are built (NVRTC), after 50-400 ms each, so kills land in requests, builds, commits and the
  // finish.
  std::string bad_manifest = good_manifest();
  bad_manifest.replace(bad_manifest.find("256"), 3, "1e999");
  std::vector<std::string> bodies;
  for (int i = 0; i < 60; ++i)
    bodies.push_back(
        completion_body(reply_with(good_source(), i % 3 == 2 ? good_manifest() : bad_manifest)));
  std::vector<int> delays;
  for (int i = 0; i < 60; ++i)
    delays.push_back(std::uniform_int_distribution<int>(50, 400)(rng));
  FakeOpenAi server(bodies, delays);
  const fs::path dir = fresh_dir("fault");
  const fs::path store = dir / "store";
  constexpr int kBudget = 10, kKills = 8;
  const std::vector<std::string> first = {
      "optimize",   "rmsnorm",         "--provider", "openai",
      "--base-url", server.base_url(), "--budget",   std::to_string(kBudget),
      "--store",    store.string()};
  const std::vector<std::string> resume = {"optimize", "rmsnorm", "--resume",
                                           "1",        "--store", store.string()};
  std::vector<IterationPrint> before;
  int kills = 0;
  for (int attempt = 0; attempt < kKills; ++attempt) {
    const bool fresh = !has_session(store);
    const pid_t pid = kloop_spawn(fresh ? first : resume, dir / "run.txt");
    const int delay_ms = std::uniform_int_distribution<int>(20, 1500)(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    const bool still_running = ::kill(pid, SIGKILL) == 0;
    const int status = wait_exit(pid);
    if (!still_running || status != 128 + SIGKILL) {
      // It ended on its own before the kill: done, or refused because it is complete.
      std::printf("attempt %d: ended by itself (exit %d) before %d ms\n", attempt, status,
                  delay_ms);
      break;
    }
    ++kills;
    std::printf("attempt %d: killed after %d ms\n", attempt, delay_ms);
    if (!has_session(store)) continue; // killed before the session row was committed
    const std::vector<IterationPrint> now = committed(store);
    ASSERT_GE(now.size(), before.size()) << "attempt " << attempt << ": a committed step is lost";
    for (std::size_t i = 0; i < before.size(); ++i)
      EXPECT_EQ(now[i], before[i])
          << "attempt " << attempt << ": iteration " << i + 1 << " changed after it was committed";
    for (std::size_t i = 0; i < now.size(); ++i)
      EXPECT_EQ(now[i].index, static_cast<int>(i)) << "iterations are committed in order, once";
    before = now;
    const auto verify = kloop_run({"store", "verify", "--store", store.string()});
    EXPECT_EQ(verify.exit_code, 0)
        << "attempt " << attempt << ": " << verify.stdout_text << verify.stderr_text;
  }
  // Run to the end without a kill (a session killed mid-holdout ends `failed`: its single-use
  // suite is spent, and that is recorded).
  for (int round = 0; round < 3; ++round) {
    const bool fresh = !has_session(store);
    const auto r = kloop_run(fresh ? first : resume, 600);
    ASSERT_FALSE(r.timed_out) << r.stdout_text << r.stderr_text;
    auto st = store::Store::open(store.string(), store::OpenMode::kReadOnly);
    const auto status = st.load_session(1).session.status;
    if (status == store::SessionStatus::kCompleted || status == store::SessionStatus::kFailed)
      break;
  }
  const auto final_rows = committed(store);
  ASSERT_GE(final_rows.size(), before.size());
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(final_rows[i], before[i]) << "iteration " << i + 1 << " changed at the end";
  auto st = store::Store::open(store.string(), store::OpenMode::kReadOnly);
  const auto d = st.load_session(1);
  EXPECT_TRUE(d.session.status == store::SessionStatus::kCompleted ||
              d.session.status == store::SessionStatus::kFailed)
      << store::name(d.session.status);
  if (d.session.status == store::SessionStatus::kCompleted) {
    EXPECT_EQ(static_cast<int>(d.iterations.size()), kBudget);
    EXPECT_TRUE(d.promotion.has_value()) << "a completed session records its decision";
  } else {
    EXPECT_TRUE(d.session.params.contains("failure")) << "a failed session says why";
  }
  EXPECT_EQ(d.holdout_commitments.size(), 1u) << "one sealed holdout, committed once";
  std::printf("%d kills; %zu iterations committed; session %s\n", kills, d.iterations.size(),
              std::string(store::name(d.session.status)).c_str());
  fs::remove_all(dir);
}

} // namespace
} // namespace kloop::e2e
