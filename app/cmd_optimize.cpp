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
#include "store/receipt.h"

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
  double request_timeout_s = 900; // whole provider request
  double idle_timeout_s = 180;    // no byte of a streamed reply for this long (0: off)
  bool no_stream = false;
  int max_reply_tokens = 8192;
  // Which flags were given on the command line: a resume takes the recorded value of each one
  // left out and refuses one that differs from the record.
  bool provider_given = false, model_given = false, base_url_given = false;
  bool api_key_env_given = false, budget_given = false, seed_given = false;
  bool replay_session_given = false;
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
    r.stop_reason = it.iteration.notes.value("stop_reason", std::string());
    r.refusal = it.iteration.notes.value("refusal", std::string());
    for (const auto& c : it.candidates)
      for (const auto& a : c.artifacts)
        if (a.name == "reply.txt") r.response_text = st.blob(a.sha256);
    records.push_back(std::move(r));
  }
  return records;
}

// `st` is needed by (and only by) the replay provider; the others are built before the store is
// opened, so a provider that is not configured (no API key) leaves no store behind.
std::unique_ptr<agent::Provider> make_provider(const OptimizeArgs& a, store::Store* st,
                                               agent::Budget* budget) {
  if (a.provider == "offline") return std::make_unique<agent::OfflineProvider>(a.seed);
  if (a.provider == "replay") {
    if (a.replay_session <= 0)
      throw agent::ProviderConfigError(
          "--provider replay needs --replay-session ID (the stored session to re-drive)");
    return agent::make_replay_provider(replay_records(*st, a.replay_session),
                                       std::to_string(a.replay_session));
  }
  agent::HttpProviderConfig config;
  config.base_url = a.base_url;
  config.api_key_env = a.api_key_env;
  config.model = a.model;
  config.request_timeout =
      std::chrono::milliseconds(static_cast<long long>(a.request_timeout_s * 1000));
  config.idle_timeout = std::chrono::milliseconds(static_cast<long long>(a.idle_timeout_s * 1000));
  config.stream = !a.no_stream;
  // Waiting and retry lines go with the loop's progress (stdout; none with --json).
  auto runtime = agent::default_runtime(budget, &g_cancel, [quiet = a.json](const std::string& s) {
    if (quiet) return;
    std::fputs((s + "\n").c_str(), stdout);
    std::fflush(stdout);
  });
  if (a.provider == "openai") {
    if (config.base_url.empty()) config.base_url = agent::kOpenAiDefaultBaseUrl;
    if (config.api_key_env.empty()) config.api_key_env = agent::kOpenAiDefaultKeyEnv;
    return agent::make_openai_provider(config, runtime);
  }
  if (a.provider == "anthropic") return agent::make_anthropic_provider(config, runtime);
  throw agent::ProviderConfigError("unknown --provider '" + a.provider +
                                   "' (expected offline, openai, anthropic, replay)");
}

// A base URL as the provider uses it: the provider's default when empty, no trailing slash.
std::string effective_base_url(const std::string& provider, const std::string& url) {
  if (!url.empty()) return agent::trim_base_url(url);
  if (provider == "openai") return agent::kOpenAiDefaultBaseUrl;
  if (provider == "anthropic") return agent::kAnthropicDefaultBaseUrl;
  return "";
}

std::string shown(const std::string& value) {
  return value.empty() ? "none" : "'" + value + "'";
}

