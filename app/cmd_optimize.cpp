// `kloop optimize OP`: the refinement loop (agent/loop.h) with the real components: the chosen
// provider, the sandboxed build + GPU worker evaluator, the holdout runner and the store.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>

#include <fmt/core.h>

#include "agent/anthropic_provider.h"
#include "agent/components.h"
#include "agent/loop.h"
#include "agent/offline_provider.h"
#include "agent/openai_provider.h"
#include "agent/replay_provider.h"
#include "app/commands.h"
#include "evaluator/subprocess.h"
#include "store/error.h"

namespace kloop::app {
namespace {

std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) {
  g_cancel.store(true);
}

struct OptimizeArgs {
  std::string op;
  int budget = 5;
  std::string provider = "offline";
  std::string model, base_url, api_key_env;
  std::string store_dir = store::Store::default_dir();
  std::uint64_t seed = 1;
  bool json = false;
  std::int64_t resume = 0;
  std::int64_t replay_session = 0;
  bool no_sandbox = false;
  std::string sign_key;
  std::int64_t max_tokens = 0;
  double max_cost_usd = 0;
  double worker_timeout_s = 120;
};

class StdoutProgress : public agent::ProgressSink {
public:
  explicit StdoutProgress(bool quiet) : quiet_(quiet) {}
  void line(const std::string& text) override {
    if (quiet_) return;
    std::fputs((text + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

private:
  bool quiet_;
};

std::vector<agent::ReplayRecord> replay_records(store::Store& st, std::int64_t id) {
  std::vector<agent::ReplayRecord> records;
  const auto d = st.load_session(id);
  for (const auto& it : d.iterations) {
    agent::ReplayRecord r;
    r.iteration = it.iteration.index;
    r.prompt_sha256 = it.iteration.notes.value("prompt_sha256", std::string());
    for (const auto& c : it.candidates)
      for (const auto& a : c.artifacts)
        if (a.name == "reply.txt") r.response_text = st.blob(a.sha256);
    records.push_back(std::move(r));
  }
  return records;
}

std::unique_ptr<agent::Provider> make_provider(const OptimizeArgs& a, store::Store& st,
                                               agent::Budget* budget) {
  if (a.provider == "offline") return std::make_unique<agent::OfflineProvider>(a.seed);
  if (a.provider == "replay") {
    if (a.replay_session <= 0)
      throw agent::ProviderConfigError(
          "--provider replay needs --replay-session ID (the stored session to re-drive)");
    return agent::make_replay_provider(replay_records(st, a.replay_session),
                                       std::to_string(a.replay_session));
  }
  agent::HttpProviderConfig config;
  config.base_url = a.base_url;
  config.api_key_env = a.api_key_env;
  config.model = a.model;
  auto runtime = agent::default_runtime(budget, &g_cancel);
  if (a.provider == "openai") {
    if (config.base_url.empty()) config.base_url = agent::kOpenAiDefaultBaseUrl;
    if (config.api_key_env.empty()) config.api_key_env = agent::kOpenAiDefaultKeyEnv;
    return agent::make_openai_provider(config, runtime);
  }
  if (a.provider == "anthropic") return agent::make_anthropic_provider(config, runtime);
  throw agent::ProviderConfigError("unknown --provider '" + a.provider +
                                   "' (expected offline, openai, anthropic, replay)");
}

int run_optimize(const OptimizeArgs& a) {
  if (a.op != "rmsnorm" && a.op != "weighted_rmsnorm") {
    std::fprintf(stderr, "kloop optimize: unknown operator '%s' (known: rmsnorm)\n", a.op.c_str());
    return kExitUsage;
  }
  std::optional<store::Store> st;
  try {
    st.emplace(store::Store::open(a.store_dir));
  } catch (const store::NoSuchStore& e) { // --store names a file, not a directory
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitUsage;
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitCouldNotFinish;
  }
  agent::Budget budget(a.max_tokens > 0 ? std::optional<std::int64_t>(a.max_tokens) : std::nullopt,
                       a.max_cost_usd > 0 ? std::optional<double>(a.max_cost_usd) : std::nullopt);
  std::unique_ptr<agent::Provider> provider;
  try {
    provider = make_provider(a, *st, &budget);
  } catch (const agent::ProviderConfigError& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitUsage;
  }
  StdoutProgress progress(a.json);
  agent::DeviceContext device(agent::DeviceOptions{a.no_sandbox, a.worker_timeout_s, a.seed},
                              progress);

  agent::LoopOptions o;
  o.budget = a.budget;
  o.seed = a.seed;
  o.provider_name = a.provider;
  o.model = a.model;
  o.params = {{"base_url", a.base_url},
              {"api_key_env", a.api_key_env},
              {"no_sandbox", a.no_sandbox},
              {"replay_session", a.replay_session}};
  if (a.resume > 0) o.resume_session = a.resume;
  o.holdout_dir = std::filesystem::path(a.store_dir) / "holdout";
  o.export_dir = std::filesystem::path(a.store_dir) / "exports";
  if (!a.sign_key.empty()) o.signing_key_file = a.sign_key;
  o.kloop_version = KLOOP_VERSION;
  o.kloop_commit = KLOOP_GIT_COMMIT;
  o.device_name = device.device_name();
  o.device_uuid = device.device_uuid();
  o.driver_version = device.driver_version();

  std::signal(SIGINT, on_sigint);
  agent::LoopResult r;
  try {
    r = agent::run_loop(o, *provider, device.evaluator(), device.holdout_runner(), *st, progress,
                        g_cancel);
  } catch (const store::NoSuchSession& e) { // --resume ID of no session
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitUsage;
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitCouldNotFinish;
  } catch (const holdout::HoldoutError& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitCouldNotFinish;
  }
  // kloop's own host-memory peak (issue 8: under 1 GiB), children (workers) excluded; recorded
  // with the session so `kloop show` can print it. A resumed session keeps the larger peak.
  const long rss_kib = evaluator::self_max_rss_kib();
  if (r.session_id > 0) {
    try {
      long peak = rss_kib;
      const auto prior = st->load_session(r.session_id)
                             .session.params.value("resources", nlohmann::json::object());
      peak = std::max(peak, prior.value("kloop_peak_rss_kib", 0L));
      st->set_session_param(
          r.session_id, "resources",
          {{"kloop_peak_rss_kib", peak},
           {"last_run_peak_rss_kib", rss_kib},
           {"scope", "the kloop process only: getrusage(RUSAGE_SELF).ru_maxrss, children "
                     "(build and GPU workers, sanitizer, ncu) excluded; their peaks are on "
                     "their tool_calls rows"}});
    } catch (const store::StoreError& e) {
      std::fprintf(stderr, "kloop optimize: could not record the peak RSS: %s\n", e.what());
    }
  }
  if (a.json) {
    nlohmann::json out = r.to_json();
    out["kloop_peak_rss_kib"] = rss_kib;
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("\n%-10s %-26s %-9s %s\n", "iteration", "verdict", "seconds", "speed-up");
    for (const auto& it : r.iterations)
      std::printf("%-10d %-26s %-9.1f %s\n", it.index + 1, it.verdict.c_str(), it.wall_s,
                  it.speedup ? fmt::format("{:.3f}x", *it.speedup).c_str() : "-");
    std::printf("\nsession %lld: %s\n  %s\n", static_cast<long long>(r.session_id),
                r.decision.c_str(), r.reason.c_str());
    if (!r.export_dir.empty()) std::printf("  promoted artifact: %s\n", r.export_dir.c_str());
    std::printf("  store: %s (kloop show %lld)\n", a.store_dir.c_str(),
                static_cast<long long>(r.session_id));
    std::printf("  kloop peak RSS %ld MiB\n", (rss_kib + 1023) / 1024);
  }
  return r.exit_code;
}

} // namespace

void register_optimize(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<OptimizeArgs>();
  auto* sub = app.add_subcommand("optimize", "Run the refinement loop for an operator");
  sub->add_option("op", args->op, "Operator (rmsnorm)")->required();
  sub->add_option("--budget", args->budget, "Iterations (candidates) allowed")
      ->check(CLI::Range(1, 100));
  sub->add_option("--provider", args->provider, "Generator")
      ->check(CLI::IsMember({"offline", "openai", "anthropic", "replay"}));
  sub->add_option("--model", args->model, "Model name sent to the provider");
  sub->add_option("--base-url", args->base_url, "Provider base URL (OpenAI-compatible servers)");
  sub->add_option("--api-key-env", args->api_key_env, "Environment variable holding the API key");
  sub->add_option("--store", args->store_dir,
                  "Store directory (default $KLOOP_STORE or ./kloop-store)");
  sub->add_option("--seed", args->seed, "Public seed (provider sampling, offline policy)")
      ->check(seed_check());
  sub->add_flag("--json", args->json, "Print one JSON document instead of progress lines");
  sub->add_option("--resume", args->resume,
                  "Continue an interrupted session from its last "
                  "committed iteration")
      ->check(session_id_check());
  sub->add_option("--replay-session", args->replay_session,
                  "With --provider replay: the stored session whose responses are served")
      ->check(session_id_check());
  sub->add_flag("--no-sandbox", args->no_sandbox,
                "Build untrusted code without namespace isolation (recorded; avoid)");
  sub->add_option("--sign-key", args->sign_key, "Sign the promotion receipt with this key file");
  sub->add_option("--max-tokens", args->max_tokens, "Token budget of the session (0: none)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-cost-usd", args->max_cost_usd, "Cost budget of the session (0: none)")
      ->check(finite_non_negative_check());
  sub->add_option("--worker-timeout", args->worker_timeout_s,
                  "Watchdog deadline per GPU worker batch, seconds")
      ->check(CLI::Range(1.0, 3600.0));
  sub->callback([args, &exit_code] { exit_code = run_optimize(*args); });
}

} // namespace kloop::app
