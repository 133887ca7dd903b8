// README.md "Exit codes", case by case (issue 22 item 10): every case the table documents is run
// here with the real kloop executable and must exit with the table's code. The cases are listed in
// the table's order; a case that needs a GPU (a promoted session, a passing candidate) is checked
// where a device is present and says so here. Stores come from real kloop runs, or from the
// store's own API (tests/store/fixture.h) where a promoted session is needed on a CPU machine.
#include <sys/stat.h>

#include <sqlite3.h>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/operator.h"
#include "mutation/store_report.h"
#include "store/store.h"
#include "tests/e2e/e2e_support.h"
#include "tests/store/fixture.h"

namespace kloop::e2e {
namespace {

struct Case {
  int code;
  std::string what;
  std::vector<std::string> args;
};

class ExitCodesTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fresh_dir("exit"));
    const fs::path d = *dir_;
    // A CPU-only optimize session (pending device validation) and a promoted session written
    // through the Store API, plus one checker-coverage session, in one store.
    run_ = new evaluator::ToolCall(
        kloop_run({"optimize", "rmsnorm", "--budget", "1", "--store", (d / "s").string()}));
    {
      auto st = store::Store::open((d / "s").string());
      store::testing::write_fake_session(st, 2); // session 2: promoted
      mutation::CoverageReport empty;
      mutation::store_report(st, empty, {"test", "test", 1, &rmsnorm::operator_instance()});
    }
    fs::create_directories(d / "cand_good");
    write_file(d / "cand_good" / "kernel.cu", good_source());
    write_file(d / "cand_good" / "manifest.json", good_manifest());
    fs::create_directories(d / "cand_overflow");
    write_file(d / "cand_overflow" / "kernel.cu", good_source());
    std::string m = good_manifest();
    m.replace(m.find("256"), 3, "1e999");
    write_file(d / "cand_overflow" / "manifest.json", m);
    fs::create_directories(d / "cand_notjson");
    write_file(d / "cand_notjson" / "kernel.cu", good_source());
    write_file(d / "cand_notjson" / "manifest.json", "{not json");
    const auto gen = kloop_run({"keys", "generate", "--out", (d / "key.json").string()});
    const json key = json::parse(read_file(d / "key.json"));
    write_file(d / "registry.json", json{{key["key_id"], key["public_key"]}}.dump());
    fs::copy_file(d / "key.json", d / "open_key.json");
    fs::permissions(d / "open_key.json", fs::perms(0644));
    write_file(d / "notjson.txt", "hello");
    write_file(d / "rollout.json", json{{"feature_flag_and_scope", "flag"},
                                        {"healthy_worker_recovery_and_reference_target", "ref"},
                                        {"revalidation_policy", "weekly"}}
                                       .dump());
    fs::create_directories(d / "inputs");
    fs::create_directories(d / "nodb");
    fs::create_directories(d / "corrupt");
    write_file(d / "corrupt" / "kloop.db", std::string(8192, 'Z'));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete run_;
  }
  static fs::path d() { return *dir_; }
  static std::string s() { return (*dir_ / "s").string(); }

  // Runs each case and expects its documented exit code, and no raw parser message.
  static void expect_codes(const std::vector<Case>& cases,
                           const std::map<std::string, std::string>& env = {}) {
    for (const auto& c : cases) {
      const auto r = kloop_run(c.args, 240, env);
      EXPECT_EQ(r.exit_code, c.code) << c.what << "\n" << r.stdout_text << r.stderr_text;
      EXPECT_EQ(r.stderr_text.find("json.exception"), std::string::npos) << c.what;
    }
  }

  static fs::path* dir_;
  static evaluator::ToolCall* run_;
};
fs::path* ExitCodesTest::dir_ = nullptr;
evaluator::ToolCall* ExitCodesTest::run_ = nullptr;

bool device_present(const evaluator::ToolCall& optimize_run) {
  return optimize_run.exit_code == 0 || optimize_run.exit_code == 1;
}

