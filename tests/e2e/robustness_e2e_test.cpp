// Issue 22, end to end on a machine without a GPU: inputs that used to end kloop through an
// uncaught exception, leave a session `running`, or record a wrong verdict. Each test runs the
// real kloop executable (tests/e2e/e2e_support.h), against an OpenAI-compatible loopback server
// where the input is a model reply.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "store/store.h"
#include "tests/e2e/e2e_support.h"

namespace kloop::e2e {
namespace {

using store::SessionStatus;

std::vector<std::string> openai_args(const FakeOpenAi& server, const fs::path& store, int budget) {
  return {"optimize",        "rmsnorm",  "--provider",           "openai",  "--base-url",
          server.base_url(), "--budget", std::to_string(budget), "--store", store.string()};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

store::SessionDetail load(const fs::path& store, std::int64_t id = 1) {
  auto st = store::Store::open(store.string(), store::OpenMode::kReadOnly);
  return st.load_session(id);
}

// The good fixture's manifest with launch.block_threads replaced by the JSON number 1e999, which
// follows the JSON grammar but overflows a double (nlohmann throws out_of_range.406 for it).
std::string overflowing_manifest() {
  json m = json::parse(good_manifest());
  m["launch"]["block_threads"] = 256;
  std::string text = m.dump();
  const std::string from = "\"block_threads\":256";
  text.replace(text.find(from), from.size(), "\"block_threads\":1e999");
  return text;
}

// Item 1: a reply whose manifest holds 1e999 is a failed contract gate naming the field (exit 1,
// session completed `rejected`), never an exception; `kloop evaluate --json` prints its report.
TEST(RobustnessE2E, ManifestNumberOverflowFailsTheContractGateNamingTheField) {
  const std::string manifest = overflowing_manifest();
  FakeOpenAi server({completion_body(reply_with(good_source(), manifest))});
  const fs::path dir = fresh_dir("overflow");
  const auto run = kloop_run(plus(openai_args(server, dir / "store", 1), {"--json"}));
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 1) << run.stdout_text << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("json.exception"), std::string::npos) << run.stderr_text;
  const json r = json::parse(run.stdout_text);
  EXPECT_EQ(r["decision"], "rejected");
  EXPECT_EQ(r["iterations"][0]["gates"]["format"], "pass");
  EXPECT_EQ(r["iterations"][0]["gates"]["contract"], "fail");
  const auto d = load(dir / "store");
  EXPECT_EQ(d.session.status, SessionStatus::kCompleted);
  ASSERT_EQ(d.iterations.size(), 1u);
  const auto* contract = d.iterations[0].candidates.at(0).gate("contract");
  ASSERT_NE(contract, nullptr);
  EXPECT_NE(contract->reason.find("launch.block_threads"), std::string::npos) << contract->reason;
  EXPECT_NE(contract->reason.find("overflow"), std::string::npos) << contract->reason;

