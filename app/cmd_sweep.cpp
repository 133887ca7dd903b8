// `kloop sweep plan|run|status|resume|stores|task`: sweeps over operators x generators x seeds on
// this host (a process pool, one task per GPU) or on a Slurm cluster (one job array), each task
// with its own store (sweep/run.h).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/core.h>

#include "app/commands.h"
#include "evaluator/subprocess.h"
#include "sweep/run.h"

namespace kloop::app {
namespace {

struct SweepArgs {
  std::string file, dir, backend;
  int index = -1;
  bool json = false, all = false;
};

std::string kloop_exe() {
  return evaluator::self_exe_dir() + "/kloop";
}

sweep::Spec read_spec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read sweep file {}; check the path", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return sweep::parse_spec(ss.str(), path);
}

// Runs `body`, turning sweep errors into exit codes: a bad file or folder is the caller's (2),
// a scheduler that cannot be used is not (3).
template <class F> int guarded(F&& body) {
  try {
    return body();
  } catch (const sweep::SpecError& e) {
    throw UsageError(e.what());
  } catch (const sweep::SchedulerError& e) {
    std::fprintf(stderr, "kloop sweep: %s\n", e.what());
    return kExitCouldNotFinish;
  }
}

int cmd_plan(const SweepArgs& a) {
  const auto spec = read_spec(a.file);
  const auto tasks = sweep::plan(spec);
  if (a.json) {
    nlohmann::json t = nlohmann::json::array();
    for (const auto& task : tasks)
      t.push_back(task.to_json());
    std::cout << nlohmann::json{{"spec", spec.to_json()}, {"tasks", t}}.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("sweep %s: %zu operator(s) x %zu generator(s) x %zu seed(s) = %zu task(s), budget "
              "%d\n",
              spec.name.c_str(), spec.operators.size(), spec.generators.size(), spec.seeds.size(),
              tasks.size(), spec.budget);
  for (const auto& t : tasks)
    std::printf("%5d  %s\n", t.index, t.id.c_str());
  return kExitOk;
}

// Runs or submits `indices` on `backend`; returns the exit code.
int launch(sweep::SweepDir& d, const std::vector<int>& indices, const std::string& backend) {
  if (const std::string missing = sweep::missing_key_variables(d.spec()); !missing.empty())
    throw UsageError(fmt::format("{}; export it before running the sweep (tasks read keys from "
                                 "the environment; kloop writes them nowhere)",
                                 missing));
  if (indices.empty()) {
    std::printf("sweep %s: nothing to run (every task is done, pending or running; `kloop sweep "
                "status %s`)\n",
                d.spec().name.c_str(), d.dir().c_str());
    return kExitOk;
  }
  if (backend == "slurm") {
    auto sched = sweep::slurm_scheduler();
    const std::string job = sweep::submit_slurm(d, *sched, indices, kloop_exe());
    std::printf("sweep %s: submitted %zu task(s) as Slurm job array %s; follow it with `kloop "
                "sweep status %s`\n",
                d.spec().name.c_str(), indices.size(), job.c_str(), d.dir().c_str());
    return kExitOk;
  }
  d.set_backend("local");
  const int not_done = sweep::run_local(d, indices, kloop_exe(), std::cout);
  std::printf("sweep %s: %zu task(s) run, %d not done; `kloop sweep status %s`\n",
              d.spec().name.c_str(), indices.size(), not_done, d.dir().c_str());
  return not_done == 0 ? kExitOk : kExitCouldNotFinish;
}

int cmd_run(const SweepArgs& a) {
  const auto spec = read_spec(a.file);
  const std::string dir = a.dir.empty() ? "sweep-" + spec.name : a.dir;
  auto d = sweep::SweepDir::create(dir, spec);
  const auto status = sweep::task_status(d, nullptr);
  std::vector<int> todo;
  for (const auto& s : status)
    if (s.state == sweep::TaskState::kMissing && s.job.empty()) todo.push_back(s.index);
  return launch(d, todo, a.backend.empty() ? "local" : a.backend);
}

std::vector<sweep::TaskStatus> statuses(const sweep::SweepDir& d) {
  std::unique_ptr<sweep::Scheduler> sched;
  if (!d.submissions().empty()) sched = sweep::slurm_scheduler();
  return sweep::task_status(d, sched.get());
}

int cmd_status(const SweepArgs& a) {
  const auto d = sweep::SweepDir::open(a.dir);
  const auto st = statuses(d);
  std::map<std::string, int> counts;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& s : st) {
    ++counts[std::string(sweep::name(s.state))];
    rows.push_back({{"index", s.index},
                    {"id", s.id},
                    {"state", sweep::name(s.state)},
                    {"reason", s.reason},
                    {"attempt", s.attempt},
                    {"store", s.store},
                    {"session_id", s.session_id ? nlohmann::json(*s.session_id) : nullptr},
                    {"job", s.job}});
  }
  const bool all_done = counts["done"] == static_cast<int>(st.size());
  if (a.json) {
    std::cout << nlohmann::json{{"sweep", d.spec().name}, {"counts", counts}, {"tasks", rows}}.dump(
                     2)
              << "\n";
  } else {
    std::printf("sweep %s: %zu task(s): %d done, %d pending, %d running, %d failed, %d missing\n",
                d.spec().name.c_str(), st.size(), counts["done"], counts["pending"],
                counts["running"], counts["failed"], counts["missing"]);
    for (const auto& s : st)
      std::printf("%5d  %-8s %s%s%s\n", s.index, std::string(sweep::name(s.state)).c_str(),
                  s.id.c_str(), s.reason.empty() ? "" : ": ", s.reason.c_str());
  }
  return all_done ? kExitOk : kExitCouldNotFinish;
}

int cmd_resume(const SweepArgs& a) {
  auto d = sweep::SweepDir::open(a.dir);
  const auto todo = sweep::to_rerun(statuses(d));
  const std::string backend =
      !a.backend.empty() ? a.backend : (d.backend().empty() ? "local" : d.backend());
  return launch(d, todo, backend);
}

int cmd_stores(const SweepArgs& a) {
  const auto d = sweep::SweepDir::open(a.dir);
  for (const auto& s : sweep::task_status(d, nullptr))
    if (!s.store.empty() && (a.all || s.state == sweep::TaskState::kDone))
      std::printf("%s\n", s.store.c_str());
  return kExitOk;
}

} // namespace

