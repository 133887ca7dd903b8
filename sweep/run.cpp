// Sweep folders, tasks, the local pool and task status (sweep/run.h). Slurm is in slurm.cpp.
#include "sweep/run.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "evaluator/subprocess.h"
#include "store/error.h"
#include "store/store.h"

extern char** environ;

namespace kloop::sweep {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `p` atomically (temp file + rename), so a reader never sees half a file.
void write_atomic(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!(out << text) || !out.flush())
      throw SpecError(
          fmt::format("sweep: cannot write {} (disk full or read-only?)", tmp.string()));
  }
  fs::rename(tmp, p);
}

std::optional<json> read_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  auto j = json::parse(read_file(p), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r'))
    t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

} // namespace

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

namespace {

std::vector<std::string> optimize_argv(const Spec& s, const Task& t, const std::string& kloop,
                                       const std::string& store,
                                       std::optional<std::int64_t> resume) {
  std::vector<std::string> a{kloop, "optimize", t.op, "--store", store, "--json"};
  if (resume) {
    a.insert(a.end(), {"--resume", std::to_string(*resume)}); // the record's generator and seed
  } else {
    a.insert(a.end(), {"--budget", std::to_string(s.budget), "--provider", t.generator.provider,
                       "--seed", std::to_string(t.seed)});
    if (!t.generator.model.empty()) a.insert(a.end(), {"--model", t.generator.model});
    if (!t.generator.base_url.empty()) a.insert(a.end(), {"--base-url", t.generator.base_url});
  }
  if (!t.generator.api_key_env.empty())
    a.insert(a.end(), {"--api-key-env", t.generator.api_key_env});
  if (s.max_tokens > 0) a.insert(a.end(), {"--max-tokens", std::to_string(s.max_tokens)});
  if (s.max_cost_usd > 0) a.insert(a.end(), {"--max-cost-usd", fmt::format("{}", s.max_cost_usd)});
  a.insert(a.end(), {"--worker-timeout", fmt::format("{}", s.worker_timeout_s)});
  if (s.no_sandbox) a.push_back("--no-sandbox");
  return a;
}

// The session of an attempt's store (a task store holds one) and its status name.
std::optional<std::pair<std::int64_t, std::string>> attempt_session(const std::string& store_dir,
                                                                    bool writable) {
  std::error_code ec;
  if (!fs::exists(fs::path(store_dir) / "kloop.db", ec)) return std::nullopt;
  try {
    auto st = store::Store::open(store_dir, writable ? store::OpenMode::kReadWrite
                                                     : store::OpenMode::kReadOnly);
    const auto sessions = st.list_sessions();
    if (sessions.empty()) return std::nullopt;
    return std::pair{sessions.front().session.id,
                     std::string(store::name(sessions.front().session.status))};
  } catch (const store::StoreError&) {
    return std::nullopt;
  }
}

bool pid_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

} // namespace

// ---------------------------------------------------------------- SweepDir

SweepDir SweepDir::create(const std::string& dir, const Spec& spec) {
  const json plan_doc = [&] {
    json tasks = json::array();
    for (const auto& t : plan(spec))
      tasks.push_back(t.to_json());
    return json{{"format", "kloop-sweep/1"}, {"spec", spec.to_json()}, {"tasks", tasks}};
  }();
  const fs::path file = fs::path(dir) / "sweep.json";
  if (const auto existing = read_json(file)) {
    if ((*existing)["spec"] != plan_doc["spec"] || (*existing)["tasks"] != plan_doc["tasks"])
      throw SpecError(fmt::format(
          "sweep: {} holds another sweep (its plan differs from this file's); continue it with "
          "`kloop sweep resume {}`, or give a new --dir for this file",
          dir, dir));
    return open(dir);
  }
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "tasks", ec);
  if (ec)
    throw SpecError(
        fmt::format("sweep: cannot create {} ({}); give a writable --dir", dir, ec.message()));
  json doc = plan_doc;
  doc["backend"] = "";
  write_atomic(file, doc.dump(2) + "\n");
  return open(dir);
}

SweepDir SweepDir::open(const std::string& dir) {
  const auto doc = read_json(fs::path(dir) / "sweep.json");
  if (!doc)
    throw SpecError(fmt::format("sweep: {} has no readable sweep.json; it is not a sweep folder "
                                "(`kloop sweep run FILE --dir {}` makes one)",
                                dir, dir));
  SweepDir d;
  d.dir_ = fs::absolute(dir).lexically_normal().string();
  d.spec_ = spec_from_json(doc->at("spec"), d.dir_ + "/sweep.json");
  d.tasks_ = plan(d.spec_);
  if ((*doc)["tasks"].size() != d.tasks_.size())
    throw SpecError(fmt::format("sweep: {}/sweep.json lists {} tasks but its spec plans {}; the "
                                "file was edited",
                                d.dir_, (*doc)["tasks"].size(), d.tasks_.size()));
  return d;
}

