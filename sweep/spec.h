// Sweep files and plans (`kloop sweep plan FILE`). A sweep file (JSON, or TOML: the same keys)
// names operators, generators, seeds, a budget, optimize options and the backends' settings:
//
//   {"name": "gens", "operators": ["rmsnorm"] or "all", "seeds": [1, 2] or 10 (= 1..10),
//    "budget": 5,
//    "generators": [{"name": "offline", "provider": "offline"},
//                   {"name": "vllm-q", "provider": "openai", "model": "M",
//                    "base_url": "http://HOST:PORT/v1", "api_key_env": "VLLM_KEY",
//                    "prompt_variant": "default",
//                    "price_usd_per_mtok": {"input": 0.5, "output": 1.5}}],
//    "options": {"max_tokens": 0, "max_cost_usd": 0, "worker_timeout_s": 120,
//                "no_sandbox": false},
//    "local": {"cpu_jobs": 1},
//    "slurm": {"max_parallel": 4, "gres": "gpu:1", "time_limit": "02:00:00", "partition": "",
//              "cpus_per_task": 0, "mem": "", "sbatch_args": []}}
//
// A task is one (operator, generator, seed); its id is stable: the same file plans the same ids,
// adding seeds, operators or generators keeps the existing ones, and changing what a task runs
// (its generator's provider, model, base URL or prompt variant, the budget or the options) gives
// it a new id. API keys are never in the file: only the name of the variable that holds one.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::sweep {

// A sweep file that cannot be used; the message names the file, the field and the fix.
class SpecError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The operators `kloop optimize` knows, by the name it takes. The one place the sweep asks
// (to be pointed at the operator registry when it lands).
std::vector<std::string> registered_operators();

struct Generator {
  std::string name; // unique in the sweep; [A-Za-z0-9._-]+
  std::string provider, model, base_url, api_key_env;
  std::string prompt_variant = "default"; // kloop has one prompt variant today
  std::optional<double> usd_per_mtok_input, usd_per_mtok_output;
  nlohmann::json to_json() const; // without defaults that say nothing
};

struct SlurmOptions {
  int max_parallel = 4;       // the %M of --array
  std::string gres = "gpu:1"; // "" leaves --gres out (a cluster without GPUs)
  std::string time_limit = "02:00:00";
  std::string partition, mem;           // "" leaves them out
  int cpus_per_task = 0;                // 0 leaves it out
  std::vector<std::string> sbatch_args; // more #SBATCH lines, as given
};

struct Spec {
  std::string name;
  std::vector<std::string> operators;
  std::vector<Generator> generators;
  std::vector<std::int64_t> seeds;
  int budget = 5;
  std::int64_t max_tokens = 0;
  double max_cost_usd = 0, worker_timeout_s = 120;
  bool no_sandbox = false;
  int local_cpu_jobs = 1; // local backend slots when the host has no GPU
  SlurmOptions slurm;
  nlohmann::json to_json() const; // normalized: every field, as the plan file records it
};

// Parses a sweep file's text: TOML when `path` ends in ".toml", else JSON. Throws SpecError.
Spec parse_spec(const std::string& text, const std::string& path);
// The same from the normalized JSON (Spec::to_json, the plan file's "spec").
Spec spec_from_json(const nlohmann::json& j, const std::string& where);

struct Task {
  int index = 0;  // position in the plan: the Slurm array index
  std::string id; // "<operator>.<generator>.s<seed>-<8 hex>"
  std::string op;
  Generator generator;
  std::int64_t seed = 0;
  nlohmann::json to_json() const;
};

// Tasks in operator, generator, seed order.
std::vector<Task> plan(const Spec& spec);

} // namespace kloop::sweep
