// End-to-end: the kloop executable as a user runs it, on a machine without a GPU.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "evaluator/subprocess.h"
#include "store/store.h"
#include "tests/e2e/e2e_support.h"
#include "tests/support/device_probe.h"
#include "tests/support/test_files.h"

namespace fs = std::filesystem;
using kloop::e2e::fresh_dir;
using kloop::e2e::good_manifest;
using kloop::e2e::good_source;
using kloop::e2e::kKloop;
using kloop::e2e::kloop_run;
using kloop::e2e::read_file;
using kloop::e2e::reply_with;
using kloop::test_support::TempDir;
using nlohmann::json;

namespace {

// The loopback server of tests/e2e/e2e_support.h serving these reply texts.
class FakeOpenAi : public kloop::e2e::FakeOpenAi {
public:
  explicit FakeOpenAi(const std::vector<std::string>& replies, std::vector<int> delay_ms = {})
      : kloop::e2e::FakeOpenAi(kloop::e2e::completions(replies), std::move(delay_ms)) {}
  std::vector<std::string> bodies() { return requests(); }
};

// The CPU-only expectations apply where the GPU probe gives a clear no-device answer; where it
// finds a device the test is skipped, and where it gives no clear answer the test fails. Decided
// from the probe before anything runs, never from the session's outcome (a regression that
// rejects every candidate must fail here, not read as "a GPU is present").
#define KLOOP_ONLY_WITHOUT_A_DEVICE()                                                              \
  do {                                                                                             \
    const auto probe = kloop::test_support::probe_device();                                        \
    ASSERT_NE(probe.state, kloop::test_support::DeviceState::kBroken) << probe.reason;             \
    if (probe.state == kloop::test_support::DeviceState::kPresent)                                 \
      GTEST_SKIP() << "a usable GPU is present (probe: " << probe.reason                           \
                   << "): the CPU-only path does not apply";                                       \
  } while (0)

} // namespace

