// Running a sweep: its folder, one task, the local process pool, the Slurm job array, and the
// status of every task.
//
// A sweep folder DIR holds sweep.json (the spec and the plan, frozen at the first run), one folder
// per task DIR/tasks/<id>/attempt-<n>/ with that attempt's own store (store/), the optimize run's
// stdout.json and stderr.log, running.json while it runs and result.json when it has ended,
// submissions.jsonl (one line per Slurm submission: job id, array indices, script), and
// DIR/slurm/ (the job-array scripts and one output file per task and job).
//
// A task is done when its latest attempt's session completed (promoted, rejected or
// pending_device_validation: every one a verdict of the evaluator); failed when it ended without
// one (the result says why: an optimize exit without a completed session, a Slurm state such as
// TIMEOUT, or a runner that died); pending or running while Slurm (or the local runner) has it;
// missing when it was never run, or Slurm has no record of it and it left no result. `resume`
// runs the failed and missing ones again: an interrupted session continues (`optimize --resume`),
// anything else starts a fresh attempt. API keys reach tasks through the environment (Slurm's
// --export=ALL): no script, plan, result or store holds one.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/spec.h"

namespace kloop::sweep {

// The scheduler could not be used (a Slurm command missing or failing): not the caller's
// mistake, exit 3. SpecError is the caller's (exit 2).
class SchedulerError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class SweepDir {
public:
  // Creates DIR with sweep.json for `spec`, or opens it when it already holds the same plan;
  // throws SpecError when it holds another sweep (the plan would change under its tasks).
  static SweepDir create(const std::string& dir, const Spec& spec);
  static SweepDir open(const std::string& dir); // throws SpecError when DIR has no sweep.json

  const std::string& dir() const { return dir_; }
  const Spec& spec() const { return spec_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  const Task& task(int index) const; // throws SpecError naming the valid range
  std::string attempt_dir(const Task& t, int attempt) const;
  int latest_attempt(const Task& t) const; // 0: never run
  // result.json of the latest attempt, if it ended.
  std::optional<nlohmann::json> result(const Task& t) const;
  std::string backend() const; // of the last run: "local", "slurm" or "" (never run)
  void set_backend(const std::string& backend);
  void record_submission(const nlohmann::json& submission);
  std::vector<nlohmann::json> submissions() const;

private:
  SweepDir() = default;
  std::string dir_;
  Spec spec_;
  std::vector<Task> tasks_;
};

// `kloop sweep task DIR --index I`: runs the task once (resuming an interrupted session of its
// latest attempt, else in a fresh attempt) with `kloop_exe optimize ...`, records the sweep's
// names on the session (params "sweep": sweep, task id, operator, generator, price) and writes
// result.json. Returns 0 when the task is done, 1 otherwise. The environment passes through.
int run_task(const SweepDir& dir, int index, const std::string& kloop_exe);

// This process's whole environment (API keys included): what tasks and sbatch are given.
std::map<std::string, std::string> current_environment();

// Names the generators whose key variable is unset here ("" when all are set), so a sweep that
// would fail in every task is refused before it starts.
std::string missing_key_variables(const Spec& spec);

// The local backend: at most one task per device at a time (the devices of CUDA_VISIBLE_DEVICES,
// else /proc/driver/nvidia/gpus; each task sees only its own), or `local.cpu_jobs` tasks at a
// time on a host without a GPU. Blocks until every index has run; progress lines go to `log`.
// Returns how many tasks are not done.
int run_local(const SweepDir& dir, const std::vector<int>& indices, const std::string& kloop_exe,
              std::ostream& log);

// One array task's state as the scheduler tells it.
struct JobState {
  std::string state;  // Slurm's: PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...
  std::string reason; // Slurm's reason or exit code, "" when none
};

// The scheduler boundary (real: Slurm commands; unit tests use a fake).
class Scheduler {
public:
  virtual ~Scheduler() = default;
  // Submits a job-array script; returns the job id. Throws SchedulerError with its words.
  virtual std::string submit(const std::string& script_path) = 0;
  // The states of job `job_id`'s array tasks that the scheduler still knows, by array index.
  virtual std::map<int, JobState> query(const std::string& job_id) = 0;
};

// sbatch --parsable, squeue, then sacct (or, where accounting is off, scontrol) from PATH.
std::unique_ptr<Scheduler> slurm_scheduler();

// The job-array script for `indices` (sbatch --array=LIST%M, gres, time limit, one output file
// per task); exposed for tests.
std::string slurm_script(const SweepDir& dir, const std::vector<int>& indices,
                         const std::string& kloop_exe);

// Writes the script under DIR/slurm/, submits it and records the submission; returns the job id.
std::string submit_slurm(SweepDir& dir, Scheduler& scheduler, const std::vector<int>& indices,
                         const std::string& kloop_exe);

enum class TaskState { kDone, kPending, kRunning, kFailed, kMissing };
std::string_view name(TaskState s); // "done", "pending", "running", "failed", "missing"

struct TaskStatus {
  int index = 0;
  std::string id;
  TaskState state = TaskState::kMissing;
  std::string reason; // why failed or missing; the decision of a done task
  int attempt = 0;
  std::string store; // the latest attempt's store ("" when never run)
  std::optional<std::int64_t> session_id;
  std::string job; // "JOB_INDEX" of the latest Slurm submission holding it, "" when none
};

// The state of every task. `scheduler` is asked about tasks of Slurm submissions (null: none).
std::vector<TaskStatus> task_status(const SweepDir& dir, Scheduler* scheduler);

// Indices of failed and missing tasks: what `resume` runs again.
std::vector<int> to_rerun(const std::vector<TaskStatus>& status);

} // namespace kloop::sweep
