// Row chains (store/chain.h) and store merge (Store::merge_from): an edited, deleted or inserted
// row is found, a chain rewritten after signing no longer holds the receipt's head, a pre-chain
// store still opens, shows and verifies (as unchained), and merging renumbers sessions, records
// their origin, keeps chains valid and holdout suites sealed, and adds nothing the second time.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "holdout/holdout.h"
#include "kernels/rmsnorm/operator.h"
#include "store/chain.h"
#include "store/error.h"
#include "store/receipt.h"
#include "store/schema.h"
#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void raw_exec(const std::string& dir, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/kloop.db").c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "") << " in " << sql;
  sqlite3_close(db);
}

std::int64_t scalar(const std::string& dir, const std::string& sql) {
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

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    s += x + "\n";
  return s;
}

// A store with one complete fake session (fixture.h: written through the Store API as the loop
// writes one), returning its directory.
std::string store_with_session(const TempDir& t, const std::string& name, int iterations = 2) {
  const std::string dir = t.path() + "/" + name;
  Store st = Store::open(dir);
  testing::write_fake_session(st, iterations);
  return dir;
}

// The schema a kloop before row chaining wrote (migration 1 only): the chain tables and the uid
// column removed, user_version back to 1. The rows are those the Store API wrote.
void make_pre_chain(const std::string& dir) {
  raw_exec(dir, "DROP TABLE row_chain; DROP TABLE session_origins; DROP INDEX sessions_uid; "
                "ALTER TABLE sessions DROP COLUMN uid; PRAGMA user_version = 1;");
}

TEST(ChainTest, EverySessionRowIsChainedAndAnUntouchedStoreVerifies) {
  TempDir t;
  const std::string dir = store_with_session(t, "s");
  Store st = Store::open(dir, OpenMode::kReadOnly);
  const auto rep = st.verify();
  EXPECT_TRUE(rep.ok()) << joined(rep.chains.problems);
  EXPECT_EQ(rep.chains.chained, 1);
  EXPECT_TRUE(rep.chains.unchained.empty());
  // Every row of every session table is in a link (an insert), and updates added links.
  std::int64_t rows = 0;
  for (const auto t2 : chained_tables())
    rows += scalar(dir, "SELECT count(*) FROM " + std::string(t2));
  EXPECT_EQ(scalar(dir, "SELECT count(DISTINCT tbl || ':' || row_id) FROM row_chain"), rows);
  const auto head = st.chain_head(1);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->links, scalar(dir, "SELECT count(*) FROM row_chain WHERE session_id = 1"));
}

TEST(ChainTest, AnEditedSpeedupOrGateStatusIsFound) {
  TempDir t;
  const std::string dir = store_with_session(t, "s");
  raw_exec(dir, "UPDATE candidates SET speedup = 9.99 WHERE id = 1");
  raw_exec(dir, "UPDATE gate_results SET status = 0 WHERE id = (SELECT max(id) FROM "
                "gate_results WHERE status != 0 AND candidate_id = 1)");
  Store st = Store::open(dir, OpenMode::kReadOnly);
  const auto rep = st.verify();
  EXPECT_FALSE(rep.ok());
  const std::string all = joined(rep.chains.problems);
  EXPECT_NE(all.find("candidates row 1 was edited"), std::string::npos) << all;
  EXPECT_NE(all.find("gate_results row"), std::string::npos) << all;
}

TEST(ChainTest, ADeletedOrInsertedRowOrAnEditedLinkIsFound) {
  TempDir t;
  const std::string dir = store_with_session(t, "s");
  raw_exec(dir, "DELETE FROM test_cases WHERE id = 1");
  raw_exec(dir, "INSERT INTO gate_results (candidate_id, ordinal, name, status, reason, "
                "evidence_json) VALUES (1, 99, 'extra', 0, '', '{}')");
  {
    Store st = Store::open(dir, OpenMode::kReadOnly);
    const std::string all = joined(st.verify().chains.problems);
    EXPECT_NE(all.find("test_cases row 1 (chain link"), std::string::npos) << all;
    EXPECT_NE(all.find("was deleted"), std::string::npos) << all;
    EXPECT_NE(all.find("is in no chain link (inserted after the fact)"), std::string::npos) << all;
  }
  raw_exec(dir, "UPDATE row_chain SET row_sha256 = '" + std::string(64, '0') +
                    "' WHERE session_id = 1 AND seq = 3");
  Store st = Store::open(dir, OpenMode::kReadOnly);
  const std::string all = joined(st.verify().chains.problems);
  EXPECT_NE(all.find("chain link 3"), std::string::npos) << all;
  EXPECT_NE(all.find("the chain was edited"), std::string::npos) << all;
}

