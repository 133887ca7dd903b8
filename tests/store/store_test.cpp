// Store schema, blobs, transactions, sessions, resume and verify (CPU only, temp directories).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "store/blobs.h"
#include "store/compare.h"
#include "store/error.h"
#include "store/hash.h"
#include "store/replay.h"
#include "store/schema.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

using testing::TempDir;

std::int64_t count_rows(const std::string& dir, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2((dir + "/kloop.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  std::int64_t n = -1;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

TEST(StoreTest, OpenCreatesSchemaWithWalForeignKeysAndApplicationId) {
  TempDir t;
  const std::string dir = t.path() + "/s";
  { Store st = Store::open(dir); }
  EXPECT_EQ(count_rows(dir, "PRAGMA user_version"), schema_version());
  EXPECT_EQ(count_rows(dir, "PRAGMA application_id"), kApplicationId);
  EXPECT_GE(count_rows(dir, "SELECT count(*) FROM sqlite_master WHERE type='table'"), 15);
  Store st = Store::open(dir); // reopening an existing store works
  EXPECT_TRUE(st.list_sessions().empty());
}

TEST(StoreTest, BlobsAreContentAddressedDeduplicatedAndRehashedOnRead) {
  TempDir t;
  BlobStore blobs(t.path() + "/blobs");
  const std::string sha = blobs.put("hello");
  EXPECT_EQ(sha, sha256_hex("hello"));
  EXPECT_EQ(blobs.path(sha), t.path() + "/blobs/" + sha.substr(0, 2) + "/" + sha.substr(2));
  EXPECT_EQ(blobs.put("hello"), sha);
  EXPECT_EQ(blobs.get(sha), "hello");
  std::filesystem::permissions(blobs.path(sha), std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  std::ofstream(blobs.path(sha), std::ios::binary) << "hellO";
  EXPECT_EQ(blobs.check(sha), BlobState::kAltered);
  EXPECT_THROW(blobs.get(sha), StoreError);
  EXPECT_EQ(blobs.put("hello"), sha); // a put repairs an altered copy
  EXPECT_EQ(blobs.check(sha), BlobState::kOk);
  std::filesystem::remove(blobs.path(sha));
  EXPECT_EQ(blobs.check(sha), BlobState::kMissing);
  try {
    blobs.get(sha);
    FAIL() << "missing blob returned";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

TEST(StoreTest, UncommittedStepRollsBackEverything) {
  TempDir t;
  Store st = Store::open(t.path());
  SessionRecord s{.operator_name = "weighted_rmsnorm", .provider = "offline"};
  st.create_session(s);
  {
    auto step = st.begin_step();
    IterationRecord it{.session_id = s.id, .index = 0};
    step.add_iteration(it);
    CandidateRecord c{.iteration_id = it.id, .source_sha256 = step.put_blob("src")};
    step.add_candidate(c);
  } // no commit
  EXPECT_EQ(count_rows(t.path(), "SELECT count(*) FROM iterations"), 0);
  EXPECT_EQ(count_rows(t.path(), "SELECT count(*) FROM candidates"), 0);
  EXPECT_EQ(count_rows(t.path(), "SELECT count(*) FROM blobs"), 0);
}

TEST(StoreTest, ReferenceToBlobNeverPutIsRejected) {
  TempDir t;
  Store st = Store::open(t.path());
  SessionRecord s{.operator_name = "weighted_rmsnorm"};
  st.create_session(s);
  auto step = st.begin_step();
  IterationRecord it{.session_id = s.id, .index = 0};
  step.add_iteration(it);
  PromptRecord p{.iteration_id = it.id, .role = "full", .blob_sha256 = std::string(64, 'e')};
  EXPECT_THROW(step.add_prompt(p), StoreError);
}

TEST(StoreTest, FakeSessionRoundTripsThroughLoadSession) {
  TempDir t;
  Store st = Store::open(t.path());
  const auto id = testing::write_fake_session(st, 3);
  const SessionDetail d = st.load_session(id);
  EXPECT_EQ(d.session.provider, "offline");
  EXPECT_EQ(d.session.status, SessionStatus::kCompleted);
  ASSERT_EQ(d.iterations.size(), 3u);
  const auto& c0 = d.iterations[0].candidates.at(0);
  EXPECT_EQ(c0.gates.size(), static_cast<std::size_t>(testing::kGatesPerCandidate));
  EXPECT_EQ(c0.gate("correctness")->status, GateCode::kFail);
  EXPECT_EQ(c0.tool_calls.at(0).argv.at(2), "memcheck");
  EXPECT_EQ(st.blob(c0.candidate.source_sha256), "// kernel 0\n");
  ASSERT_NE(d.best_candidate(), nullptr);
  EXPECT_EQ(d.best_candidate()->candidate.id, d.iterations[2].candidates[0].candidate.id);
  EXPECT_EQ(d.tokens(), 3 * 150);
  const auto list = st.list_sessions();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].iterations, 3);
  EXPECT_DOUBLE_EQ(*list[0].best_speedup, 1.5);
  EXPECT_EQ(list[0].decision, Decision::kPromoted);
  EXPECT_EQ(d.to_json()["iterations"][0]["candidates"][0]["failing_cases"].size(), 1u);
}

TEST(StoreTest, SessionOfDeadOwnerBecomesInterruptedAndResumes) {
  TempDir t;
  std::int64_t id = 0;
  {
    Store st = Store::open(t.path());
    SessionRecord s{.operator_name = "weighted_rmsnorm",
                    .budget = 5,
                    .seed = 7,
                    .params = {{"base_url", "http://x"}}};
    id = st.create_session(s);
    testing::write_fake_iteration(st, id, 0, false);
    testing::write_fake_iteration(st, id, 1, false);
  }
  // Pretend the owner was a pid that no longer exists.
  {
    sqlite3* db = nullptr;
    sqlite3_open((t.path() + "/kloop.db").c_str(), &db);
    sqlite3_exec(db, "UPDATE sessions SET owner_pid = 999999999", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  Store st = Store::open(t.path());
  EXPECT_EQ(st.load_session(id).session.status, SessionStatus::kInterrupted);
  const ResumeInfo info = st.resume_session(id);
  EXPECT_EQ(info.last_committed_iteration, 1);
  EXPECT_EQ(info.committed_iterations, 2);
  EXPECT_EQ(info.session.seed, 7);
  EXPECT_EQ(info.session.params["base_url"], "http://x");
  EXPECT_EQ(st.load_session(id).session.status, SessionStatus::kRunning);
  EXPECT_THROW(st.resume_session(id), StoreError); // we own it now and are alive
}

TEST(StoreTest, LiveOwnerSessionStaysRunning) {
  TempDir t;
  Store st = Store::open(t.path());
  SessionRecord s{.operator_name = "weighted_rmsnorm"};
  st.create_session(s);
  Store again = Store::open(t.path());
  EXPECT_EQ(again.load_session(s.id).session.status, SessionStatus::kRunning);
}

TEST(StoreTest, VerifyReportsMissingAndAlteredBlobs) {
  TempDir t;
  Store st = Store::open(t.path());
  const auto id = testing::write_fake_session(st, 1);
  EXPECT_TRUE(st.verify().ok());
  const auto d = st.load_session(id);
  const auto& c = d.iterations[0].candidates[0].candidate;
  std::filesystem::remove(st.blobs().path(c.source_sha256));
  const std::string mpath = st.blobs().path(c.manifest_sha256);
  std::filesystem::permissions(mpath, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  std::ofstream(mpath, std::ios::binary | std::ios::app) << " ";
  const VerifyReport rep = st.verify();
  EXPECT_FALSE(rep.ok());
  EXPECT_EQ(rep.missing, std::vector<std::string>{c.source_sha256});
  EXPECT_EQ(rep.altered, std::vector<std::string>{c.manifest_sha256});
  EXPECT_EQ(rep.integrity, "ok");
}

TEST(StoreTest, UnknownSessionIdIsAClearError) {
  TempDir t;
  Store st = Store::open(t.path());
  try {
    st.load_session(42);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("no session 42"), std::string::npos) << e.what();
  }
}

// Replay on a machine without a GPU: the device gates come back not_run. That is "not re-run", not
// a change; a gate that did run with another status is a change.
TEST(StoreTest, ReplayTellsGatesThatCouldNotRunFromChangedOnes) {
  TempDir t;
  Store st = Store::open(t.path());
  const std::int64_t sid =
      testing::write_fake_session(st, 2); // 1 rejected at correctness, 2 passed
  const auto gates_now = [](const ReplayCandidate& c, GateCode correctness) {
    ReplayOutcome out;
    for (const auto& g : c.recorded_gates) {
      GateRecord now = g;
      now.reason.clear();
      if (g.name == "correctness") now.status = correctness;
      if (g.name == "sanitizer" || g.name == "benchmark" || g.name == "roofline")
        now.status = GateCode::kNotRun;
      if (now.status == GateCode::kNotRun) now.reason = "no CUDA device";
      out.gates.push_back(now);
    }
    return out;
  };
  // CPU-only: correctness not_run too; every verdict is pending_device_validation.
  const Reevaluate cpu_only = [&](const ReplayCandidate& c) {
    ReplayOutcome out = gates_now(c, GateCode::kNotRun);
    out.verdict = VerdictCode::kPendingDeviceValidation;
    return out;
  };
  const auto rows = replay_session(st, sid, &cpu_only);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_FALSE(r.changed) << r.candidate_id;
    EXPECT_TRUE(r.changed_gates.empty()) << r.changed_gates.front();
  }
  // The passing candidate: four recorded passes not re-run, each named with the reason.
  ASSERT_EQ(rows[1].not_rerun_gates.size(), 4u);
  EXPECT_EQ(rows[1].not_rerun_gates[0], "correctness: recorded pass, not re-run (no CUDA device)");
  // The rejected one: only its failed correctness gate had a result (the later gates were
  // recorded not_run, so nothing is lost there).
  ASSERT_EQ(rows[0].not_rerun_gates.size(), 1u);
  EXPECT_NE(rows[0].not_rerun_gates[0].find("correctness: recorded fail"), std::string::npos);
  const auto j = to_json(rows);
  EXPECT_EQ(j[1]["not_rerun_gates"].size(), 4u);
  EXPECT_FALSE(j[1]["changed"].get<bool>());

  // A stricter evaluator on a GPU: correctness of the passing candidate now fails.
  const Reevaluate stricter = [&](const ReplayCandidate& c) {
    ReplayOutcome out = gates_now(c, GateCode::kFail);
    out.verdict = VerdictCode::kReject;
    return out;
  };
  const auto rows2 = replay_session(st, sid, &stricter);
  EXPECT_FALSE(rows2[0].changed); // was rejected at correctness, still is
  EXPECT_TRUE(rows2[1].changed);
  ASSERT_EQ(rows2[1].changed_gates.size(), 1u);
  EXPECT_EQ(rows2[1].changed_gates[0], "correctness: pass -> fail");
}

// A session recorded without a GPU, replayed without a GPU: its device gates were not_run and
// still are. Nothing was re-checked, so they are listed as not re-run (the CLI exits 3), not
// skipped as unchanged; a candidate the record rejected keeps its skipped later gates unlisted.
TEST(StoreTest, ReplayListsGatesThatStillCouldNotRunAsNotRerun) {
  TempDir t;
  Store st = Store::open(t.path());
  const std::int64_t sid = testing::write_fake_session(st, 2, "offline", "builtin-v1",
                                                       /*with_device=*/false);
  // Record the passing candidate's device gates as not_run (a machine without a GPU) and one of
  // them as infra_error.
  Db("file:" + t.path() + "/kloop.db", SQLITE_OPEN_READWRITE, "test edit")
      .exec("UPDATE gate_results SET status = 4, reason = 'no device' WHERE candidate_id = 2 AND "
            "name IN ('correctness', 'sanitizer', 'benchmark'); UPDATE gate_results SET status = "
            "5 WHERE candidate_id = 2 AND name = 'roofline'; UPDATE candidates SET verdict = 2 "
            "WHERE id = 2");
  Store again = Store::open(t.path());
  const Reevaluate unchanged = [](const ReplayCandidate& c) {
    return ReplayOutcome{c.recorded_verdict, c.recorded_gates};
  };
  const auto rows = replay_session(again, sid, &unchanged);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[1].not_rerun_gates.size(), 4u);
  EXPECT_EQ(rows[1].not_rerun_gates[0], "correctness: recorded not_run, not re-run (no device)");
  EXPECT_EQ(rows[1].not_rerun_gates[3].rfind("roofline: recorded infra_error, not re-run", 0), 0u)
      << rows[1].not_rerun_gates[3];
  EXPECT_TRUE(rows[1].changed_gates.empty()) << rows[1].changed_gates.front();
  EXPECT_FALSE(rows[1].changed);
  EXPECT_FALSE(replay_found_regression(rows));
  // Candidate 1 was rejected at correctness: its later gates were skipped by the rejection.
  EXPECT_TRUE(rows[0].not_rerun_gates.empty()) << rows[0].not_rerun_gates.front();
}

// Replay where gates recorded not_run now run: new evidence, listed apart from changed results.
// Passing ones do not make the row changed; a failing one sets newly_failed (evidence against the
// candidate, `kloop replay` exits 1: replay_found_regression) unless the record already rejected
// it.
TEST(StoreTest, ReplayListsGatesRecordedNotRunThatRunNowAsNewlyRun) {
  TempDir t;
  Store st = Store::open(t.path());
  const std::int64_t sid =
      testing::write_fake_session(st, 2); // 1 rejected at correctness (later gates not_run)
  const auto later_gates_now = [](GateCode later) {
    return Reevaluate([later](const ReplayCandidate& c) {
      ReplayOutcome out{c.recorded_verdict, {}};
      for (GateRecord g : c.recorded_gates) {
        if (g.status == GateCode::kNotRun) g.status = later;
        out.gates.push_back(g);
      }
      return out;
    });
  };
  const Reevaluate passes = later_gates_now(GateCode::kPass);
  const auto rows = replay_session(st, sid, &passes);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[0].newly_run_gates.size(), 3u);
  EXPECT_EQ(rows[0].newly_run_gates[0], "sanitizer: recorded not_run, now pass");
  EXPECT_TRUE(rows[0].changed_gates.empty()) << rows[0].changed_gates.front();
  EXPECT_FALSE(rows[0].changed);
  EXPECT_FALSE(rows[0].newly_failed);
  EXPECT_TRUE(rows[1].newly_run_gates.empty());
  EXPECT_FALSE(replay_found_regression(rows));
  EXPECT_EQ(to_json(rows)[0]["newly_run_gates"].size(), 3u);

  const Reevaluate fails = later_gates_now(GateCode::kTimeout);
  const auto rows2 = replay_session(st, sid, &fails);
  ASSERT_EQ(rows2[0].newly_run_gates.size(), 3u);
  EXPECT_EQ(rows2[0].newly_run_gates[0], "sanitizer: recorded not_run, now timeout");
  // Recorded rejected already: a later gate failing now is listed but is no evidence against the
  // record (the CLI test ReplayListsNewlyRunGatesApartFromChangedOnes covers a pending candidate
  // whose newly run gates fail: exit 1).
  EXPECT_FALSE(rows2[0].newly_failed);
  EXPECT_TRUE(rows2[0].changed_gates.empty());
  EXPECT_FALSE(replay_found_regression(rows2));
  EXPECT_FALSE(to_json(rows2)[0]["newly_failed"].get<bool>());

  // Recorded not_run, still unable to finish now (infra_error): not re-run, not newly run.
  const Reevaluate infra = later_gates_now(GateCode::kInfraError);
  const auto rows3 = replay_session(st, sid, &infra);
  EXPECT_TRUE(rows3[0].newly_run_gates.empty());
  // Candidate 1 was recorded rejected: its later gates had no result and still have none.
  EXPECT_TRUE(rows3[0].not_rerun_gates.empty()) << rows3[0].not_rerun_gates.front();
  EXPECT_FALSE(replay_found_regression(rows3));

  // Recorded pass, infra_error now (a worker or sandbox that cannot start here): nothing was
  // re-checked, so not re-run (exit 3), never a changed result (exit 1).
  const Reevaluate broken = [](const ReplayCandidate& c) {
    ReplayOutcome out{c.recorded_verdict, {}};
    for (GateRecord g : c.recorded_gates) {
      if (g.name == "build") g.status = GateCode::kInfraError, g.reason = "no sandbox";
      out.gates.push_back(g);
    }
    return out;
  };
  const auto rows4 = replay_session(st, sid, &broken);
  ASSERT_EQ(rows4.size(), 2u);
  ASSERT_EQ(rows4[1].not_rerun_gates.size(), 1u);
  EXPECT_EQ(rows4[1].not_rerun_gates[0],
            "build: recorded pass, not re-run (infra_error) (no sandbox)");
  EXPECT_TRUE(rows4[1].changed_gates.empty()) << rows4[1].changed_gates.front();
  EXPECT_FALSE(rows4[1].changed);
  EXPECT_FALSE(replay_found_regression(rows4));
}

// `kloop sessions` and `kloop compare` report the same candidate's speed-up: the decided one, not
// a faster passing candidate that was not promoted.
TEST(StoreTest, SessionListShowsTheDecidedCandidatesSpeedup) {
  TempDir t;
  Store st = Store::open(t.path());
  const std::int64_t sid = testing::write_fake_session(st, 3); // candidate 3 promoted at 1.50x
  testing::write_fake_iteration(st, sid, 3, /*pass=*/true);    // passes at 1.75x, not decided
  const auto list = st.list_sessions();
  ASSERT_EQ(list.size(), 1u);
  ASSERT_TRUE(list[0].best_speedup.has_value());
  const auto detail = st.load_session(sid);
  ASSERT_NE(detail.best_candidate(), nullptr);
  EXPECT_DOUBLE_EQ(*list[0].best_speedup, *detail.best_candidate()->candidate.speedup);
  EXPECT_DOUBLE_EQ(*list[0].best_speedup, 1.5);
}

// `kloop compare`'s gate pass rates count the runs of a gate only: a gate that did not run (no
// device) is not a failure, and one that never ran has rate null ("not run" in the text).
TEST(StoreTest, CompareLeavesGatesThatDidNotRunOutOfThePassRate) {
  TempDir t;
  std::int64_t sid = 0;
  {
    Store st = Store::open(t.path());
    sid = testing::write_fake_session(st, 2); // iteration 1 fails a gate, iteration 2 passes all
  }
  {
    sqlite3* db = nullptr;
    sqlite3_open((t.path() + "/kloop.db").c_str(), &db);
    // every sanitizer run, and the first candidate's benchmark run, did not run
    sqlite3_exec(db,
                 "UPDATE gate_results SET status = 4 WHERE name = 'sanitizer'; UPDATE "
                 "gate_results SET status = 4 WHERE name = 'benchmark' AND candidate_id = "
                 "(SELECT MIN(candidate_id) FROM gate_results)",
                 nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  Store st = Store::open(t.path());
  const nlohmann::json cmp = compare_sessions(st, {sid});
  const nlohmann::json& rates = cmp["groups"][0]["sessions"][0]["gate_pass_rate"];
  EXPECT_TRUE(rates["sanitizer"].is_null()) << rates.dump();
  EXPECT_DOUBLE_EQ(rates["benchmark"].get<double>(), 1.0) << rates.dump(); // 1 of 1 that ran
  EXPECT_TRUE(cmp["groups"][0]["aggregate"]["gate_pass_rate"]["sanitizer"].is_null());
  EXPECT_NE(format_compare(cmp).find("sanitizer=not run"), std::string::npos)
      << format_compare(cmp);
}

} // namespace
} // namespace kloop::store