// 0: promoted / passed / command succeeded.
TEST_F(ExitCodesTest, ZeroSucceeded) {
  if (device_present(*run_)) {
    EXPECT_EQ(
        kloop_run({"evaluate", "rmsnorm", "--candidate", (d() / "cand_good").string()}).exit_code,
        0)
        << "evaluate of a passing candidate";
    if (run_->exit_code == 0) { // the one-iteration main job promoted
      EXPECT_EQ(kloop_run({"export", "1", "--torch", (d() / "pkg-gpu").string(), "--store", s()})
                    .exit_code,
                0)
          << "export of a promoted session";
    }
  } else {
    std::printf("no device here: `optimize` promoted, `evaluate` passed and `export` of a promoted "
                "session (exit 0) are checked on the GPU machine (scripts/device-run.sh); here "
                "optimize and evaluate are pending (exit 3)\n");
  }
  const std::string out = (d() / "out").string();
  expect_codes({
      {0, "sessions", {"sessions", "--store", s()}},
      {0, "show", {"show", "1", "--store", s()}},
      {0, "show --json", {"show", "1", "--json", "--store", s()}},
      {0, "compare", {"compare", "1", "2", "--store", s()}},
      {0, "report --html", {"report", "2", "--html", out + "-r.html", "--store", s()}},
      {0, "store verify of an intact store", {"store", "verify", "--store", s()}},
      {0, "keys generate", {"keys", "generate", "--out", out + "-key.json"}},
      {0,
       "receipt sign of a promoted session",
       {"receipt", "sign", "2", "--key", (d() / "key.json").string(), "--reviewer", "r", "--out",
        out + "-receipt.json", "--store", s()}},
      {0,
       "receipt verify of a valid receipt",
       {"receipt", "verify", out + "-receipt.json", "--keys", (d() / "registry.json").string()}},
  });
}

// 1: rejected: a hard gate failed.
TEST_F(ExitCodesTest, OneRejected) {
  FakeOpenAi server({completion_body("a reply without code blocks")});
  const std::string tampered = (d() / "tampered.json").string();
  {
    const auto signed_receipt =
        kloop_run({"receipt", "sign", "2", "--key", (d() / "key.json").string(), "--reviewer", "r",
                   "--store", s()});
    json r = json::parse(signed_receipt.stdout_text);
    r["payload"]["reviewer"] = "someone else";
    write_file(tampered, r.dump());
  }
  expect_codes({
      {1,
       "optimize: no candidate passed (a format failure)",
       {"optimize", "rmsnorm", "--provider", "openai", "--base-url", server.base_url(), "--budget",
        "1", "--store", (d() / "s1").string()}},
      {1,
       "evaluate: a manifest number that overflows a double fails the contract gate",
       {"evaluate", "rmsnorm", "--candidate", (d() / "cand_overflow").string()}},
      {1,
       "evaluate: a manifest that is not JSON fails the contract gate",
       {"evaluate", "rmsnorm", "--candidate", (d() / "cand_notjson").string()}},
      {1,
       "receipt verify of a receipt that does not verify",
       {"receipt", "verify", tampered, "--keys", (d() / "registry.json").string()}},
      // Recorded candidate 2..: its source ("// kernel 0") defines no entry point, so the
      // current contract gate fails where the record says pass: a changed result.
      {1, "replay that finds a changed gate", {"replay", "2", "--store", s()}},
  });
  std::printf("`shadow` divergence and `checker-coverage --check-record` below the record (exit "
              "1) need the GPU machine\n");
}