const Task& SweepDir::task(int index) const {
  if (index < 0 || index >= static_cast<int>(tasks_.size()))
    throw SpecError(fmt::format("sweep: task index {} is out of range; the plan has tasks 0 to {}",
                                index, static_cast<int>(tasks_.size()) - 1));
  return tasks_[static_cast<std::size_t>(index)];
}

std::string SweepDir::attempt_dir(const Task& t, int attempt) const {
  return fmt::format("{}/tasks/{}/attempt-{}", dir_, t.id, attempt);
}

int SweepDir::latest_attempt(const Task& t) const {
  int n = 0;
  std::error_code ec;
  while (fs::exists(attempt_dir(t, n + 1), ec))
    ++n;
  return n;
}

std::optional<json> SweepDir::result(const Task& t) const {
  const int a = latest_attempt(t);
  if (a == 0) return std::nullopt;
  return read_json(fs::path(attempt_dir(t, a)) / "result.json");
}

std::string SweepDir::backend() const {
  const auto doc = read_json(fs::path(dir_) / "sweep.json");
  return doc ? doc->value("backend", std::string()) : std::string();
}

void SweepDir::set_backend(const std::string& backend) {
  auto doc = read_json(fs::path(dir_) / "sweep.json").value_or(json::object());
  doc["backend"] = backend;
  write_atomic(fs::path(dir_) / "sweep.json", doc.dump(2) + "\n");
}

void SweepDir::record_submission(const json& submission) {
  std::ofstream out(fs::path(dir_) / "submissions.jsonl", std::ios::app);
  if (!(out << submission.dump() << "\n"))
    throw SpecError(fmt::format("sweep: cannot append to {}/submissions.jsonl", dir_));
}