void register_sweep_commands(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<SweepArgs>();
  int* ec = &exit_code;
  auto* sw = app.add_subcommand("sweep", "Sweeps: operators x generators x seeds, locally or on "
                                         "Slurm, one store per task");
  sw->require_subcommand(1);
  const auto backend = [&](CLI::App* sub) {
    sub->add_option("--backend", a->backend, "local (this host) or slurm (a job array)")
        ->check(CLI::IsMember({"local", "slurm"}));
  };
  auto* plan = sw->add_subcommand("plan", "Print the task list of a sweep file (stable ids)");
  plan->add_option("FILE", a->file, "Sweep file (.json or .toml)")->required();
  plan->add_flag("--json", a->json, "Print JSON");
  plan->callback([a, ec] { *ec = guarded([&] { return cmd_plan(*a); }); });

  auto* run = sw->add_subcommand("run", "Run (local) or submit (slurm) every task of a sweep");
  run->add_option("FILE", a->file, "Sweep file (.json or .toml)")->required();
  run->add_option("--dir", a->dir, "Sweep folder (default ./sweep-NAME)");
  backend(run);
  run->callback([a, ec] { *ec = guarded([&] { return cmd_run(*a); }); });

  auto* status = sw->add_subcommand("status", "done/pending/running/failed/missing per task; exit "
                                              "0 when every task is done, 3 otherwise");
  status->add_option("DIR", a->dir, "Sweep folder")->required();
  status->add_flag("--json", a->json, "Print JSON");
  status->callback([a, ec] { *ec = guarded([&] { return cmd_status(*a); }); });

  auto* resume = sw->add_subcommand("resume", "Run again only the failed and missing tasks");
  resume->add_option("DIR", a->dir, "Sweep folder")->required();
  backend(resume);
  resume->callback([a, ec] { *ec = guarded([&] { return cmd_resume(*a); }); });

  auto* stores = sw->add_subcommand("stores", "Print the store of every done task (for `kloop "
                                              "store merge OUT $(kloop sweep stores DIR)`)");
  stores->add_option("DIR", a->dir, "Sweep folder")->required();
  stores->add_flag("--all", a->all, "Every task's latest store, done or not");
  stores->callback([a, ec] { *ec = guarded([&] { return cmd_stores(*a); }); });

  auto* task = sw->add_subcommand("task", "Run one task of a sweep folder (what the Slurm job "
                                          "array and the local pool run)");
  task->add_option("DIR", a->dir, "Sweep folder")->required();
  task->add_option("--index", a->index, "Task index (the array index)")
      ->required()
      ->check(CLI::NonNegativeNumber);
  task->callback([a, ec] {
    *ec = guarded([&] {
      return sweep::run_task(sweep::SweepDir::open(a->dir), a->index, kloop_exe()) == 0
                 ? kExitOk
                 : kExitCouldNotFinish;
    });
  });
}

} // namespace kloop::app
