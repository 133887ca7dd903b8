// Sweeps (sweep/spec.h, sweep/run.h): stable plan ids, sweep-file errors that name the field, the
// Slurm job-array script, resume through a fake scheduler (only failed and missing tasks go
// again), and the local pool running the real kloop (CPU-only: tasks end
// pending_device_validation, which is done).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "store/store.h"
#include "sweep/run.h"
#include "sweep/spec.h"

namespace kloop::sweep {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kKloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";

fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("kloop-sweep-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

json base_spec() {
  return {{"name", "t"},
          {"operators", "all"},
          {"seeds", {1, 2}},
          {"budget", 1},
          {"generators",
           {{{"name", "offline"}, {"provider", "offline"}},
            {{"name", "srv"},
             {"provider", "openai"},
             {"model", "m1"},
             {"base_url", "http://127.0.0.1:9/v1"},
             {"api_key_env", "KLOOP_SWEEP_TEST_KEY"}}}}};
}

std::vector<std::string> ids(const Spec& s) {
  std::vector<std::string> out;
  for (const auto& t : plan(s))
    out.push_back(t.id);
  return out;
}

std::string spec_error(const json& j) {
  try {
    parse_spec(j.dump(), "sweep.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

TEST(SweepPlan, IdsAreStableAndChangeOnlyWithWhatTheTaskRuns) {
  const Spec s = parse_spec(base_spec().dump(), "a.json");
  const auto first = ids(s);
  ASSERT_EQ(first.size(), registered_operators().size() * 2 * 2);
  EXPECT_EQ(ids(parse_spec(base_spec().dump(), "b.json")), first);
  EXPECT_EQ(first[0].rfind("rmsnorm.offline.s1-", 0), 0u) << first[0];
  // One more seed: the existing tasks keep their ids.
  json more = base_spec();
  more["seeds"] = {1, 2, 3};
  const auto extended = ids(parse_spec(more.dump(), "c.json"));
  for (const auto& id : first)
    EXPECT_NE(std::find(extended.begin(), extended.end(), id), extended.end()) << id;
  // Another model for `srv`: its tasks are new tasks, the offline ones stay.
  json other = base_spec();
  other["generators"][1]["model"] = "m2";
  const auto changed = ids(parse_spec(other.dump(), "d.json"));
  EXPECT_EQ(changed[0], first[0]);
  EXPECT_NE(changed[2], first[2]);
  // The key's variable is not part of a task: a rotated key keeps the ids.
  json rotated = base_spec();
  rotated["generators"][1]["api_key_env"] = "OTHER_KEY";
  EXPECT_EQ(ids(parse_spec(rotated.dump(), "e.json")), first);
}

TEST(SweepPlan, ATomlFilePlansTheSameTasksAsItsJson) {
  const std::string toml = R"(name = "t"
operators = "all"
seeds = [1, 2]
budget = 1
[[generators]]
name = "offline"
provider = "offline"
[[generators]]
name = "srv"
provider = "openai"
model = "m1"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "KLOOP_SWEEP_TEST_KEY"
)";
  EXPECT_EQ(ids(parse_spec(toml, "s.toml")), ids(parse_spec(base_spec().dump(), "s.json")));
  try {
    parse_spec("name = \n", "bad.toml");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:1:"), std::string::npos) << e.what();
  }
}

TEST(SweepSpec, ErrorsNameTheFieldAndTheFix) {
  json j = base_spec();
  j["seedz"] = 3;
  EXPECT_NE(spec_error(j).find("`seedz` is not a sweep-file key"), std::string::npos);
  j = base_spec();
  j["generators"][0]["provider"] = "replay";
  EXPECT_NE(spec_error(j).find("`generators[0].provider`"), std::string::npos);
  j = base_spec();
  j["generators"][1]["prompt_variant"] = "terse";
  EXPECT_NE(spec_error(j).find("one prompt variant, 'default'"), std::string::npos);
  j = base_spec();
  j["generators"][1]["name"] = "offline";
  EXPECT_NE(spec_error(j).find("names two generators"), std::string::npos);
  j = base_spec();
  j["operators"] = {"softmaxx"};
  EXPECT_NE(spec_error(j).find("not an operator kloop knows"), std::string::npos);
  j = base_spec();
  j["generators"][1]["api_key_env"] = "sk-live-1234 5678";
  EXPECT_NE(spec_error(j).find("never the key itself"), std::string::npos);
  EXPECT_NE(spec_error(json::parse("[1]")).find("must be an object"), std::string::npos);
}

TEST(SweepSlurm, TheArrayScriptThrottlesAsksForAGpuAndHoldsNoKey) {
  const fs::path d = fresh_dir("script");
  json j = base_spec();
  j["slurm"] = {{"max_parallel", 3}, {"time_limit", "00:30:00"}, {"partition", "gpu"}};
  ::setenv("KLOOP_SWEEP_TEST_KEY", "sk-test-SECRET-value", 1);
  const auto dir = SweepDir::create(d.string(), parse_spec(j.dump(), "s.json"));
  const std::string s = slurm_script(dir, {0, 2, 3}, "/opt/kloop/bin/kloop");
  EXPECT_NE(s.find("#SBATCH --array=0,2-3%3\n"), std::string::npos) << s;
  EXPECT_NE(slurm_script(dir, {0, 1, 2, 3}, "/k").find("--array=0-3%3\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --gres=gpu:1\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --time=00:30:00\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --partition=gpu\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --export=ALL\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --output=" + dir.dir() + "/slurm/logs/task-%a.job-%A.out"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("exec '/opt/kloop/bin/kloop' sweep task '" + dir.dir() +
                   "' --index \"$SLURM_ARRAY_TASK_ID\""),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("sk-test-SECRET-value"), std::string::npos);
  j["slurm"]["gres"] = ""; // a cluster without GPUs
  const auto cpu = SweepDir::create((d / "cpu").string(), parse_spec(j.dump(), "s.json"));
  EXPECT_EQ(slurm_script(cpu, {0}, "/k").find("--gres"), std::string::npos);
  // Another plan into the same folder is refused: its tasks would change under it.
  json other = base_spec();
  other["budget"] = 2;
  EXPECT_THROW(SweepDir::create(d.string(), parse_spec(other.dump(), "o.json")), SpecError);
  fs::remove_all(d);
}

// Records submissions and answers with the states the test sets.
class FakeScheduler : public Scheduler {
public:
  std::string submit(const std::string& script) override {
    scripts.push_back(script);
    return std::to_string(100 + scripts.size());
  }
  std::map<int, JobState> query(const std::string& job) override { return states[job]; }
  std::vector<std::string> scripts;
  std::map<std::string, std::map<int, JobState>> states;
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SweepResume, OnlyFailedAndMissingTasksAreSubmittedAgain) {
  const fs::path d = fresh_dir("resume");
  json j = base_spec();
  j["generators"] = {{{"name", "offline"}, {"provider", "offline"}}};
  j["seeds"] = {1, 2, 3, 4, 5};
  auto dir = SweepDir::create(d.string(), parse_spec(j.dump(), "s.json"));
  FakeScheduler fake;
  EXPECT_EQ(submit_slurm(dir, fake, {0, 1, 2, 3, 4}, kKloop), "101");
  // Task 4 ran to its end (the real kloop, CPU-only: pending_device_validation is a verdict).
  ASSERT_EQ(run_task(dir, 4, kKloop), 0);
  fake.states["101"] = {{0, {"RUNNING", ""}},
                        {1, {"PENDING", "Priority"}},
                        {2, {"TIMEOUT", "exit code 0:15"}},
                        {4, {"COMPLETED", ""}}}; // task 3: Slurm has no record any more
  const auto st = task_status(dir, &fake);
  ASSERT_EQ(st.size(), 5u);
  EXPECT_EQ(st[0].state, TaskState::kRunning);
  EXPECT_EQ(st[1].state, TaskState::kPending);
  EXPECT_EQ(st[1].reason, "Priority");
  EXPECT_EQ(st[2].state, TaskState::kFailed);
  EXPECT_NE(st[2].reason.find("slurm: TIMEOUT"), std::string::npos) << st[2].reason;
  EXPECT_EQ(st[3].state, TaskState::kMissing);
  EXPECT_NE(st[3].reason.find("job 101"), std::string::npos) << st[3].reason;
  EXPECT_EQ(st[4].state, TaskState::kDone);
  EXPECT_EQ(st[4].reason, "pending_device_validation");
  ASSERT_TRUE(st[4].session_id);
  const auto again = to_rerun(st);
  ASSERT_EQ(again, (std::vector<int>{2, 3}));
  EXPECT_EQ(submit_slurm(dir, fake, again, kKloop), "102");
  EXPECT_NE(read(fake.scripts.back()).find("#SBATCH --array=2-3%4"), std::string::npos);
  // The new job holds them now: pending, not resubmitted by another resume.
  fake.states["102"] = {{2, {"PENDING", ""}}, {3, {"PENDING", ""}}};
  EXPECT_TRUE(to_rerun(task_status(dir, &fake)).empty());
  // A done task's runner does nothing the second time.
  EXPECT_EQ(run_task(dir, 4, kKloop), 0);
  EXPECT_EQ(dir.latest_attempt(dir.task(4)), 1);
  // The session carries the sweep's names (for compare --by generator).
  store::Store s = store::Store::open(st[4].store, store::OpenMode::kReadOnly);
  const auto rec = s.load_session(*st[4].session_id).session;
  EXPECT_EQ(rec.params["sweep"]["generator"], "offline");
  EXPECT_EQ(rec.params["sweep"]["task_id"], dir.task(4).id);
  EXPECT_EQ(rec.seed, 5);
  fs::remove_all(d);
}

TEST(SweepLocal, ThePoolRunsEveryTaskAndAFailedOneIsRunAgainInANewAttempt) {
  const fs::path d = fresh_dir("local");
  json j = base_spec();
  j["generators"] = {{{"name", "offline"}, {"provider", "offline"}},
                     {{"name", "dead"},
                      {"provider", "openai"},
                      {"model", "m"},
                      {"base_url", "http://127.0.0.1:9/v1"}}}; // nothing listens on port 9
  j["seeds"] = {7};
  j["local"] = {{"cpu_jobs", 2}};
  auto dir = SweepDir::create(d.string(), parse_spec(j.dump(), "s.json"));
  std::ostringstream log;
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(run_local(dir, {0, 1}, kKloop, log), 1) << log.str();
  const auto st = task_status(dir, nullptr);
  EXPECT_EQ(st[0].state, TaskState::kDone) << st[0].reason;
  EXPECT_EQ(st[1].state, TaskState::kFailed);
  EXPECT_NE(st[1].reason.find("kloop optimize exited 3 with session failed"), std::string::npos)
      << st[1].reason;
  EXPECT_EQ(to_rerun(st), std::vector<int>{1});
  EXPECT_EQ(run_task(dir, 1, kKloop), 1);
  EXPECT_EQ(dir.latest_attempt(dir.task(1)), 2); // a failed session is not resumed: fresh attempt
  fs::remove_all(d);
}

} // namespace
} // namespace kloop::sweep