  const fs::path cand = dir / "candidate";
  fs::create_directories(cand);
  write_file(cand / "kernel.cu", good_source());
  write_file(cand / "manifest.json", manifest);
  const auto ev = kloop_run({"evaluate", "rmsnorm", "--candidate", cand.string(), "--json"});
  EXPECT_EQ(ev.exit_code, 1) << ev.stdout_text << ev.stderr_text;
  const json report = json::parse(ev.stdout_text, nullptr, false);
  ASSERT_TRUE(report.is_object()) << ev.stdout_text << ev.stderr_text;
  EXPECT_EQ(report["verdict"], "reject");
  EXPECT_NE(report.dump().find("launch.block_threads"), std::string::npos) << report.dump();
  fs::remove_all(dir);
}

// A provider body that is not UTF-8 (HTTP 200) reaches the recorder, which writes the exchange
// with U+FFFD for the bad bytes instead of letting the JSON serializer throw (which rolled back
// the step and ended the process with the session `running`); the raw body stays in its blob.
TEST(RobustnessE2E, ProviderBodyThatIsNotUtf8IsRecorded) {
  FakeOpenAi server({"\xff\xfe{\"choices\": [\xc3]}"});
  const fs::path dir = fresh_dir("utf8");
  const auto run = kloop_run(plus(openai_args(server, dir / "store", 1), {"--json"}));
  EXPECT_EQ(run.stderr_text.find("json.exception"), std::string::npos) << run.stderr_text;
  EXPECT_EQ(run.exit_code, 3) << run.stdout_text << run.stderr_text;
  const auto d = load(dir / "store");
  EXPECT_EQ(d.session.status, SessionStatus::kFailed) << "no reply: not a verdict";
  ASSERT_EQ(d.iterations.size(), 1u);
  EXPECT_EQ(d.iterations[0].iteration.notes.value("provider_outcome", ""), "bad_response");
  fs::remove_all(dir);
}

// Item 3: every floating-point option refuses NaN, the infinities and out-of-range text with a
// usage error naming the option, before any session.
TEST(RobustnessE2E, FloatOptionsRefuseNanAndInfinities) {
  const fs::path dir = fresh_dir("floats");
  const fs::path store = dir / "store";
  const std::vector<std::vector<std::string>> commands = {
      {"optimize", "rmsnorm", "--worker-timeout", "nan"},
      {"optimize", "rmsnorm", "--worker-timeout", "-nan"},
      {"optimize", "rmsnorm", "--worker-timeout", "inf"},
      {"optimize", "rmsnorm", "--worker-timeout", "1e999"},
      {"optimize", "rmsnorm", "--worker-timeout", "0x10"},
      {"optimize", "rmsnorm", "--max-cost-usd", "inf"},
      {"optimize", "rmsnorm", "--max-cost-usd", "-infinity"},
      {"optimize", "rmsnorm", "--usd-per-mtok-input", "nan"},
      {"optimize", "rmsnorm", "--usd-per-mtok-output", "NaN"},
      {"evaluate", "rmsnorm", "--candidate", dir.string(), "--build-timeout", "nan"},
      {"checker-coverage", "rmsnorm", "--worker-timeout", "nan"},
      {"checker-coverage", "rmsnorm", "--worker-timeout", "-inf"}};
  for (auto args : commands) {
    const std::string option = args[args.size() - 2];
    const std::string value = args.back();
    args.insert(args.end(), {"--store", store.string()});
    if (args[0] == "evaluate") args.resize(args.size() - 2);
    const auto r = kloop_run(args);
    const std::string all = r.stdout_text + r.stderr_text;
    EXPECT_EQ(r.exit_code, 2) << option << " " << value << ": " << all;
    EXPECT_NE(all.find(option), std::string::npos) << all;
    EXPECT_NE(all.find("expected a finite number"), std::string::npos) << all;
  }
  EXPECT_FALSE(fs::exists(store / "kloop.db")) << "no session for a usage error";
  fs::remove_all(dir);
}

// Item 4: --max-tokens is recorded with the session and a resume counts what the session spent
// before: the resumed part stops at the recorded limit. Another limit on resume is refused.
TEST(RobustnessE2E, MaxTokensIsRecordedAndEnforcedAcrossResume) {
  // Every reply reports 400 tokens; the limit is 1000. Reply 2 is slow, so SIGINT lands in it.
  const json usage = {{"prompt_tokens", 300}, {"completion_tokens", 100}};
  const std::string bad_reply = completion_body("no code here", usage); // a format failure: fast
  FakeOpenAi server({bad_reply}, {0, 8000});
  const fs::path dir = fresh_dir("maxtokens");
  const fs::path store = dir / "store";
  const pid_t pid =
      kloop_spawn(plus(openai_args(server, store, 6), {"--max-tokens", "1000"}), dir / "out.txt");
  ASSERT_TRUE(server.wait_for_requests(2)) << read_file(dir / "out.txt");
  ::kill(pid, SIGINT);
  ASSERT_EQ(wait_exit(pid), 3) << read_file(dir / "out.txt");
  {
    const auto d = load(store);
    EXPECT_EQ(d.session.status, SessionStatus::kInterrupted);
    EXPECT_EQ(d.session.params.value("max_tokens", 0), 1000);
    EXPECT_EQ(d.tokens(), 400);
  }
  const auto refused = kloop_run(
      {"optimize", "rmsnorm", "--resume", "1", "--store", store.string(), "--max-tokens", "5000"});
  EXPECT_EQ(refused.exit_code, 2) << refused.stdout_text << refused.stderr_text;
  EXPECT_NE(refused.stderr_text.find("recorded with --max-tokens 1000, not 5000"),
            std::string::npos)
      << refused.stderr_text;
  const std::size_t before = server.requests().size();
  const auto resumed =
      kloop_run({"optimize", "rmsnorm", "--resume", "1", "--store", store.string(), "--json"});
  ASSERT_FALSE(resumed.timed_out);
  const json r = json::parse(resumed.stdout_text);
  // Spent 400 before; iterations 2 and 3 bring it to 1200 (each request is sent while under the
  // limit); iteration 4 is refused without a request.
  EXPECT_EQ(server.requests().size() - before, 2u) << resumed.stdout_text;
  ASSERT_EQ(r["iterations"].size(), 3u) << resumed.stdout_text;
  EXPECT_EQ(r["iterations"][2]["iteration"], 4);
  EXPECT_NE(r["iterations"][2]["note"].get<std::string>().find("budget_exceeded"),
            std::string::npos)
      << r.dump(2);
  const auto d = load(store);
  EXPECT_NE(d.session.status, SessionStatus::kRunning);
  EXPECT_EQ(d.tokens(), 1200);
  fs::remove_all(dir);
}

// Item 4 with the cost limit: without a price it cannot be counted, so it is refused.
TEST(RobustnessE2E, MaxCostWithoutAPriceIsRefused) {
  const fs::path dir = fresh_dir("maxcost");
  const auto r = kloop_run({"optimize", "rmsnorm", "--provider", "openai", "--base-url",
                            "http://127.0.0.1:9/v1", "--max-cost-usd", "5", "--store",
                            (dir / "store").string()});
  EXPECT_EQ(r.exit_code, 2) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--usd-per-mtok-input"), std::string::npos) << r.stderr_text;
  const auto offline = kloop_run(
      {"optimize", "rmsnorm", "--max-tokens", "100", "--store", (dir / "store").string()});
  EXPECT_EQ(offline.exit_code, 2) << offline.stdout_text << offline.stderr_text;
  EXPECT_FALSE(fs::exists(dir / "store" / "kloop.db"));
  fs::remove_all(dir);
}

// Item 4: usage that makes no sense (1e30, negative) is recorded as such (NULL counts, named in
// the iteration's notes, `kloop show` says so), never as 0 tokens; with a token limit the
// session stops, since its spend can no longer be counted.
TEST(RobustnessE2E, AbsurdUsageIsRecordedAsSuchAndStopsALimitedSession) {
  for (const json& usage : {json{{"prompt_tokens", 1e30}, {"completion_tokens", 10}},
                            json{{"prompt_tokens", -5}, {"completion_tokens", 10}}}) {
    FakeOpenAi server({completion_body(reply_with(good_source(), good_manifest()), usage)});
    const fs::path dir = fresh_dir("absurd");
    const fs::path store = dir / "store";
    const auto run =
        kloop_run(plus(openai_args(server, store, 3), {"--max-tokens", "100000", "--json"}));
    ASSERT_FALSE(run.timed_out);
    EXPECT_EQ(run.stderr_text.find("json.exception"), std::string::npos) << run.stderr_text;
    EXPECT_EQ(server.requests().size(), 1u) << "the second request is never sent";
    const json r = json::parse(run.stdout_text);
    ASSERT_EQ(r["iterations"].size(), 2u) << run.stdout_text;
    EXPECT_NE(r["iterations"][0]["note"].get<std::string>().find("bad_response"),
              std::string::npos);
    EXPECT_NE(r["iterations"][1]["note"].get<std::string>().find("cannot be checked"),
              std::string::npos)
        << r["iterations"][1]["note"];
    const auto d = load(store);
    EXPECT_NE(d.session.status, SessionStatus::kRunning);
    ASSERT_FALSE(d.iterations[0].responses.empty());
    EXPECT_FALSE(d.iterations[0].responses[0].prompt_tokens.has_value()) << "never recorded as 0";
    EXPECT_NE(d.iterations[0].iteration.notes.value("usage_invalid", "").find("prompt_tokens"),
              std::string::npos);
    EXPECT_EQ(d.unknown_usage_iterations(), 1);
    const auto show = kloop_run({"show", "1", "--store", store.string()});
    EXPECT_NE(show.stdout_text.find("usage made no sense"), std::string::npos) << show.stdout_text;
    fs::remove_all(dir);
  }
}

// Item 8: SIGTERM ends a session like Ctrl-C: `interrupted`, exit 3, the message names the
// signal and the printed command resumes it.
TEST(RobustnessE2E, SigtermEndsTheSessionInterruptedAndResumable) {
  FakeOpenAi server({completion_body("no code")}, {0, 8000});
  const fs::path dir = fresh_dir("sigterm");
  const fs::path store = dir / "store";
  const pid_t pid = kloop_spawn(plus(openai_args(server, store, 3), {"--json"}), dir / "out.txt");
  ASSERT_TRUE(server.wait_for_requests(2));
  ::kill(pid, SIGTERM);
  ASSERT_EQ(wait_exit(pid), 3) << read_file(dir / "out.txt");
  EXPECT_EQ(load(store).session.status, SessionStatus::kInterrupted);
  const std::string out = read_file(dir / "out.txt");
  const json r = json::parse(out.substr(out.find('{')));
  const std::string reason = r["reason"];
  EXPECT_NE(reason.find("SIGTERM"), std::string::npos) << reason;
  auto words = hinted_command(reason, "continue with ");
  ASSERT_FALSE(words.empty()) << reason;
  words.push_back("--json");
  const auto resumed = kloop_run(words);
  EXPECT_EQ(resumed.exit_code, 1) << resumed.stderr_text; // format failures: rejected
  EXPECT_EQ(load(store).session.status, SessionStatus::kCompleted);
  EXPECT_EQ(load(store).iterations.size(), 3u);
  fs::remove_all(dir);
}

// Item 8: `kloop optimize ... | head -2`: the closed pipe ends the session `interrupted` (not
// killed by SIGPIPE, which left it `running`), and it resumes to the end.
TEST(RobustnessE2E, ClosedOutputPipeEndsTheSessionInterrupted) {
  FakeOpenAi server({completion_body("no code")}, {0, 300, 300, 300, 300, 300});
  const fs::path dir = fresh_dir("sigpipe");
  const fs::path store = dir / "store";
  std::string cmd = kKloop;
  for (const auto& a : openai_args(server, store, 6))
    cmd += " '" + a + "'";
  cmd += " 2>" + (dir / "err.txt").string() + " | head -2 >/dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  const auto d = load(store);
  EXPECT_EQ(d.session.status, SessionStatus::kInterrupted) << read_file(dir / "err.txt");
  EXPECT_LT(d.iterations.size(), 6u);
  const auto resumed =
      kloop_run({"optimize", "rmsnorm", "--resume", "1", "--store", store.string(), "--json"});
  EXPECT_NE(resumed.exit_code, 2) << resumed.stderr_text;
  EXPECT_EQ(load(store).iterations.size(), 6u);
  fs::remove_all(dir);
}

// Item 5: how each candidate was built is recorded and shown (`show`, `sessions`, the HTML
// report); resuming a sandboxed session with --no-sandbox is refused.
TEST(RobustnessE2E, SandboxIsShownPerCandidateAndNotDroppedOnResume) {
  const fs::path dir = fresh_dir("sandbox");
  const fs::path store = dir / "store";
  const auto sandboxed =
      kloop_run({"optimize", "rmsnorm", "--budget", "1", "--store", store.string(), "--json"});
  ASSERT_FALSE(sandboxed.timed_out);
  const auto unsandboxed = kloop_run({"optimize", "rmsnorm", "--budget", "1", "--no-sandbox",
                                      "--store", store.string(), "--json"});
  ASSERT_FALSE(unsandboxed.timed_out);
  const std::string kind = load(store, 1).iterations.at(0).candidates.at(0).sandbox();
  EXPECT_TRUE(kind == "bubblewrap" || kind == "unshare") << kind;
  EXPECT_EQ(load(store, 2).iterations.at(0).candidates.at(0).sandbox(), "none");
  const auto show = kloop_run({"show", "2", "--store", store.string()});
  EXPECT_NE(show.stdout_text.find("built in sandbox none"), std::string::npos) << show.stdout_text;
  const auto list = kloop_run({"sessions", "--store", store.string()});
  EXPECT_NE(list.stdout_text.find(" sandbox "), std::string::npos) << list.stdout_text;
  EXPECT_NE(list.stdout_text.find(" " + kind + " "), std::string::npos) << list.stdout_text;
  const auto html =
      kloop_run({"report", "2", "--html", (dir / "r.html").string(), "--store", store.string()});
  EXPECT_EQ(html.exit_code, 0) << html.stderr_text;
  EXPECT_NE(read_file(dir / "r.html").find("<td id=\"sandbox\">none</td>"), std::string::npos);
  // A sandboxed session, interrupted: --resume with --no-sandbox is refused, and nothing changes.
  {
    auto st = store::Store::open(store.string());
    store::SessionRecord s;
    s.operator_name = "weighted_rmsnorm";
    s.provider = "offline";
    s.budget = 2;
    s.seed = 1;
    s.params = {{"base_url", ""}, {"api_key_env", ""}, {"no_sandbox", false}};
    st.create_session(s);
    st.finish_session(s.id, SessionStatus::kInterrupted, std::nullopt);
  }
  const auto refused = kloop_run(
      {"optimize", "rmsnorm", "--resume", "3", "--no-sandbox", "--store", store.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.stdout_text << refused.stderr_text;
  EXPECT_NE(refused.stderr_text.find("recorded with sandboxed builds"), std::string::npos)
      << refused.stderr_text;
  EXPECT_EQ(load(store, 3).session.status, SessionStatus::kInterrupted);
  fs::remove_all(dir);
}

// Item 6: a store whose database was lost (zero-byte kloop.db beside blobs/ and holdout/) is not
// re-initialised: optimize and --resume refuse (exit 3, naming the leftovers), so no new session
// adopts the sealed holdout suite of the lost one.
TEST(RobustnessE2E, StoreOverLeftoversIsRefused) {
  const fs::path dir = fresh_dir("leftovers");
  const fs::path store = dir / "store";
  FakeOpenAi server({completion_body("no code")});
  const auto first = kloop_run(openai_args(server, store, 1));
  ASSERT_TRUE(fs::exists(store / "holdout" / "session-1.sealed")) << first.stderr_text;
  const std::string sealed = read_file(store / "holdout" / "session-1.sealed");
  for (const char* f : {"kloop.db-wal", "kloop.db-shm"})
    fs::remove(store / f);
  fs::resize_file(store / "kloop.db", 0);
  for (const auto& args :
       {openai_args(server, store, 1), std::vector<std::string>{"optimize", "rmsnorm", "--resume",
                                                                "1", "--store", store.string()}}) {
    const auto r = kloop_run(args);
    EXPECT_EQ(r.exit_code, 3) << r.stdout_text << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("leftovers of a store whose database was lost"), std::string::npos)
        << r.stderr_text;
  }
  EXPECT_EQ(fs::file_size(store / "kloop.db"), 0u) << "nothing was created over the leftovers";
  EXPECT_EQ(read_file(store / "holdout" / "session-1.sealed"), sealed);
  fs::remove_all(dir);
}

// Item 7: two optimize runs creating the same new store at the same moment both run (one store,
// two sessions), neither fails with "table ... already exists".
TEST(RobustnessE2E, TwoRunsCreatingOneStoreBothSucceed) {
  const fs::path dir = fresh_dir("race");
  FakeOpenAi server({completion_body("no code")});
  for (int round = 0; round < 3; ++round) {
    const fs::path store = dir / ("store" + std::to_string(round));
    const pid_t a = kloop_spawn(openai_args(server, store, 1), dir / "a.txt");
    const pid_t b = kloop_spawn(openai_args(server, store, 1), dir / "b.txt");
    const int ra = wait_exit(a), rb = wait_exit(b);
    EXPECT_EQ(ra, 1) << read_file(dir / "a.txt"); // a format failure: rejected
    EXPECT_EQ(rb, 1) << read_file(dir / "b.txt");
    for (const char* f : {"a.txt", "b.txt"})
      EXPECT_EQ(read_file(dir / f).find("already exists"), std::string::npos) << read_file(dir / f);
    auto st = store::Store::open(store.string(), store::OpenMode::kReadOnly);
    EXPECT_EQ(st.list_sessions().size(), 2u);
  }
  fs::remove_all(dir);
}

// Item 11: the hints kloop prints run as printed (`kloop show N --store DIR`, `kloop sessions
// --store DIR`), and JSON numbers iterations from 1 like the text.
TEST(RobustnessE2E, HintsRunAsPrintedAndJsonIterationsAreOneBased) {
  const fs::path dir = fresh_dir("hints");
  const fs::path store = dir / "store";
  FakeOpenAi server({completion_body("no code")});
  const auto run = kloop_run(openai_args(server, store, 2));
  const auto show_words = hinted_command(run.stdout_text, "(kloop ");
  ASSERT_FALSE(show_words.empty()) << run.stdout_text;
  EXPECT_EQ(show_words.front(), "show") << run.stdout_text;
  const auto show = kloop_run(show_words); // from another working directory than the store's
  EXPECT_EQ(show.exit_code, 0) << show.stderr_text;
  EXPECT_NE(show.stdout_text.find("iteration 2 ("), std::string::npos) << show.stdout_text;
  const auto missing = kloop_run({"show", "9", "--store", store.string()});
  EXPECT_EQ(missing.exit_code, 2);
  const auto list_words = hinted_command(missing.stderr_text, "list them with ");
  ASSERT_FALSE(list_words.empty()) << missing.stderr_text;
  EXPECT_EQ(kloop_run(list_words).exit_code, 0) << missing.stderr_text;

  const auto js = kloop_run({"show", "1", "--json", "--store", store.string()});
  const json j = json::parse(js.stdout_text);
  EXPECT_EQ(j["iterations"][0]["iteration"], 1);
  EXPECT_EQ(j["iterations"][1]["iteration"], 2);
  const auto again = kloop_run(plus(openai_args(server, store, 2), {"--json"}));
  const json r = json::parse(again.stdout_text);
  EXPECT_EQ(r["iterations"][0]["iteration"], 1);
  EXPECT_EQ(r["iterations"][1]["iteration"], 2);
  fs::remove_all(dir);
}

// Item 11: a kloop killed with SIGKILL mid-build leaves its build folder (the candidate's source)
// only until the next kloop that builds, which removes it.
TEST(RobustnessE2E, BuildFoldersOfAKilledRunAreRemovedByTheNextRun) {
  const fs::path dir = fresh_dir("buildleft");
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const std::map<std::string, std::string> env{{"TMPDIR", tmp.string()}};
  const pid_t pid =
      kloop_spawn({"optimize", "rmsnorm", "--budget", "3", "--store", (dir / "store").string()},
                  dir / "out.txt", env);
  // Wait until a build folder exists under this process's work folder, then kill -9.
  const fs::path work = tmp / ("kloop-work-" +
                               [] {
                                 char host[256] = {};
                                 ::gethostname(host, sizeof host - 1);
                                 return std::string(host);
                               }() +
                               "." + std::to_string(pid));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool building = false;
  while (!building && std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(work, ec))
      building |= e.path().filename().string().rfind("kloop-build-", 0) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  wait_exit(pid);
  ASSERT_TRUE(building) << read_file(dir / "out.txt");
  ASSERT_TRUE(fs::exists(work));
  // The killed kloop's build worker (its own process group) may still be compiling in there.
  const auto in_work = [&] {
    std::error_code ec;
    for (const auto& p : fs::directory_iterator("/proc", ec)) {
      std::error_code link_ec;
      const auto cwd = fs::read_symlink(p.path() / "cwd", link_ec).string();
      if (!link_ec && cwd.rfind(work.string(), 0) == 0) return true;
    }
    return false;
  };
  for (int i = 0; i < 300 && in_work(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const fs::path cand = dir / "candidate";
  fs::create_directories(cand);
  write_file(cand / "kernel.cu", good_source());
  write_file(cand / "manifest.json", good_manifest());
  kloop_run({"evaluate", "rmsnorm", "--candidate", cand.string()}, 240, env);
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(tmp))
    left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << left.front();
  fs::remove_all(dir);
}

// Item 11: a checker-coverage session is displayed by show and report; replay says why it has
// nothing to replay (a usage error, 2) instead of printing nothing.
TEST(RobustnessE2E, CheckerCoverageSessionIsDisplayed) {
  const fs::path dir = fresh_dir("ccshow");
  const fs::path store = dir / "store";
  const auto cc = kloop_run({"checker-coverage", "rmsnorm", "--max-mutants", "2", "--jobs", "2",
                             "--store", store.string()},
                            400);
  ASSERT_FALSE(cc.timed_out) << cc.stderr_text;
  ASSERT_TRUE(cc.exit_code == 0 || cc.exit_code == 3) << cc.stderr_text;
  const auto show = kloop_run({"show", "1", "--store", store.string()});
  EXPECT_EQ(show.exit_code, 0) << show.stderr_text;
  EXPECT_NE(show.stdout_text.find("checker coverage: 2 mutants"), std::string::npos)
      << show.stdout_text;
  const auto report =
      kloop_run({"report", "1", "--html", (dir / "r.html").string(), "--store", store.string()});
  EXPECT_EQ(report.exit_code, 0) << report.stderr_text;
  EXPECT_NE(read_file(dir / "r.html").find("id=\"checker-coverage\""), std::string::npos);
  const auto replay = kloop_run({"replay", "1", "--store", store.string()});
  EXPECT_EQ(replay.exit_code, 2) << replay.stdout_text << replay.stderr_text;
  EXPECT_NE(replay.stderr_text.find("checker-coverage run"), std::string::npos)
      << replay.stderr_text;
  fs::remove_all(dir);
}

} // namespace
} // namespace kloop::e2e