TEST(OptimizeE2E, OfflineMainJobOnCpuEndsPendingDeviceValidation) {
  KLOOP_ONLY_WITHOUT_A_DEVICE();
  const TempDir tmp("e2e-offline");
  const fs::path store = tmp.dir();
  const auto run =
      kloop_run({"optimize", "rmsnorm", "--budget", "2", "--store", store.string(), "--json"});
  ASSERT_FALSE(run.timed_out) << run.stderr_text;
  const json r = json::parse(run.stdout_text);
  EXPECT_EQ(run.exit_code, 3) << run.stdout_text << run.stderr_text;
  EXPECT_EQ(r["decision"], "pending_device_validation");
  ASSERT_EQ(r["iterations"].size(), 2u);
  for (const auto& it : r["iterations"]) {
    EXPECT_EQ(it["verdict"], "pending_device_validation");
    EXPECT_EQ(it["gates"]["build"], "pass");
    EXPECT_EQ(it["gates"]["static"], "pass");
    EXPECT_EQ(it["gates"]["correctness"], "not_run");
  }
  // Both iterations share one reason, stated once: "iterations 1-2: correctness not run (...)".
  const std::string reason = r["reason"];
  EXPECT_EQ(reason.rfind("no candidate could finish the device gates: iterations 1-2: "
                         "correctness not run (",
                         0),
            0u)
      << reason;
  EXPECT_EQ(reason.find("correctness not run", reason.find("correctness not run") + 1),
            std::string::npos)
      << reason;
  // The holdout was committed before the first prompt and stays sealed (never used): owner-only.
  const std::string commitment = r["holdout_commitment"];
  EXPECT_EQ(commitment.size(), 64u);
  const fs::path sealed =
      store / "holdout" / ("session-" + std::to_string(r["session_id"].get<int>()) + ".sealed");
  ASSERT_TRUE(fs::exists(sealed));
  struct stat st {};
  ASSERT_EQ(::stat(sealed.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_file(sealed).find("\"outer\""), std::string::npos)
      << "no case data in the sealed file";

  // The store holds the session: listed, shown, and every blob verifies.
  const auto sessions = kloop_run({"sessions", "--store", store.string(), "--json"});
  EXPECT_EQ(sessions.exit_code, 0) << sessions.stderr_text;
  const json list = json::parse(sessions.stdout_text);
  ASSERT_EQ(list.size(), 1u);
  const auto verify = kloop_run({"store", "verify", "--store", store.string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.stdout_text << verify.stderr_text;
  auto st_db = kloop::store::Store::open(store.string(), kloop::store::OpenMode::kReadOnly);
  const auto detail = st_db.load_session(r["session_id"].get<std::int64_t>());
  ASSERT_EQ(detail.iterations.size(), 2u);
  EXPECT_EQ(detail.holdout_commitments.size(), 1u);
  EXPECT_EQ(detail.holdout_commitments[0].commitment_sha256, commitment);
  for (const auto& it : detail.iterations) {
    ASSERT_EQ(it.candidates.size(), 1u);
    EXPECT_NE(it.candidates[0].artifact_of(kloop::store::ArtifactKind::kCubin), nullptr);
    EXPECT_FALSE(it.candidates[0].tool_calls.empty()) << "the build worker call is recorded";
  }
  // kloop's own peak RSS (children excluded) is printed and recorded with the session (issue 8:
  // the kloop process stays under 1 GiB).
  const long rss_kib = r.value("kloop_peak_rss_kib", 0L);
  EXPECT_GT(rss_kib, 0);
  EXPECT_LT(rss_kib, 1L << 20);
  EXPECT_EQ(detail.session.params["resources"]["kloop_peak_rss_kib"], rss_kib);
  const auto show =
      kloop_run({"show", std::to_string(r["session_id"].get<int>()), "--store", store.string()});
  EXPECT_NE(show.stdout_text.find("kloop peak RSS"), std::string::npos) << show.stdout_text;
}

// The second operator end to end on CPU (issue 25): `kloop optimize softmax --budget 5` with the
// offline provider serving the softmax family: every iteration a softmax member (the safe
// default, then the flagship, then the policy's moves) that passes the contract, build and static
// gates and waits for the device; the session is recorded as row_softmax/1 with its holdout.
TEST(OptimizeE2E, SoftmaxOfflineOnCpuEndsPendingDeviceValidation) {
  KLOOP_ONLY_WITHOUT_A_DEVICE();
  const TempDir tmp("e2e-softmax");
  const fs::path store = tmp.dir();
  const auto run =
      kloop_run({"optimize", "softmax", "--budget", "5", "--store", store.string(), "--json"}, 420);
  ASSERT_FALSE(run.timed_out) << run.stderr_text;
  const json r = json::parse(run.stdout_text);
  EXPECT_EQ(run.exit_code, 3) << run.stdout_text << run.stderr_text;
  EXPECT_EQ(r["decision"], "pending_device_validation");
  ASSERT_EQ(r["iterations"].size(), 5u);
  for (const auto& it : r["iterations"]) {
    EXPECT_EQ(it["verdict"], "pending_device_validation") << it.dump();
    EXPECT_EQ(it["gates"]["contract"], "pass") << it.dump();
    EXPECT_EQ(it["gates"]["build"], "pass") << it.dump();
    EXPECT_EQ(it["gates"]["static"], "pass") << it.dump();
    EXPECT_EQ(it["gates"]["correctness"], "not_run") << it.dump();
  }
  EXPECT_EQ(r["holdout_commitment"].get<std::string>().size(), 64u);
  auto st_db = kloop::store::Store::open(store.string(), kloop::store::OpenMode::kReadOnly);
  const auto detail = st_db.load_session(r["session_id"].get<std::int64_t>());
  ASSERT_EQ(detail.iterations.size(), 5u);
  std::set<std::string> sources;
  for (const auto& it : detail.iterations) {
    ASSERT_EQ(it.candidates.size(), 1u);
    ASSERT_FALSE(it.candidates[0].candidate.source_sha256.empty());
    const std::string source = st_db.blob(it.candidates[0].candidate.source_sha256);
    EXPECT_NE(source.find("kloop offline family for row_softmax/1"), std::string::npos);
    sources.insert(source);
  }
  EXPECT_EQ(sources.size(), 5u) << "five distinct members";
  const auto show =
      kloop_run({"show", std::to_string(r["session_id"].get<int>()), "--store", store.string()});
  EXPECT_EQ(show.exit_code, 0) << show.stderr_text;
  EXPECT_NE(show.stdout_text.find("row_softmax"), std::string::npos) << show.stdout_text;
  const auto verify = kloop_run({"store", "verify", "--store", store.string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.stdout_text << verify.stderr_text;
}

// Numbers that CLI11 alone would accept: a negative seed (wrapped to 2^64 - 5 and stored as -5)
// and a NaN cost budget. Both are usage errors (2) that name the option, before any session.
TEST(OptimizeE2E, NegativeSeedAndNanBudgetAreUsageErrors) {
  const TempDir tmp("e2e-badnum");
  const fs::path store = tmp.dir();
  const auto seed = kloop_run({"optimize", "rmsnorm", "--seed", "-5", "--store", store.string()});
  EXPECT_EQ(seed.exit_code, 2) << seed.stdout_text << seed.stderr_text;
  EXPECT_NE((seed.stdout_text + seed.stderr_text).find("--seed"), std::string::npos)
      << seed.stderr_text;
  EXPECT_NE((seed.stdout_text + seed.stderr_text).find("a seed is a decimal integer"),
            std::string::npos)
      << seed.stderr_text;
  // Above int64: the store would record it as negative.
  const auto big = kloop_run(
      {"optimize", "rmsnorm", "--seed", "18446744073709551611", "--store", store.string()});
  EXPECT_EQ(big.exit_code, 2) << big.stdout_text << big.stderr_text;
  const auto cost =
      kloop_run({"optimize", "rmsnorm", "--max-cost-usd", "nan", "--store", store.string()});
  EXPECT_EQ(cost.exit_code, 2) << cost.stdout_text << cost.stderr_text;
  EXPECT_NE((cost.stdout_text + cost.stderr_text).find("finite number"), std::string::npos)
      << cost.stderr_text;
  EXPECT_FALSE(fs::exists(store / "kloop.db")) << "no session for a usage error";
}

// `optimize --sign-key FILE` checks the key before anything is generated: a missing file, a key
// open to group or others, a malformed file or a bad `key_id` is a usage error (2) naming the
// option and the fix, and no session is recorded.
TEST(OptimizeE2E, BadSignKeyIsAUsageErrorBeforeAnyGeneration) {
  const TempDir tmp("e2e-signkey");
  const fs::path dir = tmp.dir();
  const fs::path store = dir / "store";
  const fs::path key = dir / "key.json";
  const auto gen = kloop_run({"keys", "generate", "--out", key.string()});
  ASSERT_EQ(gen.exit_code, 0) << gen.stderr_text;
  const auto refused = [&](const fs::path& file, const std::string& names) {
    const auto r = kloop_run({"optimize", "rmsnorm", "--budget", "1", "--sign-key", file.string(),
                              "--store", store.string()});
    const std::string all = r.stdout_text + r.stderr_text;
    EXPECT_EQ(r.exit_code, 2) << all;
    EXPECT_NE(all.find("--sign-key " + file.string()), std::string::npos) << all;
    EXPECT_NE(all.find(names), std::string::npos) << all;
    EXPECT_EQ(all.find("[1/1]"), std::string::npos) << "generation started: " << all;
    EXPECT_FALSE(fs::exists(store / "kloop.db")) << "no session for a bad key";
  };
  refused(dir / "missing.json", "No such file or directory");
  fs::copy_file(key, dir / "open.json");
  fs::permissions(dir / "open.json", fs::perms(0640));
  refused(dir / "open.json", "chmod 600 " + (dir / "open.json").string());
  json k = json::parse(read_file(key));
  k["key_id"] = "my key!";
  std::ofstream(dir / "badid.json") << k.dump();
  fs::permissions(dir / "badid.json", fs::perms(0600));
  refused(dir / "badid.json", "`key_id`");
  std::ofstream(dir / "notkey.json") << "not json";
  fs::permissions(dir / "notkey.json", fs::perms(0600));
  refused(dir / "notkey.json", "is not a JSON key file");
}

// `checker-coverage --check-record FILE` with a file that is not JSON (or a folder) is a usage
// error naming the option and the file, never a raw parser exception, before any mutant runs.
TEST(OptimizeE2E, CheckRecordThatIsNotJsonIsAUsageErrorNamingTheOption) {
  const TempDir tmp("e2e-ccrecord");
  const fs::path dir = tmp.dir();
  const fs::path notjson = dir / "record.txt";
  std::ofstream(notjson) << "score: 0.9\n";
  const auto r = kloop_run({"checker-coverage", "rmsnorm", "--check-record", notjson.string()});
  const std::string all = r.stdout_text + r.stderr_text;
  EXPECT_EQ(r.exit_code, 2) << all;
  EXPECT_NE(all.find("--check-record " + notjson.string() + " is not JSON"), std::string::npos)
      << all;
  EXPECT_EQ(all.find("json.exception"), std::string::npos) << all;
  EXPECT_EQ(all.find("mutants of"), std::string::npos) << "the analysis started: " << all;
  const auto d = kloop_run({"checker-coverage", "rmsnorm", "--check-record", dir.string()});
  EXPECT_EQ(d.exit_code, 2) << d.stdout_text << d.stderr_text;
  EXPECT_NE((d.stdout_text + d.stderr_text).find("is a directory"), std::string::npos)
      << d.stdout_text << d.stderr_text;
}

TEST(OptimizeE2E, OpenAiCompatibleServerGetsBuildErrorsInSecondPrompt) {
  KLOOP_ONLY_WITHOUT_A_DEVICE();
  const std::string broken =
      "#include <cuda_fp16.h>\nextern \"C\" __global__ void rms_f32(const float* x, const float* "
      "weight, float* y, long long rows, int H, long long x_row_stride, long long y_row_stride, "
      "float eps) { this_is_not_declared = 1; }\n";
  const std::string manifest_f32 =
      R"({"contract":"weighted_rmsnorm/1","entry_points":{"float32":"rms_f32"},"launch":{"block_threads":256,"rows_per_block":1,"grid":"per_rows","dynamic_smem":{"fixed_bytes":0,"bytes_per_h":0}},"dispatch":{"h_min":1,"h_max":65536,"h_multiple_of":1,"x_rows":"any_stride","alignment_bytes":4},"target":"sm_90","known_limits":"float32 only"})";
  FakeOpenAi server({reply_with(broken, manifest_f32), reply_with(good_source(), good_manifest())});
  const TempDir tmp("e2e-openai");
  const fs::path store = tmp.dir();
  const auto run =
      kloop_run({"optimize", "rmsnorm", "--provider", "openai", "--base-url", server.base_url(),
                 "--model", "test-model", "--budget", "2", "--store", store.string(), "--json"});
  ASSERT_FALSE(run.timed_out);
  const json r = json::parse(run.stdout_text);
  EXPECT_EQ(run.exit_code, 3) << run.stdout_text << run.stderr_text;
  ASSERT_EQ(r["iterations"].size(), 2u);
  EXPECT_EQ(r["iterations"][0]["verdict"], "reject");
  EXPECT_EQ(r["iterations"][0]["gates"]["build"], "fail");
  EXPECT_EQ(r["iterations"][1]["verdict"], "pending_device_validation");

  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 2u);
  const json second = json::parse(bodies[1]);
  EXPECT_EQ(second["model"], "test-model");
  std::string all_text;
  for (const auto& m : second["messages"])
    all_text += m["content"].get<std::string>() + "\n";
  EXPECT_NE(all_text.find("this_is_not_declared"), std::string::npos)
      << "the first candidate's build error reaches the second prompt";
  EXPECT_NE(all_text.find("kernel.cu("), std::string::npos) << "with kernel.cu line numbers";
  EXPECT_EQ(all_text.find(store.string()), std::string::npos) << "no host path of the store";
  const json first = json::parse(bodies[0]);
  std::string first_text;
  for (const auto& m : first["messages"])
    first_text += m["content"].get<std::string>();
  EXPECT_EQ(first_text.find("this_is_not_declared"), std::string::npos);

  // The replay provider re-drives the same session from the store without a model.
  const auto replay = kloop_run({"optimize", "rmsnorm", "--provider", "replay", "--replay-session",
                                 std::to_string(r["session_id"].get<int>()), "--budget", "2",
                                 "--store", store.string(), "--json"});
  const json rr = json::parse(replay.stdout_text);
  ASSERT_EQ(rr["iterations"].size(), 2u) << replay.stdout_text << replay.stderr_text;
  EXPECT_EQ(rr["iterations"][0]["verdict"], "reject");
  EXPECT_EQ(rr["iterations"][1]["verdict"], "pending_device_validation");
  EXPECT_EQ(server.bodies().size(), 2u) << "replay sends nothing to the server";
}

// Ctrl-C ends the session `interrupted` and prints the command that continues it, which runs as
// printed (operator and --store included); the resume takes the recorded generator (provider,
// base URL), so the printed command needs no provider flags, and a --provider equal to the
// recorded one is accepted.
TEST(OptimizeE2E, CtrlCEndsInterruptedAndResumeContinues) {
  KLOOP_ONLY_WITHOUT_A_DEVICE();
  // Reply 2 is slow, so SIGINT arrives while the second request is in flight.
  FakeOpenAi server({reply_with(good_source(), good_manifest())}, {0, 8000, 0, 0});
  const TempDir tmp("e2e-resume");
  const fs::path dir = tmp.dir();
  const fs::path store = dir / "store";
  const fs::path out = dir / "interrupted.json";
  const std::vector<std::string> args{kKloop,   "optimize",   "rmsnorm",         "--provider",
                                      "openai", "--base-url", server.base_url(), "--budget",
                                      "3",      "--store",    store.string(),    "--json"};
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> cargv;
    for (const auto& a : args)
      cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::execv(cargv[0], cargv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (server.bodies().size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(server.bodies().size(), 2u) << "the second request never arrived";
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  {
    auto st = kloop::store::Store::open(store.string(), kloop::store::OpenMode::kReadOnly);
    const auto d = st.load_session(1);
    EXPECT_EQ(d.session.status, kloop::store::SessionStatus::kInterrupted);
    EXPECT_EQ(d.iterations.size(), 1u) << "the committed first iteration is kept";
  }
  const std::string reason = json::parse(read_file(out)).at("reason");
  const std::string prefix = "continue with ";
  const auto at = reason.find(prefix);
  ASSERT_NE(at, std::string::npos) << reason;
  const std::string command = reason.substr(at + prefix.size());
  EXPECT_EQ(command, "kloop optimize rmsnorm --resume 1 --store " + store.string()) << reason;
  // Run the printed command (its words; the store path has no spaces), plus --json.
  std::vector<std::string> words;
  std::istringstream split(command);
  for (std::string w; split >> w;)
    words.push_back(w);
  ASSERT_EQ(words.front(), "kloop");
  words.erase(words.begin());
  words.insert(words.end(), {"--provider", "openai", "--json"});
  const auto resumed = kloop_run(words);
  const json r = json::parse(resumed.stdout_text);
  EXPECT_EQ(r["session_id"], 1) << resumed.stderr_text;
  ASSERT_EQ(r["iterations"].size(), 2u) << "iterations 2 and 3 ran after the resume";
  EXPECT_EQ(r["iterations"][0]["iteration"], 2) << "1-based, as the progress lines print it";
  EXPECT_EQ(server.bodies().size(), 4u) << "the resume asked the recorded server";
  auto st = kloop::store::Store::open(store.string(), kloop::store::OpenMode::kReadOnly);
  const auto d = st.load_session(1);
  EXPECT_EQ(d.iterations.size(), 3u);
  EXPECT_EQ(d.session.status, kloop::store::SessionStatus::kCompleted);
  EXPECT_EQ(d.session.provider, "openai");
}

// `--resume ID` with --provider, --model, --base-url, --budget or --seed other than the session's
// recorded value is a usage error (2) naming the recorded value; nothing is recorded and the
// session stays as it was (still resumable, still credited to its provider).
TEST(OptimizeE2E, ResumeRefusesAGeneratorOrBudgetOtherThanTheRecordedOne) {
  const TempDir tmp("e2e-resumeflags");
  const fs::path dir = tmp.dir();
  const fs::path store = dir / "store";
  {
    auto st = kloop::store::Store::open(store.string());
    kloop::store::SessionRecord s;
    s.operator_name = "weighted_rmsnorm";
    s.provider = "offline";
    s.budget = 2;
    s.seed = 1;
    s.params = {
        {"base_url", ""}, {"api_key_env", ""}, {"no_sandbox", false}, {"replay_session", 0}};
    st.create_session(s);
    st.finish_session(s.id, kloop::store::SessionStatus::kInterrupted, std::nullopt);
  }
  const auto refused = [&](std::vector<std::string> flags, const std::string& names) {
    std::vector<std::string> args{"optimize", "rmsnorm", "--resume",
                                  "1",        "--store", store.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = kloop_run(args);
    const std::string all = r.stdout_text + r.stderr_text;
    EXPECT_EQ(r.exit_code, 2) << all;
    EXPECT_NE(all.find(names), std::string::npos) << all;
    EXPECT_EQ(all.find("resuming session"), std::string::npos) << "the resume started: " << all;
  };
  refused({"--provider", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "foo"},
          "session 1 was recorded with --provider 'offline', not 'openai'");
  refused({"--model", "foo"}, "session 1 was recorded with --model none, not 'foo'");
  refused({"--provider", "offline", "--budget", "5"},
          "session 1 was recorded with --budget 2, not 5");
  refused({"--seed", "7"}, "session 1 was recorded with --seed 1, not 7");
  auto st = kloop::store::Store::open(store.string(), kloop::store::OpenMode::kReadOnly);
  const auto d = st.load_session(1);
  EXPECT_EQ(d.session.status, kloop::store::SessionStatus::kInterrupted);
  EXPECT_EQ(d.session.provider, "offline");
  EXPECT_EQ(d.session.budget, 2);
  EXPECT_TRUE(d.iterations.empty());
  EXPECT_FALSE(d.promotion.has_value());
}

// Flags the chosen provider would ignore are usage errors (2) before any store or session:
// --replay-session without --provider replay, and --model with the offline provider.
TEST(OptimizeE2E, FlagsTheProviderWouldIgnoreAreUsageErrors) {
  const TempDir tmp("e2e-ignoredflags");
  const fs::path dir = tmp.dir();
  const fs::path store = dir / "store";
  const auto refused = [&](std::vector<std::string> flags, const std::string& names) {
    std::vector<std::string> args{"optimize", "rmsnorm", "--budget",
                                  "1",        "--store", store.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = kloop_run(args);
    const std::string all = r.stdout_text + r.stderr_text;
    EXPECT_EQ(r.exit_code, 2) << all;
    EXPECT_NE(all.find(names), std::string::npos) << all;
    EXPECT_FALSE(fs::exists(store)) << "no store for a usage error: " << all;
  };
  refused({"--replay-session", "1"}, "--replay-session needs --provider replay");
  refused({"--provider", "openai", "--base-url", "http://127.0.0.1:9/v1", "--replay-session", "1"},
          "--replay-session needs --provider replay");
  refused({"--model", "foo"}, "--model is for --provider openai or anthropic");
}

// A provider that is not configured (api.openai.com or api.anthropic.com without a key) is a usage
// error (2) that leaves no store behind.
TEST(OptimizeE2E, MissingApiKeyCreatesNoStore) {
  const TempDir tmp("e2e-nokey");
  const fs::path dir = tmp.dir();
  const fs::path store = dir / "store";
  for (const std::string provider : {"openai", "anthropic"}) {
    const auto r =
        kloop_run({"optimize", "rmsnorm", "--provider", provider, "--store", store.string()});
    const std::string all = r.stdout_text + r.stderr_text;
    EXPECT_EQ(r.exit_code, 2) << all;
    EXPECT_NE(all.find("_API_KEY"), std::string::npos) << all;
    EXPECT_FALSE(fs::exists(store / "kloop.db")) << provider << ": " << all;
  }
}

// A session whose provider never answered evaluated no candidate: it ends `failed` (exit 3) with
// no promotion decision, and `kloop sessions` lists it failed, not rejected (a failed hard gate).
TEST(OptimizeE2E, ProviderThatNeverAnswersIsFailedNotRejected) {
  const TempDir tmp("e2e-noanswer");
  const fs::path dir = tmp.dir();
  const fs::path store = dir / "store";
  const auto run =
      kloop_run({"optimize", "rmsnorm", "--budget", "1", "--provider", "openai", "--base-url",
                 "http://127.0.0.1:9/v1", "--store", store.string(), "--json"});
  ASSERT_FALSE(run.timed_out) << run.stderr_text;
  EXPECT_EQ(run.exit_code, 3) << run.stdout_text << run.stderr_text;
  const json r = json::parse(run.stdout_text);
  EXPECT_EQ(r["decision"], "failed");
  {
    auto st = kloop::store::Store::open(store.string(), kloop::store::OpenMode::kReadOnly);
    const auto d = st.load_session(1);
    EXPECT_EQ(d.session.status, kloop::store::SessionStatus::kFailed);
    EXPECT_FALSE(d.session.verdict.has_value());
    EXPECT_FALSE(d.promotion.has_value()) << "no decision was taken";
    ASSERT_EQ(d.iterations.size(), 1u);
    EXPECT_TRUE(d.iterations[0].candidates.empty());
  }
  const auto list = kloop_run({"sessions", "--store", store.string()});
  EXPECT_EQ(list.exit_code, 0) << list.stderr_text;
  EXPECT_NE(list.stdout_text.find("failed"), std::string::npos) << list.stdout_text;
  EXPECT_EQ(list.stdout_text.find("rejected"), std::string::npos) << list.stdout_text;
}