// For --resume: the generator (provider, model, base URL, replay session), the budget and the
// seed are the session's recorded ones, so a resumed session stays one session of one generator.
// Fills every flag left out from the record; returns the refusal (naming the recorded value) for
// a flag given with another value, or "" when the command line agrees with the record.
std::string take_recorded(OptimizeArgs& a, const store::SessionRecord& s) {
  const auto refuse = [&](const char* flag, const std::string& recorded, const std::string& given) {
    return fmt::format("--resume {}: session {} was recorded with {} {}, not {}; leave {} out to "
                       "resume with the recorded value, or start a new session without --resume",
                       s.id, s.id, flag, recorded, given, flag);
  };
  if (s.provider != "offline" && s.provider != "openai" && s.provider != "anthropic" &&
      s.provider != "replay")
    return fmt::format("--resume {}: session {} was recorded by '{}', not by a generator "
                       "provider; `kloop optimize --resume` continues only optimize sessions",
                       s.id, s.id, s.provider);
  if (a.provider_given && a.provider != s.provider)
    return refuse("--provider", shown(s.provider), shown(a.provider));
  a.provider = s.provider;
  if (a.model_given && a.model != s.model) return refuse("--model", shown(s.model), shown(a.model));
  a.model = s.model;
  const std::string recorded_url = s.params.value("base_url", std::string());
  if (a.base_url_given &&
      effective_base_url(s.provider, a.base_url) != effective_base_url(s.provider, recorded_url))
    return refuse("--base-url", shown(effective_base_url(s.provider, recorded_url)),
                  shown(a.base_url));
  a.base_url = recorded_url;
  const auto recorded_replay = s.params.value("replay_session", std::int64_t{0});
  if (a.replay_session_given && a.replay_session != recorded_replay)
    return refuse("--replay-session",
                  recorded_replay > 0 ? std::to_string(recorded_replay) : "none",
                  std::to_string(a.replay_session));
  a.replay_session = recorded_replay;
  if (a.budget_given && a.budget != s.budget)
    return refuse("--budget", std::to_string(s.budget), std::to_string(a.budget));
  a.budget = s.budget;
  if (a.seed_given && static_cast<std::int64_t>(a.seed) != s.seed)
    return refuse("--seed", std::to_string(s.seed), std::to_string(a.seed));
  a.seed = static_cast<std::uint64_t>(s.seed);
  // The key's variable is not part of the generator: a new one may be given (a rotated key).
  if (!a.api_key_env_given) a.api_key_env = s.params.value("api_key_env", std::string());
  return "";
}

// Flags the chosen provider would silently ignore; returns the refusal, or "" when none.
std::string unused_flags(const OptimizeArgs& a) {
  if (a.replay_session > 0 && a.provider != "replay")
    return "--replay-session needs --provider replay (it names the session whose responses the "
           "replay provider serves)";
  if (a.provider == "offline")
    for (const auto& [flag, value] :
         {std::pair<const char*, const std::string*>{"--model", &a.model},
          {"--base-url", &a.base_url},
          {"--api-key-env", &a.api_key_env}})
      if (!value->empty())
        return fmt::format("{} is for --provider openai or anthropic; the offline provider has "
                           "no model and sends nothing (drop {} or choose a provider)",
                           flag, flag);
  return "";
}