TEST(ChainTest, AChainRewrittenAfterSigningNoLongerHoldsTheReceiptsHead) {
  TempDir t;
  const std::string dir = store_with_session(t, "s");
  const auto kp = generate_keypair();
  nlohmann::json receipt;
  {
    Store st = Store::open(dir);
    receipt = sign_session_receipt(st, 1, kp, "alice");
  }
  const auto& rc = receipt["payload"]["row_chain"];
  ASSERT_TRUE(rc.is_object()) << rc.dump();
  EXPECT_EQ(rc["head_sha256"].get<std::string>().size(), 64u);
  // An editor who changes a speed-up and rebuilds the whole chain with kloop's own code: every
  // link is consistent again, but the signed head is gone.
  raw_exec(dir, "UPDATE candidates SET speedup = 9.99 WHERE id = 1");
  {
    Store st = Store::open(dir);
    EXPECT_FALSE(st.verify().ok());
  }
  struct L {
    std::string tbl, kind;
    std::int64_t row;
  };
  std::vector<L> links;
  {
    sqlite3* db = nullptr;
    sqlite3_open((dir + "/kloop.db").c_str(), &db);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT tbl, kind, row_id FROM row_chain WHERE session_id = 1 ORDER BY "
                       "seq",
                       -1, &s, nullptr);
    while (sqlite3_step(s) == SQLITE_ROW)
      links.push_back({reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                       reinterpret_cast<const char*>(sqlite3_column_text(s, 1)),
                       sqlite3_column_int64(s, 2)});
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  raw_exec(dir, "DELETE FROM row_chain WHERE session_id = 1");
  {
    Db db("file:" + dir + "/kloop.db", SQLITE_OPEN_READWRITE, "rechain");
    for (const auto& l : links)
      chain_row(db, l.tbl, l.row, l.kind == "insert" ? LinkKind::kInsert : LinkKind::kUpdate);
  }
  Store st = Store::open(dir, OpenMode::kReadOnly);
  const auto rep = st.verify();
  const std::string all = joined(rep.chains.problems);
  ASSERT_EQ(rep.chains.problems.size(), 1u) << all;
  EXPECT_NE(all.find("receipt 1 was signed over chain head"), std::string::npos) << all;
}

TEST(ChainTest, APreChainStoreMigratesOpensShowsAndIsReportedUnchained) {
  TempDir t;
  const std::string dir = store_with_session(t, "old");
  make_pre_chain(dir);
  ASSERT_EQ(scalar(dir, "PRAGMA user_version"), 1);
  {
    Store ro = Store::open(dir, OpenMode::kReadOnly); // read as it is: show, replay, verify
    EXPECT_EQ(ro.load_session(1).iterations.size(), 2u);
    EXPECT_EQ(ro.list_sessions().size(), 1u);
    const auto rep = ro.verify();
    EXPECT_TRUE(rep.ok()) << joined(rep.chains.problems);
    EXPECT_EQ(rep.chains.unchained, std::vector<std::int64_t>{1});
  }
  EXPECT_EQ(scalar(dir, "PRAGMA user_version"), 1); // a read changes nothing
  Store st = Store::open(dir);                      // migrates
  EXPECT_EQ(scalar(dir, "PRAGMA user_version"), schema_version());
  const auto d = st.load_session(1);
  EXPECT_EQ(d.iterations.size(), 2u);
  EXPECT_FALSE(d.chain_head);
  const auto rep = st.verify();
  EXPECT_TRUE(rep.ok()) << joined(rep.chains.problems);
  EXPECT_EQ(rep.chains.unchained, std::vector<std::int64_t>{1});
  EXPECT_EQ(rep.chains.chained, 0);
  const auto payload = build_receipt_payload(d, receipt_manifest(st, d), "a", "k");
  EXPECT_TRUE(payload["row_chain"].is_string());
  // Resumed after the migration: its new links are checked, its old rows are not counted as
  // inserted.
  st.finish_session(1, SessionStatus::kCompleted, VerdictCode::kPass);
  const auto again = st.verify();
  EXPECT_TRUE(again.ok()) << joined(again.chains.problems);
  EXPECT_EQ(again.chains.partially_chained, 1);
}

// ---------------------------------------------------------------- merge

TEST(MergeTest, SessionsAreRenumberedWithOriginAndTheirChainsStayValid) {
  TempDir t;
  const std::string a = store_with_session(t, "a"), b = store_with_session(t, "b", 3);
  const std::string out = t.path() + "/out";
  Store st = Store::open(out);
  const auto ra = st.merge_from(a);
  const auto rb = st.merge_from(b);
  ASSERT_EQ(ra.merged.size(), 1u);
  ASSERT_EQ(rb.merged.size(), 1u);
  EXPECT_EQ(ra.merged[0], (std::pair<std::int64_t, std::int64_t>{1, 1}));
  EXPECT_EQ(rb.merged[0], (std::pair<std::int64_t, std::int64_t>{1, 2}));
  EXPECT_GT(ra.blobs_copied, 0);
  const auto d2 = st.load_session(2);
  EXPECT_EQ(d2.iterations.size(), 3u);
  const auto rep = st.verify();
  EXPECT_TRUE(rep.ok()) << joined(rep.chains.problems);
  EXPECT_EQ(rep.chains.chained, 2);
  // The head is the source's: the same rows hash alike under new row ids.
  Store src = Store::open(b, OpenMode::kReadOnly);
  EXPECT_EQ(st.chain_head(2)->sha256, src.chain_head(1)->sha256);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM session_origins"), 2);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM session_origins WHERE session_id = 2 AND "
                        "json_extract(origin_json, '$.session_id') = 1 AND "
                        "json_extract(origin_json, '$.store') = '" +
                            fs::weakly_canonical(b).string() + "'"),
            1);
}