std::vector<json> SweepDir::submissions() const {
  std::vector<json> out;
  std::ifstream in(fs::path(dir_) / "submissions.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

// ---------------------------------------------------------------- one task

std::string missing_key_variables(const Spec& spec) {
  std::string out;
  for (const auto& g : spec.generators) {
    if (g.api_key_env.empty()) continue;
    const char* v = std::getenv(g.api_key_env.c_str());
    if (!v || !*v)
      out += fmt::format("{}generator {} reads its key from ${}, which is not set",
                         out.empty() ? "" : "; ", g.name, g.api_key_env);
  }
  return out;
}

int run_task(const SweepDir& dir, int index, const std::string& kloop_exe) {
  const Task& t = dir.task(index);
  int attempt = dir.latest_attempt(t);
  if (const auto r = dir.result(t); r && r->value("done", false)) return 0; // nothing to do
  // An interrupted session of the latest attempt continues; anything else gets a new attempt.
  std::optional<std::int64_t> resume;
  if (attempt > 0) {
    const auto s = attempt_session(dir.attempt_dir(t, attempt) + "/store", true);
    if (s && s->second == "interrupted") resume = s->first;
  }
  if (!resume) ++attempt;
  const fs::path adir = dir.attempt_dir(t, attempt);
  fs::create_directories(adir);
  const std::string store_dir = (adir / "store").string();
  const std::string started = store::now_iso8601();
  write_atomic(adir / "running.json",
               json{{"pid", ::getpid()}, {"host", host_name()}, {"started_at", started}}.dump() +
                   "\n");
  evaluator::SubprocessOptions o;
  o.cwd = adir.string();
  o.env = current_environment();
  o.deadline = std::chrono::hours(24 * 7); // the scheduler's time limit is the real bound
  o.output_cap = 16u << 20;
  const auto call =
      evaluator::run_subprocess(optimize_argv(dir.spec(), t, kloop_exe, store_dir, resume), o);
  write_atomic(adir / "stdout.json", call.stdout_text);
  write_atomic(adir / "stderr.log", call.stderr_text);
  json result = {{"task_id", t.id},
                 {"index", t.index},
                 {"attempt", attempt},
                 {"resumed_session", resume ? json(*resume) : json(nullptr)},
                 {"exit_code", call.exit_code},
                 {"signal", call.term_signal},
                 {"host", host_name()},
                 {"started_at", started},
                 {"ended_at", store::now_iso8601()},
                 {"wall_s", call.wall_ms / 1000.0}};
  const auto out = json::parse(call.stdout_text, nullptr, false);
  result["decision"] = out.is_object() ? out.value("decision", json()) : json();
  result["reason"] = out.is_object() ? out.value("reason", json()) : json();
  const auto session = attempt_session(store_dir, true);
  result["session_id"] = session ? json(session->first) : json(nullptr);
  result["session_status"] = session ? json(session->second) : json(nullptr);
  const bool done = session && session->second == "completed";
  result["done"] = done;
  if (!done) {
    std::string why = out.is_object() && out.contains("error") && out["error"].is_string()
                          ? out["error"].get<std::string>()
                          : last_line(call.stderr_text);
    if (result["reason"].is_string() && why.empty()) why = result["reason"].get<std::string>();
    result["failure"] = fmt::format(
        "kloop optimize {} with session {}: {}",
        call.term_signal ? fmt::format("was killed by signal {}", call.term_signal)
                         : fmt::format("exited {}", call.exit_code),
        session ? session->second : std::string("none"), why.empty() ? "no message" : why);
  }
  if (session) {
    try { // the sweep's names on the session, for `kloop compare --by generator`
      auto st = store::Store::open(store_dir);
      json sweep = {{"sweep", dir.spec().name},
                    {"task_id", t.id},
                    {"operator", t.op},
                    {"generator", t.generator.name},
                    {"attempt", attempt}};
      if (t.generator.usd_per_mtok_input)
        sweep["price_usd_per_mtok"] = {{"input", *t.generator.usd_per_mtok_input},
                                       {"output", t.generator.usd_per_mtok_output.value_or(0)}};
      st.set_session_param(session->first, "sweep", sweep);
    } catch (const store::StoreError& e) {
      result["note"] =
          std::string("could not record the sweep's names on the session: ") + e.what();
    }
  }
  write_atomic(adir / "result.json", result.dump(2) + "\n");
  std::error_code ec;
  fs::remove(adir / "running.json", ec);
  return done ? 0 : 1;
}

// ---------------------------------------------------------------- local pool

namespace {

// The devices of this host, one slot each; empty: no GPU.
std::vector<std::string> local_devices() {
  std::vector<std::string> out;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::stringstream ss(v);
    for (std::string d; std::getline(ss, d, ',');)
      if (!d.empty()) out.push_back(d);
    return out;
  }
  std::error_code ec;
  int n = 0;
  for (auto it = fs::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != fs::directory_iterator(); ++it)
    ++n;
  for (int i = 0; i < n; ++i)
    out.push_back(std::to_string(i));
  return out;
}

pid_t spawn_task(const SweepDir& dir, int index, const std::string& kloop,
                 const std::string& device) {
  std::vector<std::string> args{kloop,     "sweep",   "task",
                                dir.dir(), "--index", std::to_string(index)};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  auto env = current_environment();
  if (!device.empty()) env["CUDA_VISIBLE_DEVICES"] = device;
  std::vector<std::string> kv;
  for (const auto& [k, v] : env)
    kv.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : kv)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, kloop.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw SpecError(fmt::format("sweep: cannot start {} ({})", kloop, std::strerror(rc)));
  return pid;
}

} // namespace