int run_optimize(OptimizeArgs a) {
  if (a.op != "rmsnorm" && a.op != "weighted_rmsnorm") {
    std::fprintf(stderr, "kloop optimize: unknown operator '%s' (known: rmsnorm)\n", a.op.c_str());
    return kExitUsage;
  }
  // The signing key is checked before anything is generated, so a bad key (missing, unreadable,
  // malformed, or open to group or others) never costs a session that then stays unsigned.
  if (!a.sign_key.empty()) {
    try {
      (void)store::read_secret_key(a.sign_key);
    } catch (const store::StoreError& e) {
      std::fprintf(stderr, "kloop optimize: --sign-key %s: %s\n", a.sign_key.c_str(), e.what());
      return kExitUsage;
    }
  }
  std::optional<store::Store> st;
  const auto open_store = [&]() -> int {
    try {
      st.emplace(store::Store::open(a.store_dir));
    } catch (const store::StoreError& e) { // 2 when --store names a file, not a directory
      std::fprintf(stderr, "kloop optimize: %s\n", e.what());
      return exit_code_of(e);
    }
    return 0;
  };
  // A resume reads the session's record first (read-only: a refusal records nothing).
  if (a.resume > 0) {
    if (const int rc = open_store()) return rc;
    std::string refusal;
    try {
      refusal = take_recorded(a, st->resume_info(a.resume).session);
    } catch (const store::StoreError& e) { // 2 for --resume ID of no session
      std::fprintf(stderr, "kloop optimize: %s\n", e.what());
      return exit_code_of(e);
    }
    if (!refusal.empty()) {
      std::fprintf(stderr, "kloop optimize: %s\n", refusal.c_str());
      return kExitUsage;
    }
  }
  if (const std::string refusal = unused_flags(a); !refusal.empty()) {
    std::fprintf(stderr, "kloop optimize: %s\n", refusal.c_str());
    return kExitUsage;
  }
  agent::Budget budget(a.max_tokens > 0 ? std::optional<std::int64_t>(a.max_tokens) : std::nullopt,
                       a.max_cost_usd > 0 ? std::optional<double>(a.max_cost_usd) : std::nullopt);
  std::unique_ptr<agent::Provider> provider;
  // Every provider but replay (which reads the store) is configured before the store is created.
  const auto build_provider = [&]() -> int {
    try {
      provider = make_provider(a, st ? &*st : nullptr, &budget);
    } catch (const agent::ProviderConfigError& e) {
      std::fprintf(stderr, "kloop optimize: %s\n", e.what());
      return kExitUsage;
    }
    return 0;
  };
  if (a.provider != "replay")
    if (const int rc = build_provider()) return rc;
  if (!st)
    if (const int rc = open_store()) return rc;
  if (!provider)
    if (const int rc = build_provider()) return rc;
  StdoutProgress progress(a.json);
  agent::DeviceContext device(agent::DeviceOptions{a.no_sandbox, a.worker_timeout_s, a.seed},
                              progress);

  agent::LoopOptions o;
  o.budget = a.budget;
  o.max_reply_tokens = a.max_reply_tokens;
  o.seed = a.seed;
  o.provider_name = a.provider;
  o.model = a.model;
  o.params = {{"base_url", a.base_url},
              {"api_key_env", a.api_key_env},
              {"no_sandbox", a.no_sandbox},
              {"replay_session", a.replay_session}};
  if (a.resume > 0) o.resume_session = a.resume;
  o.cli_operator = a.op;
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
  } catch (const store::StoreError& e) { // 2 for --resume ID of no session
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return exit_code_of(e);
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
  auto* budget = sub->add_option("--budget", args->budget, "Iterations (candidates) allowed")
                     ->check(CLI::Range(1, 100));
  auto* provider = sub->add_option("--provider", args->provider, "Generator")
                       ->check(CLI::IsMember({"offline", "openai", "anthropic", "replay"}));
  auto* model = sub->add_option("--model", args->model, "Model name sent to the provider");
  auto* base_url = sub->add_option("--base-url", args->base_url,
                                   "Provider base URL (OpenAI-compatible servers)");
  auto* api_key_env = sub->add_option("--api-key-env", args->api_key_env,
                                      "Environment variable holding the API key");
  sub->add_option("--store", args->store_dir,
                  "Store directory (default $KLOOP_STORE or ./kloop-store)");
  auto* seed =
      sub->add_option("--seed", args->seed, "Public seed (provider sampling, offline policy)")
          ->check(seed_check());
  sub->add_flag("--json", args->json, "Print one JSON document instead of progress lines");
  sub->add_option("--resume", args->resume,
                  "Continue an interrupted session from its last "
                  "committed iteration")
      ->check(session_id_check());
  auto* replay_session =
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
  sub->add_option("--request-timeout", args->request_timeout_s,
                  "Provider request deadline, seconds (default 900)")
      ->check(finite_non_negative_check())
      ->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--idle-timeout", args->idle_timeout_s,
                  "End a streamed provider reply after this many seconds without data (default "
                  "180; 0: no idle limit)")
      ->check(finite_non_negative_check())
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_flag("--no-stream", args->no_stream,
                "Ask the provider for one JSON reply instead of a server-sent event stream");
  sub->add_option("--max-reply-tokens", args->max_reply_tokens,
                  "Token limit of each provider reply (default 8192)")
      ->check(CLI::Range(256, 1'000'000));
  sub->callback([=, &exit_code] {
    args->provider_given = provider->count() > 0;
    args->model_given = model->count() > 0;
    args->base_url_given = base_url->count() > 0;
    args->api_key_env_given = api_key_env->count() > 0;
    args->budget_given = budget->count() > 0;
    args->seed_given = seed->count() > 0;
    args->replay_session_given = replay_session->count() > 0;
    exit_code = run_optimize(*args);
  });
}

} // namespace kloop::app
