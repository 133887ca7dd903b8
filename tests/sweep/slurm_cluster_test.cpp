// A real single-node Slurm cluster on localhost (Debian's slurm-wlm and munge): the test starts
// munged, slurmctld and slurmd in a temporary folder with a minimal slurm.conf (no GPUs, no
// accounting database), runs a sweep of every registered operator x {offline, a loopback
// OpenAI-compatible server} x 2 seeds CPU-only through `kloop sweep run --backend slurm`, where
// the server's tasks fail the first time (the key in the environment is wrong), resumes only
// those with the right key, then merges the task stores and compares the generators. Every wait is
// bounded; the daemons are stopped by a destructor, so also when an assertion fails.
// Slurm runs jobs as their user and slurmd needs root for that: the test skips (77) when not
// root. CI runs as root on a fresh Debian 12 machine, where scripts/bootstrap.sh installed Slurm.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

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
#include "sweep/spec.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kKloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";
constexpr const char* kRightKey = "sk-kloop-ci-RIGHT-4f1c9e";
constexpr const char* kWrongKey = "sk-kloop-ci-WRONG-77a0b2";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string tool(const std::string& name) {
  for (const char* d : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"})
    if (::access((std::string(d) + "/" + name).c_str(), X_OK) == 0)
      return std::string(d) + "/" + name;
  return "";
}

// The cluster: munged + slurmctld + slurmd under one folder, stopped in the destructor.
class Cluster {
public:
  explicit Cluster(const fs::path& dir) : dir_(dir) {}
  ~Cluster() { stop(); }

  // Starts the daemons and waits (at most 60 s) until the node is idle; "" or why not.
  std::string start() {
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "spool");
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    {
      std::ofstream key(dir_ / "munge.key", std::ios::binary);
      std::ifstream rnd("/dev/urandom", std::ios::binary);
      std::string bytes(1024, '\0');
      rnd.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      key << bytes;
    }
    fs::permissions(dir_ / "munge.key", fs::perms::owner_read);
    const std::string d = dir_.string();
    auto r =
        run(tool("munged"), {"--key-file=" + d + "/munge.key", "--socket=" + d + "/munge.sock",
                             "--pid-file=" + d + "/munged.pid", "--log-file=" + d + "/munged.log",
                             "--seed-file=" + d + "/munged.seed"});
    if (!r.exited_ok())
      return "munged did not start: " + r.stderr_text + read_file(dir_ / "munged.log");
    munged_ = true;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string h = host;
    h = h.substr(0, h.find('.'));
    std::ofstream(dir_ / "slurm.conf")
        << "ClusterName=kloopci\nSlurmctldHost=" << h << "(127.0.0.1)\nSlurmUser=root\n"
        << "SlurmdUser=root\nSlurmctldPort=" << free_port() << "\nSlurmdPort=" << free_port()
        << "\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << d
        << "/munge.sock\nStateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d
        << "/spool\nSlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d
        << "/slurmd.pid\nSlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d
        << "/slurmd.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
        << "SelectTypeParameters=CR_CPU\nMpiDefault=none\nReturnToService=2\n"
        << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        << "MinJobAge=3600\nNodeName=kloopnode NodeHostname=" << h
        << " NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN\n"
        << "PartitionName=kloop Nodes=kloopnode Default=YES MaxTime=INFINITE State=UP\n";
    r = run(tool("slurmctld"), {"-i"});
    if (!r.exited_ok()) return "slurmctld did not start: " + r.stderr_text + logs();
    ctld_ = true;
    r = run(tool("slurmd"), {"-N", "kloopnode"});
    if (!r.exited_ok()) return "slurmd did not start: " + r.stderr_text + logs();
    slurmd_ = true;
    for (auto end = Clock::now() + std::chrono::seconds(60); Clock::now() < end;) {
      const auto s = run(tool("sinfo"), {"-h", "-o", "%t"});
      if (s.exited_ok() && s.stdout_text.find("idle") != std::string::npos) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return "the node did not become idle within 60 s: " + logs();
  }

  void stop() {
    if (ctld_) {
      run(tool("scancel"), {"--full", "--user=root"});
      run(tool("scontrol"), {"shutdown"}); // stops slurmctld and slurmd
    }
    for (const char* pid_file : {"slurmd.pid", "slurmctld.pid", "munged.pid"}) {
      const std::string text = read_file(dir_ / pid_file);
      const pid_t pid = text.empty() ? 0 : static_cast<pid_t>(std::atol(text.c_str()));
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
    }
    ctld_ = slurmd_ = munged_ = false;
  }

  // The environment every Slurm and kloop command of the test gets.
  std::map<std::string, std::string> env(const std::string& key) const {
    return {{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"},
            {"HOME", "/tmp"},
            {"SLURM_CONF", (dir_ / "slurm.conf").string()},
            {"KLOOP_FAKE_KEY", key}};
  }

  kloop::evaluator::ToolCall run(const std::string& exe, const std::vector<std::string>& args,
                                 const std::string& key = "", int deadline_s = 60) const {
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), args.begin(), args.end());
    kloop::evaluator::SubprocessOptions o;
    o.env = env(key);
    o.deadline = std::chrono::seconds(deadline_s);
    return kloop::evaluator::run_subprocess(argv, o);
  }

  std::string logs() const {
    return "\n--- slurmctld.log\n" + read_file(dir_ / "slurmctld.log") + "\n--- slurmd.log\n" +
           read_file(dir_ / "slurmd.log");
  }

private:
  fs::path dir_;
  bool munged_ = false, ctld_ = false, slurmd_ = false;
};