int run_local(const SweepDir& dir, const std::vector<int>& indices, const std::string& kloop_exe,
              std::ostream& log) {
  std::vector<std::string> slots = local_devices();
  const bool gpus = !slots.empty();
  if (!gpus) slots.assign(static_cast<std::size_t>(dir.spec().local_cpu_jobs), std::string());
  log << fmt::format("sweep {}: {} task(s), {} at a time ({})\n", dir.spec().name, indices.size(),
                     slots.size(), gpus ? "one per GPU" : "no GPU here: local.cpu_jobs, CPU-only");
  std::deque<int> queue(indices.begin(), indices.end());
  std::map<pid_t, std::pair<int, std::size_t>> running; // pid -> (index, slot)
  std::vector<bool> busy(slots.size(), false);
  int not_done = 0;
  while (!queue.empty() || !running.empty()) {
    for (std::size_t s = 0; s < slots.size() && !queue.empty(); ++s) {
      if (busy[s]) continue;
      const int index = queue.front();
      queue.pop_front();
      const pid_t pid = spawn_task(dir, index, kloop_exe, slots[s]);
      running[pid] = {index, s};
      busy[s] = true;
      log << fmt::format("  started {} {}\n", dir.task(index).id,
                         gpus ? "on device " + slots[s] : std::string());
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const auto [index, slot] = it->second;
    running.erase(it);
    busy[slot] = false;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    not_done += ok ? 0 : 1;
    const auto r = dir.result(dir.task(index));
    log << fmt::format("  {} {}: {}\n", ok ? "done" : "FAILED", dir.task(index).id,
                       r ? r->value("failure", r->value("decision", std::string())) : "no result");
  }
  return not_done;
}

// ---------------------------------------------------------------- status

std::string_view name(TaskState s) {
  switch (s) {
  case TaskState::kDone:
    return "done";
  case TaskState::kPending:
    return "pending";
  case TaskState::kRunning:
    return "running";
  case TaskState::kFailed:
    return "failed";
  case TaskState::kMissing:
    return "missing";
  }
  return "unknown";
}

namespace {

// The last line of a task's Slurm output that says why Slurm ended it ("*** JOB 12 ON n1
// CANCELLED AT ... DUE TO TIME LIMIT ***"), or "".
std::string slurm_log_reason(const fs::path& log) {
  std::ifstream in(log);
  std::string found;
  for (std::string line; std::getline(in, line);)
    if (line.find("***") != std::string::npos &&
        (line.find("CANCELLED") != std::string::npos || line.find("DUE TO") != std::string::npos))
      found = line;
  return found;
}

} // namespace

std::vector<TaskStatus> task_status(const SweepDir& dir, Scheduler* scheduler) {
  // The latest submission of each index, and what the scheduler says of it.
  std::map<int, std::string> job_of;
  for (const auto& s : dir.submissions())
    for (const auto& i : s.value("indices", json::array()))
      job_of[i.get<int>()] = s.value("job_id", std::string());
  std::map<std::string, std::map<int, JobState>> states;
  if (scheduler)
    for (const auto& [index, job] : job_of)
      if (!states.count(job)) states[job] = scheduler->query(job);
  std::vector<TaskStatus> out;
  for (const auto& t : dir.tasks()) {
    TaskStatus s;
    s.index = t.index;
    s.id = t.id;
    s.attempt = dir.latest_attempt(t);
    if (s.attempt > 0) s.store = dir.attempt_dir(t, s.attempt) + "/store";
    const auto job = job_of.find(t.index);
    if (job != job_of.end()) s.job = fmt::format("{}_{}", job->second, t.index);
    const auto r = dir.result(t);
    if (r && r->value("done", false)) {
      s.state = TaskState::kDone;
      s.reason = r->value("decision", std::string());
      s.session_id = r->value("session_id", json()).is_number()
                         ? std::optional<std::int64_t>((*r)["session_id"].get<std::int64_t>())
                         : std::nullopt;
      out.push_back(s);
      continue;
    }
    // A queued or running Slurm task, newer than any result of an earlier attempt.
    std::optional<JobState> js;
    if (job != job_of.end() && states.count(job->second))
      if (const auto it = states[job->second].find(t.index); it != states[job->second].end())
        js = it->second;
    if (js && (js->state == "PENDING" || js->state == "CONFIGURING" || js->state == "REQUEUED")) {
      s.state = TaskState::kPending;
      s.reason = js->reason;
    } else if (js && (js->state == "RUNNING" || js->state == "COMPLETING")) {
      s.state = TaskState::kRunning;
    } else if (const auto run = s.attempt > 0 ? read_json(fs::path(dir.attempt_dir(t, s.attempt)) /
                                                          "running.json")
                                              : std::nullopt;
               run && !r && job == job_of.end()) {
      // The local backend: a runner on this host that is alive, or one that died.
      const bool alive = run->value("host", "") == host_name() && pid_alive(run->value("pid", 0L));
      s.state = alive ? TaskState::kRunning : TaskState::kFailed;
      if (!alive)
        s.reason = fmt::format("the task runner (pid {} on {}) ended without a result "
                               "(killed?)",
                               run->value("pid", 0L), run->value("host", std::string("?")));
    } else if (r) {
      s.state = TaskState::kFailed;
      s.reason = r->value("failure", std::string("ended without a completed session"));
    } else if (js) {
      s.state = TaskState::kFailed;
      const std::string why =
          slurm_log_reason(fs::path(dir.dir()) / "slurm" / "logs" /
                           fmt::format("task-{}.job-{}.out", t.index, job->second));
      s.reason = fmt::format("slurm: {}{}{}; the task wrote no result", js->state,
                             js->reason.empty() ? "" : " (" + js->reason + ")",
                             why.empty() ? "" : ": " + why);
    } else {
      s.state = TaskState::kMissing;
      s.reason = job == job_of.end()
                     ? std::string("never run")
                     : fmt::format("submitted as job {} but Slurm has no record of it and it "
                                   "left no result (see {}/slurm/logs)",
                                   job->second, dir.dir());
    }
    out.push_back(s);
  }
  return out;
}

std::vector<int> to_rerun(const std::vector<TaskStatus>& status) {
  std::vector<int> out;
  for (const auto& s : status)
    if (s.state == TaskState::kFailed || s.state == TaskState::kMissing) out.push_back(s.index);
  return out;
}

} // namespace kloop::sweep
