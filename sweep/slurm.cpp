// The Slurm backend (sweep/run.h): the job-array script, sbatch --parsable, and the task states
// from squeue, then sacct, or scontrol where accounting is off (no slurmdbd).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "evaluator/subprocess.h"
#include "store/store.h"
#include "sweep/run.h"

namespace kloop::sweep {

namespace fs = std::filesystem;

namespace {

// The absolute path of `tool` on PATH, or "" when absent.
std::string on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(ss, d, ':');)
    if (!d.empty() && ::access((d + "/" + tool).c_str(), X_OK) == 0) return d + "/" + tool;
  return "";
}

// Runs a Slurm command. `full_env`: with this process's whole environment (sbatch: the job gets it
// through --export=ALL, API keys included); otherwise PATH, HOME, USER, LOGNAME and the Slurm
// configuration variables only.
evaluator::ToolCall run_tool(const std::string& tool, std::vector<std::string> args,
                             bool full_env = false) {
  const std::string exe = on_path(tool);
  if (exe.empty())
    throw SchedulerError(
        fmt::format("sweep: `{}` is not on PATH; the slurm backend needs the Slurm "
                    "client commands (Debian: slurm-client) on this host",
                    tool));
  args.insert(args.begin(), exe);
  evaluator::SubprocessOptions o;
  if (full_env) {
    o.env = current_environment();
  } else {
    for (const char* k : {"PATH", "HOME", "USER", "LOGNAME", "SLURM_CONF", "SLURM_CLUSTERS"})
      if (const char* v = std::getenv(k)) o.env[k] = v;
  }
  o.deadline = std::chrono::seconds(60);
  return evaluator::run_subprocess(args, o);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.pop_back();
  return s;
}

// "123_4|RUNNING|None" lines (squeue -o "%i|%T|%r", sacct -P) into states by array index.
void parse_lines(const std::string& text, const std::string& job, bool has_reason,
                 std::map<int, JobState>& out, bool overwrite) {
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, '|');)
      f.push_back(x);
    if (f.size() < 2 || f[0].rfind(job + "_", 0) != 0) continue;
    const std::string idx = f[0].substr(job.size() + 1);
    if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos) continue;
    const int i = std::stoi(idx);
    if (!overwrite && out.count(i)) continue;
    JobState js{f[1].substr(0, f[1].find(' ')), ""}; // sacct: "CANCELLED by 0"
    if (f.size() > 2 && f[2] != "None" && f[2] != "0:0")
      js.reason = has_reason ? f[2] : "exit code " + f[2];
    out[i] = js;
  }
}

// `scontrol -o show job JOB`: one line per array task, "ArrayTaskId=N JobState=S Reason=R ...".
void parse_scontrol(const std::string& text, std::map<int, JobState>& out) {
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    std::map<std::string, std::string> kv;
    std::stringstream ls(line);
    for (std::string tok; ls >> tok;)
      if (const auto eq = tok.find('='); eq != std::string::npos)
        kv[tok.substr(0, eq)] = tok.substr(eq + 1);
    const std::string idx = kv["ArrayTaskId"];
    if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos) continue;
    const int i = std::stoi(idx);
    if (out.count(i)) continue; // squeue said it first
    JobState js{kv["JobState"], ""};
    if (kv["Reason"] != "None" && !kv["Reason"].empty()) js.reason = kv["Reason"];
    if (kv["ExitCode"] != "0:0" && !kv["ExitCode"].empty())
      js.reason += (js.reason.empty() ? "" : ", ") + ("exit code " + kv["ExitCode"]);
    out[i] = js;
  }
}