TEST(MergeTest, MergingTheSameStoreTwiceAddsNothing) {
  TempDir t;
  const std::string a = store_with_session(t, "a");
  const std::string out = t.path() + "/out";
  Store st = Store::open(out);
  st.merge_from(a);
  const auto sessions = scalar(out, "SELECT count(*) FROM sessions");
  const auto rows = scalar(out, "SELECT count(*) FROM test_cases");
  const auto links = scalar(out, "SELECT count(*) FROM row_chain");
  const auto again = st.merge_from(a);
  EXPECT_TRUE(again.merged.empty());
  ASSERT_EQ(again.skipped.size(), 1u);
  EXPECT_NE(again.skipped[0].find("already here as session 1"), std::string::npos);
  EXPECT_EQ(again.blobs_copied, 0);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM sessions"), sessions);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM test_cases"), rows);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM row_chain"), links);
  // A merged store merged into another is the same session again (its uid travels).
  const std::string out2 = t.path() + "/out2";
  Store st2 = Store::open(out2);
  EXPECT_EQ(st2.merge_from(out).merged.size(), 1u);
  EXPECT_TRUE(st2.merge_from(a).merged.empty());
}

TEST(MergeTest, APreChainStoreMergesOnceAndStaysUnchained) {
  TempDir t;
  const std::string a = store_with_session(t, "a");
  make_pre_chain(a);
  const std::string out = t.path() + "/out";
  Store st = Store::open(out);
  EXPECT_EQ(st.merge_from(a).merged.size(), 1u);
  EXPECT_TRUE(st.merge_from(a).merged.empty());
  EXPECT_EQ(scalar(a, "PRAGMA user_version"), 1); // the source was not migrated
  const auto rep = st.verify();
  EXPECT_TRUE(rep.ok());
  EXPECT_EQ(rep.chains.unchained.size(), 1u);
}

TEST(MergeTest, HoldoutSuitesAreCopiedSealedUnderTheNewSessionId) {
  TempDir t;
  const std::string a = t.path() + "/a";
  std::string commitment;
  {
    Store st = Store::open(a);
    testing::write_fake_session(st, 1);
    auto suite = holdout::SealedSuite::create(fs::path(a) / "holdout", "session-1",
                                              rmsnorm::operator_instance(), 42);
    commitment = suite.commitment();
    auto step = st.begin_step();
    HoldoutCommitmentRecord c;
    c.session_id = 1;
    c.commitment_sha256 = commitment;
    c.suite_version = std::string(rmsnorm::operator_instance().holdout_version());
    step.add_holdout_commitment(c);
    step.commit();
  }
  const std::string out = t.path() + "/out";
  Store st = Store::open(out);
  testing::write_fake_session(st, 1); // session 1 exists here already
  const auto rep = st.merge_from(a);
  ASSERT_EQ(rep.merged.size(), 1u);
  EXPECT_EQ(rep.merged[0].second, 2);
  EXPECT_EQ(rep.holdout_files, 1);
  const fs::path sealed = fs::path(out) / "holdout" / "session-2.sealed";
  ASSERT_TRUE(fs::exists(sealed));
  struct stat sb {};
  ASSERT_EQ(::stat(sealed.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  auto copy = holdout::SealedSuite::open(fs::path(out) / "holdout", "session-2", commitment);
  EXPECT_FALSE(copy.retired());
  EXPECT_EQ(copy.commitment(), commitment);
  EXPECT_THROW(copy.reveal_seed(), holdout::HoldoutError); // still sealed
}

TEST(MergeTest, IncompatibleOrDamagedSourcesAreRefusedWithNothingMerged) {
  TempDir t;
  const std::string out = t.path() + "/out";
  Store st = Store::open(out);
  const std::string newer = store_with_session(t, "newer");
  raw_exec(newer, "PRAGMA user_version = 999");
  try {
    st.merge_from(newer);
    FAIL() << "a newer schema merged";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("newer than this kloop"), std::string::npos) << e.what();
  }
  const std::string extra = store_with_session(t, "extra");
  raw_exec(extra, "ALTER TABLE candidates ADD COLUMN flux REAL");
  try {
    st.merge_from(extra);
    FAIL() << "an unknown column merged";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("candidates.flux"), std::string::npos) << e.what();
  }
  const std::string edited = store_with_session(t, "edited");
  raw_exec(edited, "UPDATE candidates SET speedup = 5 WHERE id = 1");
  EXPECT_THROW(st.merge_from(edited), DamagedStore);
  const std::string foreign = t.path() + "/foreign";
  fs::create_directories(foreign);
  raw_exec(foreign, "CREATE TABLE photos (id INTEGER)");
  EXPECT_THROW(st.merge_from(foreign), StoreError);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM sessions"), 0);
}

} // namespace
} // namespace kloop::store