// 2: usage error.
TEST_F(ExitCodesTest, TwoUsageError) {
  const std::string missing = (d() / "missing" / "x").string();
  expect_codes({
      {2, "a bad flag value", {"optimize", "rmsnorm", "--budget", "0", "--store", s()}},
      {2, "NaN for a float option", {"optimize", "rmsnorm", "--worker-timeout", "nan"}},
      {2, "an unknown flag", {"sessions", "--frobnicate", "--store", s()}},
      {2, "unknown operator", {"optimize", "softmaxx", "--store", (d() / "s2").string()}},
      {2, "unreadable candidate folder", {"evaluate", "rmsnorm", "--candidate", missing}},
      {2,
       "missing API key",
       {"optimize", "rmsnorm", "--provider", "anthropic", "--store", (d() / "s2").string()}},
      {2, "--store missing", {"sessions", "--store", missing}},
      {2, "--store not a folder", {"show", "1", "--store", (d() / "notjson.txt").string()}},
      {2, "--store without kloop.db", {"sessions", "--store", (d() / "nodb").string()}},
      {2, "a session ID that names no session", {"show", "99", "--store", s()}},
      {2, "--resume of no session", {"optimize", "rmsnorm", "--resume", "99", "--store", s()}},
      {2,
       "a file on the command line that cannot be read",
       {"receipt", "verify", missing, "--keys", (d() / "registry.json").string()}},
      {2,
       "a file on the command line that is not JSON",
       {"receipt", "verify", (d() / "notjson.txt").string(), "--keys",
        (d() / "registry.json").string()}},
      {2, "an output file in a missing folder", {"report", "1", "--html", missing, "--store", s()}},
      {2,
       "an output folder in a missing folder",
       {"export", "2", "--torch", missing, "--store", s()}},
      {2, "optimize --store in a missing folder", {"optimize", "rmsnorm", "--store", missing}},
      {2,
       "checker-coverage --store in a missing folder",
       {"checker-coverage", "rmsnorm", "--store", missing}},
      {2,
       "a --key file that is missing",
       {"receipt", "sign", "2", "--key", missing, "--reviewer", "r", "--store", s()}},
      {2,
       "a --key file open to others",
       {"receipt", "sign", "2", "--key", (d() / "open_key.json").string(), "--reviewer", "r",
        "--store", s()}},
      {2,
       "a --sign-key file open to others",
       {"optimize", "rmsnorm", "--sign-key", (d() / "open_key.json").string(), "--store",
        (d() / "s2").string()}},
      {2,
       "receipt sign of a session that was not promoted",
       {"receipt", "sign", "1", "--key", (d() / "key.json").string(), "--reviewer", "r", "--store",
        s()}},
      {2,
       "export of a session that was not promoted",
       {"export", "1", "--torch", (d() / "pkg1").string(), "--store", s()}},
      {2,
       "shadow of a session that was not promoted",
       {"shadow", "1", "--inputs", (d() / "inputs").string(), "--store", s()}},
      {2, "shadow --inputs missing", {"shadow", "2", "--inputs", missing, "--store", s()}},
      {2, "replay of a checker-coverage session", {"replay", "3", "--store", s()}},
      {2,
       "--resume with another recorded value",
       {"optimize", "rmsnorm", "--resume", "1", "--seed", "7", "--store", s()}},
  });
  EXPECT_FALSE(fs::exists(d() / "s2" / "kloop.db")) << "no store for a usage error";
  EXPECT_FALSE(fs::exists(d() / "missing")) << "no missing parent folder was created";
}

// 3: could not finish.
TEST_F(ExitCodesTest, ThreeCouldNotFinish) {
  if (!device_present(*run_)) {
    EXPECT_EQ(run_->exit_code, 3) << "optimize without a device: pending_device_validation\n"
                                  << run_->stdout_text << run_->stderr_text;
  }
  // A store whose blob was altered, and one whose promoted record contradicts itself.
  const fs::path damaged = d() / "damaged";
  const fs::path contradicts = d() / "contradicts";
  {
    auto st = store::Store::open(damaged.string());
    store::testing::write_fake_session(st, 1);
    auto st2 = store::Store::open(contradicts.string());
    store::testing::write_fake_session(st2, 1);
  }
  for (const auto& e : fs::recursive_directory_iterator(damaged / "blobs"))
    if (e.is_regular_file()) {
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
      write_file(e.path(), "altered");
      break;
    }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((contradicts / "kloop.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE gate_results SET status = 1 WHERE name = 'static'", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  // A store whose database was lost: leftovers only.
  const fs::path lost = d() / "lost";
  fs::create_directories(lost);
  fs::copy(d() / "s" / "blobs", lost / "blobs", fs::copy_options::recursive);
  write_file(lost / "kloop.db", "");
  expect_codes({
      {3,
       "evaluate without a device: pending",
       {"evaluate", "rmsnorm", "--candidate", (d() / "cand_good").string()}},
      {3,
       "provider unreachable",
       {"optimize", "rmsnorm", "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--budget", "1", "--store", (d() / "s3").string()}},
      {3, "replay where gates could not run here", {"replay", "1", "--store", s()}},
      {3, "a damaged database", {"sessions", "--store", (d() / "corrupt").string()}},
      {3, "store verify of an altered blob", {"store", "verify", "--store", damaged.string()}},
      {3,
       "receipt sign of a record that contradicts itself",
       {"receipt", "sign", "1", "--key", (d() / "key.json").string(), "--reviewer", "r", "--store",
        contradicts.string()}},
      {3,
       "optimize over the leftovers of a lost database",
       {"optimize", "rmsnorm", "--store", lost.string()}},
  });
  // Interrupted (SIGTERM; Ctrl-C, SIGHUP and a closed output pipe alike): 3, resumable.
  FakeOpenAi slow({completion_body("no code")}, {0, 10000});
  const pid_t pid =
      kloop_spawn({"optimize", "rmsnorm", "--provider", "openai", "--base-url", slow.base_url(),
                   "--budget", "2", "--store", (d() / "s4").string()},
                  d() / "s4.txt");
  ASSERT_TRUE(slow.wait_for_requests(2));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 3) << read_file(d() / "s4.txt");
}

} // namespace
} // namespace kloop::e2e