// An OpenAI-compatible server on 127.0.0.1 that answers only the right key (401 otherwise) with
// the evaluator's known-good test kernel.
class FakeOpenAi {
public:
  FakeOpenAi() {
    const std::string dir = std::string(KLOOP_SOURCE_DIR) + "/tests/evaluator/fixtures/good/";
    const std::string reply = "```cuda\n" + read_file(dir + "kernel.cu") + "\n```\n\n```json\n" +
                              read_file(dir + "manifest.json") + "\n```\n";
    server_.Post("/v1/chat/completions", [reply, this](const httplib::Request& req,
                                                       httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        authorizations_.insert(req.get_header_value("Authorization"));
      }
      if (req.get_header_value("Authorization") != std::string("Bearer ") + kRightKey) {
        res.status = 401;
        res.set_content(R"({"error":{"message":"invalid api key","type":"auth"}})",
                        "application/json");
        return;
      }
      const json body = {
          {"id", "x"},
          {"object", "chat.completion"},
          {"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", reply}}},
             {"finish_reason", "stop"}}}},
          {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 50}, {"total_tokens", 150}}}};
      res.set_content(body.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeOpenAi() {
    server_.stop();
    thread_.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // The Authorization headers the server has seen.
  std::set<std::string> authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::set<std::string> authorizations_;
};

// Polls `kloop sweep status` until no task is pending or running (at most `limit_s`).
json wait_for_sweep(const Cluster& c, const std::string& dir, const std::string& key, int limit_s) {
  json st;
  for (auto end = Clock::now() + std::chrono::seconds(limit_s); Clock::now() < end;) {
    const auto r = c.run(kKloop, {"sweep", "status", dir, "--json"}, key);
    st = json::parse(r.stdout_text, nullptr, false);
    if (st.is_object() && st["counts"].value("pending", 0) == 0 &&
        st["counts"].value("running", 0) == 0 && st["counts"].value("missing", 0) == 0)
      return st;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  ADD_FAILURE() << "the sweep did not finish within " << limit_s << " s: " << st.dump(2)
                << c.logs();
  return st;
}

// Every file under `dir`, searched for `needle`; the paths that hold it.
std::vector<std::string> files_holding(const fs::path& dir, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && read_file(e.path()).find(needle) != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

TEST(SlurmCluster, SweepRunsAsAJobArrayResumesOnlyFailedTasksThenMergesAndCompares) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "slurmd runs jobs as their user and needs root; run as root (CI does)";
  for (const char* t : {"munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol"})
    ASSERT_FALSE(tool(t).empty()) << t
                                  << " is missing: run scripts/bootstrap.sh (it installs "
                                     "Debian's slurm-wlm and munge)";
  const auto t0 = Clock::now();
  const fs::path root = fs::temp_directory_path() / ("kloop-slurm-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  Cluster cluster(root / "cluster");
  const std::string why = cluster.start();
  ASSERT_EQ(why, "");
  FakeOpenAi server;
  const json spec = {{"name", "ci"},
                     {"operators", "all"},
                     {"seeds", {1, 2}},
                     {"budget", 1},
                     {"generators",
                      {{{"name", "offline"}, {"provider", "offline"}},
                       {{"name", "fake"},
                        {"provider", "openai"},
                        {"model", "fake-model"},
                        {"base_url", server.base_url()},
                        {"api_key_env", "KLOOP_FAKE_KEY"},
                        {"price_usd_per_mtok", {{"input", 1.0}, {"output", 2.0}}}}}},
                     {"slurm", {{"gres", ""}, {"max_parallel", 2}, {"time_limit", "15"}}}};
  const fs::path file = root / "sweep.json";
  std::ofstream(file) << spec.dump(2);
  const std::string dir = (root / "sweep").string();
  const std::size_t tasks = kloop::sweep::registered_operators().size() * 4;

  // 1. Submitted with the wrong key: the offline tasks end (pending_device_validation), the
  // server's fail (401: the provider never answered).
  auto r = cluster.run(kKloop, {"sweep", "run", file.string(), "--dir", dir, "--backend", "slurm"},
                       kWrongKey);
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("submitted " + std::to_string(tasks) + " task(s)"),
            std::string::npos)
      << r.stdout_text;
  json st = wait_for_sweep(cluster, dir, kWrongKey, 360);
  ASSERT_EQ(st["tasks"].size(), tasks);
  std::vector<int> fake_tasks;
  for (const auto& t : st["tasks"]) {
    const bool fake = t["id"].get<std::string>().find(".fake.") != std::string::npos;
    if (fake) fake_tasks.push_back(t["index"].get<int>());
    EXPECT_EQ(t["state"], fake ? "failed" : "done") << t.dump();
    if (fake) // a rejected key fails every request alike: the session stops after the first
      EXPECT_NE(t["reason"].get<std::string>().find("would fail the same way if asked again"),
                std::string::npos)
          << t.dump();
    else
      EXPECT_EQ(t["reason"], "pending_device_validation") << t.dump();
  }
  ASSERT_EQ(fake_tasks.size(), tasks / 2);
  // The tasks got the key from the submitting environment (a wrong one, so far).
  EXPECT_EQ(server.authorizations(), std::set<std::string>{std::string("Bearer ") + kWrongKey});

  // 2. Resumed with the right key: only the failed tasks are submitted again, and now end.
  r = cluster.run(kKloop, {"sweep", "resume", dir}, kRightKey);
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  std::string last;
  {
    std::ifstream in(fs::path(dir) / "submissions.jsonl");
    for (std::string line; std::getline(in, line);)
      last = line;
  }
  EXPECT_EQ(json::parse(last)["indices"].get<std::vector<int>>(), fake_tasks) << last;
  st = wait_for_sweep(cluster, dir, kRightKey, 360);
  EXPECT_EQ(st["counts"].value("done", 0), static_cast<int>(tasks)) << st.dump(2);
  EXPECT_TRUE(server.authorizations().count(std::string("Bearer ") + kRightKey));
  // The keys went through the environment only: no script, log, result or store holds them.
  EXPECT_EQ(files_holding(dir, kRightKey), std::vector<std::string>{});
  EXPECT_EQ(files_holding(dir, kWrongKey), std::vector<std::string>{});

  // 3. Merge the task stores (twice: the second adds nothing), verify, compare.
  r = cluster.run(kKloop, {"sweep", "stores", dir});
  std::vector<std::string> merge{"store", "merge", (root / "merged").string()};
  std::stringstream ss(r.stdout_text);
  for (std::string line; std::getline(ss, line);)
    merge.push_back(line);
  ASSERT_EQ(merge.size(), 3 + tasks) << r.stdout_text;
  r = cluster.run(kKloop, merge);
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  merge.push_back("--json");
  r = cluster.run(kKloop, merge);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  for (const auto& s : json::parse(r.stdout_text)["sources"])
    EXPECT_TRUE(s["merged"].empty()) << s.dump();
  r = cluster.run(kKloop, {"store", "verify", "--store", (root / "merged").string()});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("row chains: " + std::to_string(tasks) + " session(s) chained"),
            std::string::npos)
      << r.stdout_text;
  r = cluster.run(kKloop, {"compare", "--by", "generator", "--store", (root / "merged").string(),
                           "--json", "--html", (root / "compare.html").string()});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  const json cmp = json::parse(r.stdout_text);
  ASSERT_EQ(cmp["overall"].size(), 2u) << cmp.dump(2);
  for (const auto& g : cmp["overall"]) {
    EXPECT_EQ(g["sessions"], tasks / 2) << g.dump();
    EXPECT_EQ(g["pending_device_validation"], tasks / 2) << g.dump();
    EXPECT_EQ(g["success_rate"], 0.0);
    EXPECT_TRUE(g["success_interval"].is_array());
    if (g["generator"] == "fake") {
      EXPECT_EQ(g["tokens"], 150 * static_cast<int>(tasks / 2)) << g.dump();
      EXPECT_NEAR(g["cost_usd"].get<double>(), (tasks / 2) * (100 * 1.0 + 50 * 2.0) / 1e6, 1e-12);
    } else {
      EXPECT_EQ(g["generator"], "offline");
      EXPECT_TRUE(g["cost_usd"].is_null());
    }
  }
  const std::string html = read_file(root / "compare.html");
  EXPECT_NE(html.find("<section id=\"generator-comparison\">"), std::string::npos);
  EXPECT_NE(html.find("<svg id=\"success-rate\""), std::string::npos);
  cluster.stop();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("slurm cluster sweep: %zu tasks (+%zu resumed), merge and compare in %.1f s\n", tasks,
              fake_tasks.size(), secs);
  fs::remove_all(root);
}

} // namespace
