// Bad input: corrupt, foreign and newer databases, missing blobs, a read-only store and a full
// disk each give a clear StoreError, never a crash, and lose nothing already committed.
// Integration tier: the read-only and full-disk cases run in forked children (death tests).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>

#include "store/error.h"
#include "store/schema.h"
#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

using testing::TempDir;

std::string open_error(const std::string& dir, OpenMode mode = OpenMode::kReadWrite) {
  try {
    Store st = Store::open(dir, mode);
  } catch (const StoreError& e) {
    return e.what();
  }
  return "";
}

void raw_exec(const std::string& db_path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST(StoreBadInputTest, CorruptDatabaseIsAClearError) {
  TempDir t;
  std::ofstream(t.path() + "/kloop.db", std::ios::binary) << std::string(8192, '\x5a');
  const std::string msg = open_error(t.path());
  EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kloop.db"), std::string::npos) << msg;
}

TEST(StoreBadInputTest, ForeignSqliteFileIsRefused) {
  TempDir t;
  raw_exec(t.path() + "/kloop.db", "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)");
  const std::string msg = open_error(t.path());
  EXPECT_NE(msg.find("not a kloop store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another --store"), std::string::npos) << msg;
}

TEST(StoreBadInputTest, ZeroByteDatabaseOpenedForReadingSaysItIsEmpty) {
  TempDir t;
  std::ofstream(t.path() + "/kloop.db", std::ios::binary).flush(); // 0 bytes
  const std::string msg = open_error(t.path(), OpenMode::kReadOnly);
  EXPECT_NE(msg.find("empty database"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("migrating"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kloop optimize"), std::string::npos) << msg;
  EXPECT_EQ(open_error(t.path()), ""); // writable: it becomes a new, empty store
}

TEST(StoreBadInputTest, NewerSchemaIsRefusedNamingBothVersions) {
  TempDir t;
  { Store st = Store::open(t.path()); }
  raw_exec(t.path() + "/kloop.db", "PRAGMA user_version = 7");
  ASSERT_LT(schema_version(), 7);
  EXPECT_EQ(open_error(t.path()),
            fmt::format("store: schema version 7 is newer than this kloop ({}); upgrade kloop or "
                        "use another --store",
                        schema_version()));
}

TEST(StoreBadInputTest, MissingBlobIsAClearErrorAndRowsStayReadable) {
  TempDir t;
  Store st = Store::open(t.path());
  const auto id = testing::write_fake_session(st, 1);
  const auto d = st.load_session(id);
  const std::string sha = d.iterations[0].candidates[0].candidate.source_sha256;
  std::filesystem::remove(st.blobs().path(sha));
  try {
    st.blob(sha);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  EXPECT_EQ(st.load_session(id).iterations.size(), 1u);
  EXPECT_EQ(st.verify().missing.size(), 1u);
}

// Runs in a forked child: drops root (root ignores permissions) and opens the store.
void read_only_child(const std::string& dir) {
  if (::geteuid() == 0 && ::setuid(65534) != 0) std::_Exit(10);
  const std::string msg = open_error(dir);
  if (msg.find("read-only") == std::string::npos) std::_Exit(11);
  Store st = Store::open(dir, OpenMode::kReadOnly);
  if (st.list_sessions().size() != 1) std::_Exit(12);
  if (st.load_session(1).iterations.size() != 1) std::_Exit(13);
  std::_Exit(0);
}

TEST(StoreBadInputTest, ReadOnlyStoreRefusesWritesButStaysReadable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir t;
  const std::string dir = t.path() + "/s";
  {
    Store st = Store::open(dir);
    testing::write_fake_session(st, 1);
  }
  namespace fs = std::filesystem;
  fs::permissions(t.path(), fs::perms(0755));
  for (auto& e : fs::recursive_directory_iterator(dir))
    fs::permissions(e.path(), e.is_directory() ? fs::perms(0555) : fs::perms(0444));
  fs::permissions(dir, fs::perms(0555));
  EXPECT_EXIT(read_only_child(dir), ::testing::ExitedWithCode(0), "");
  fs::permissions(dir, fs::perms(0755));
  Store st = Store::open(dir);
  EXPECT_TRUE(st.verify().ok());
}

// Runs in a forked child under a file-size limit just above the current files.
void full_disk_child(const std::string& dir, rlim_t limit) {
  std::signal(SIGXFSZ, SIG_IGN); // the write fails with EFBIG instead of killing us
  const rlimit rl{limit, limit};
  if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) std::_Exit(20);
  Store st = Store::open(dir);
  try {
    auto step = st.begin_step();
    step.put_blob(std::string(4u << 20, 'x'));
    step.commit();
    std::_Exit(21);
  } catch (const StoreError& e) {
    if (std::string(e.what()).find("full") == std::string::npos) std::_Exit(22);
  }
  try {
    auto step = st.begin_step();
    IterationRecord it{.session_id = 1, .index = 99};
    for (int i = 0; i < 20; ++i)
      it.notes[std::to_string(i)] = std::string(100000, 'n');
    step.add_iteration(it);
    step.commit();
    std::_Exit(23);
  } catch (const StoreError& e) {
    if (std::string(e.what()).find("full") == std::string::npos) std::_Exit(24);
  }
  std::_Exit(0);
}

TEST(StoreBadInputTest, FullDiskIsAClearErrorAndKeepsCommittedSteps) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir t;
  {
    Store st = Store::open(t.path());
    testing::write_fake_session(st, 2);
  } // closing checkpoints the WAL into kloop.db
  const auto db_size = std::filesystem::file_size(t.path() + "/kloop.db");
  EXPECT_EXIT(full_disk_child(t.path(), db_size + 256 * 1024), ::testing::ExitedWithCode(0), "");
  Store st = Store::open(t.path());
  const VerifyReport rep = st.verify();
  EXPECT_TRUE(rep.ok()) << rep.integrity;
  const auto d = st.load_session(1);
  EXPECT_EQ(d.iterations.size(), 2u);
  EXPECT_EQ(d.session.status, SessionStatus::kCompleted);
}

} // namespace
} // namespace kloop::store