class SlurmScheduler : public Scheduler {
public:
  std::string submit(const std::string& script) override {
    const auto call = run_tool("sbatch", {"--parsable", script}, true);
    const std::string out = trim(call.stdout_text);
    const std::string id = out.substr(0, out.find(';')); // "JOBID[;CLUSTER]"
    if (!call.exited_ok() || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw SchedulerError(fmt::format("sweep: sbatch --parsable {} failed (exit {}): {}", script,
                                       call.exit_code, trim(call.stderr_text + call.stdout_text)));
    return id;
  }
  std::map<int, JobState> query(const std::string& job) override {
    std::map<int, JobState> out;
    const auto q = run_tool("squeue", {"-h", "-r", "-j", job, "-o", "%i|%T|%r"});
    if (q.exited_ok()) parse_lines(q.stdout_text, job, true, out, true);
    const auto a = run_tool("sacct", {"-n", "-P", "-X", "-j", job, "-o", "JobID,State,ExitCode"});
    if (a.exited_ok() && a.stderr_text.empty()) {
      parse_lines(a.stdout_text, job, false, out, false);
    } else { // accounting off (no slurmdbd): the controller still knows recent jobs
      const auto s = run_tool("scontrol", {"-o", "show", "job", job});
      if (s.exited_ok()) parse_scontrol(s.stdout_text, out);
    }
    return out;
  }
};

// Characters an #SBATCH line or a single-quoted shell word could not carry safely.
void require_plain_path(const std::string& p, const char* what) {
  if (p.find_first_of(" \t\n'\"\\$`%") != std::string::npos)
    throw SpecError(fmt::format("sweep: the {} {} holds a space, quote, backslash, $, ` or %, "
                                "which an #SBATCH line cannot carry; use a plain path",
                                what, p));
}

} // namespace

std::unique_ptr<Scheduler> slurm_scheduler() {
  return std::make_unique<SlurmScheduler>();
}

std::string slurm_script(const SweepDir& dir, const std::vector<int>& indices,
                         const std::string& kloop_exe) {
  require_plain_path(dir.dir(), "sweep folder");
  require_plain_path(kloop_exe, "kloop executable");
  const auto& s = dir.spec().slurm;
  // Runs of consecutive indices as ranges: 0-3,5,7-8.
  std::string list;
  for (std::size_t k = 0; k < indices.size();) {
    std::size_t e = k;
    while (e + 1 < indices.size() && indices[e + 1] == indices[e] + 1)
      ++e;
    list += (list.empty() ? "" : ",") + std::to_string(indices[k]) +
            (e > k ? "-" + std::to_string(indices[e]) : std::string());
    k = e + 1;
  }
  std::string h = "#!/bin/bash\n";
  h += fmt::format("# kloop sweep {}: {} task(s) of {}/sweep.json, one per array index.\n",
                   dir.spec().name, indices.size(), dir.dir());
  h += "# API keys are not in this script: tasks read them from the submitting environment\n"
       "# (--export=ALL), by the variable names in the sweep file.\n";
  h += fmt::format("#SBATCH --job-name=kloop-{}\n", dir.spec().name);
  h += fmt::format("#SBATCH --array={}%{}\n", list, s.max_parallel);
  h += fmt::format("#SBATCH --time={}\n", s.time_limit);
  if (!s.gres.empty()) h += fmt::format("#SBATCH --gres={}\n", s.gres);
  if (!s.partition.empty()) h += fmt::format("#SBATCH --partition={}\n", s.partition);
  if (s.cpus_per_task > 0) h += fmt::format("#SBATCH --cpus-per-task={}\n", s.cpus_per_task);
  if (!s.mem.empty()) h += fmt::format("#SBATCH --mem={}\n", s.mem);
  h += "#SBATCH --export=ALL\n";
  h += fmt::format("#SBATCH --output={}/slurm/logs/task-%a.job-%A.out\n", dir.dir());
  for (const auto& a : s.sbatch_args)
    h += "#SBATCH " + a + "\n";
  h += fmt::format("exec '{}' sweep task '{}' --index \"$SLURM_ARRAY_TASK_ID\"\n", kloop_exe,
                   dir.dir());
  return h;
}

std::string submit_slurm(SweepDir& dir, Scheduler& scheduler, const std::vector<int>& indices,
                         const std::string& kloop_exe) {
  const std::string text = slurm_script(dir, indices, kloop_exe);
  const fs::path sdir = fs::path(dir.dir()) / "slurm";
  fs::create_directories(sdir / "logs");
  const fs::path script = sdir / fmt::format("array-{}.sh", dir.submissions().size() + 1);
  {
    std::ofstream out(script, std::ios::trunc);
    if (!(out << text) || !out.flush())
      throw SpecError(fmt::format("sweep: cannot write {}", script.string()));
  }
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read,
                  fs::perm_options::replace);
  const std::string job = scheduler.submit(script.string());
  dir.record_submission({{"backend", "slurm"},
                         {"job_id", job},
                         {"indices", indices},
                         {"script", script.string()},
                         {"submitted_at", store::now_iso8601()}});
  dir.set_backend("slurm");
  return job;
}

} // namespace kloop::sweep
