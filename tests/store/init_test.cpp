// Store initialisation (issue 22, items 6 and 7) and `store verify`'s orphan files (item 11):
// schema creation by several processes at once, refusal to create a database over the leftovers
// of a lost one, and blob files no row registers.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "store/error.h"
#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// `n` processes open (creating) the store at `dir` at the same moment (released together through
// a pipe) and each records one session; returns how many failed, with their messages in `errors`.
int open_concurrently(const std::string& dir, int n, std::string& errors) {
  int release[2], report[2];
  if (::pipe(release) != 0 || ::pipe(report) != 0) return n;
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(release[1]);
      char go = 0;
      (void)!::read(release[0], &go, 1); // returns at EOF: every child starts at once
      int rc = 0;
      try {
        Store st = Store::open(dir);
        SessionRecord s{.operator_name = "weighted_rmsnorm", .provider = "offline", .budget = 1};
        st.create_session(s);
      } catch (const std::exception& e) {
        const std::string line = std::string(e.what()) + "\n";
        (void)!::write(report[1], line.data(), line.size());
        rc = 1;
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(release[0]);
  ::close(release[1]); // EOF releases them
  ::close(report[1]);
  int failed = 0;
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  char buf[4096];
  for (ssize_t got; (got = ::read(report[0], buf, sizeof buf)) > 0;)
    errors.append(buf, static_cast<std::size_t>(got));
  ::close(report[0]);
  return failed;
}

TEST(StoreInitTest, ProcessesCreatingOneNewStoreAtOnceAllSucceed) {
  TempDir t;
  for (int round = 0; round < 12; ++round) {
    const std::string dir = t.path() + "/s" + std::to_string(round);
    std::string errors;
    EXPECT_EQ(open_concurrently(dir, 6, errors), 0) << "round " << round << ": " << errors;
    Store st = Store::open(dir, OpenMode::kReadOnly);
    EXPECT_EQ(st.list_sessions().size(), 6u) << "round " << round;
  }
}

// Writes one committed step (a blob and a session) and a sealed-holdout file, as a real session
// leaves them.
void make_used_store(const std::string& dir) {
  Store st = Store::open(dir);
  SessionRecord s{.operator_name = "weighted_rmsnorm", .provider = "offline", .budget = 1};
  st.create_session(s);
  auto step = st.begin_step();
  IterationRecord it{.session_id = s.id, .index = 0, .wall_ms = 1};
  step.put_blob("a candidate");
  step.add_iteration(it);
  step.commit();
  fs::create_directories(dir + "/holdout");
  std::ofstream(dir + "/holdout/session-1.sealed") << "sealed";
}

TEST(StoreInitTest, RefusesToCreateADatabaseOverTheLeftoversOfALostOne) {
  TempDir t;
  const std::string dir = t.path() + "/s";
  make_used_store(dir);
  for (const char* f : {"/kloop.db-wal", "/kloop.db-shm"})
    fs::remove(dir + f);
  fs::resize_file(dir + "/kloop.db", 0); // the database lost: a zero-byte file
  try {
    Store::open(dir);
    FAIL() << "opened over leftovers";
  } catch (const DamagedStore& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("blobs/, holdout/"), std::string::npos) << what;
    EXPECT_NE(what.find("kloop.db is empty (0 bytes)"), std::string::npos) << what;
  }
  EXPECT_EQ(fs::file_size(dir + "/kloop.db"), 0u);
  fs::remove(dir + "/kloop.db"); // the database gone altogether
  EXPECT_THROW(Store::open(dir), DamagedStore);
  EXPECT_FALSE(fs::exists(dir + "/kloop.db"));
  // Without leftovers a zero-byte kloop.db is an empty store that kloop may initialise.
  const std::string fresh = t.path() + "/fresh";
  fs::create_directories(fresh + "/holdout"); // an empty holdout/ holds nothing to adopt
  std::ofstream(fresh + "/kloop.db").close();
  EXPECT_NO_THROW(Store::open(fresh));
}

TEST(StoreInitTest, AStoreInAMissingFolderIsNoSuchStore) {
  TempDir t;
  EXPECT_THROW(Store::open(t.path() + "/missing/s"), NoSuchStore);
  EXPECT_FALSE(fs::exists(t.path() + "/missing"));
}

TEST(StoreVerifyTest, ReportsBlobFilesNoRowRegistersAsOrphansNotDamage) {
  TempDir t;
  const std::string dir = t.path() + "/s";
  make_used_store(dir);
  std::string orphan;
  {
    Store st = Store::open(dir);
    auto step = st.begin_step();
    orphan = step.put_blob("written by a step that never committed");
  } // rolled back: the file stays, the row does not
  Store st = Store::open(dir, OpenMode::kReadOnly);
  const auto rep = st.verify();
  EXPECT_TRUE(rep.ok());
  ASSERT_EQ(rep.orphans.size(), 1u);
  EXPECT_EQ(rep.orphans[0], orphan.substr(0, 2) + "/" + orphan.substr(2));
  EXPECT_EQ(rep.orphan_bytes, 38);
  EXPECT_TRUE(rep.missing.empty());
}

} // namespace
} // namespace kloop::store
