// `kloop optimize OP`: the refinement loop (agent/loop.h) with the real components: the chosen
// provider, the sandboxed build + GPU worker evaluator, the holdout runner and the store.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <tuple>
#include <type_traits>

#include <fmt/core.h>

#include "agent/anthropic_provider.h"
#include "agent/components.h"
#include "agent/loop.h"
#include "agent/loop_record.h"
#include "agent/offline_provider.h"
#include "agent/openai_provider.h"
#include "agent/replay_provider.h"
#include "app/commands.h"
#include "app/work_root.h"
#include "evaluator/subprocess.h"
#include "evaluator/throughput.h"
#include "kernels/registry.h"
#include "store/error.h"
#include "store/receipt.h"
#include "store/text_view.h"

namespace kloop::app {
namespace {

// Set by SIGINT, SIGTERM and SIGHUP (and by a closed stdout, StdoutProgress): the loop ends the
// session `interrupted` after the current step, resumable. g_cancel_signal names the cause.
std::atomic<bool> g_cancel{false};
std::atomic<int> g_cancel_signal{0};
extern "C" void on_cancel_signal(int signal_number) {
  g_cancel_signal.store(signal_number);
  g_cancel.store(true);
}

std::string cancel_cause() {
  switch (g_cancel_signal.load()) {
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP: the terminal closed";
  case SIGPIPE:
    return "the output pipe closed";
  default:
    return "Ctrl-C";
  }
}

// SIGINT, SIGTERM and SIGHUP cancel the loop like Ctrl-C. SIGPIPE is ignored, so a closed stdout
// (`kloop optimize ... | head -2`) is a failed write that StdoutProgress turns into a cancel,
// instead of a death that leaves the session `running`. Workers start with default signal
// dispositions (evaluator/subprocess.h), so they are not affected.
void install_cancel_handlers() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP})
    std::signal(sig, on_cancel_signal);
  std::signal(SIGPIPE, SIG_IGN);
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
  double usd_per_mtok_input = 0, usd_per_mtok_output = 0; // the model's price (cost budget)
  double worker_timeout_s = 120;
  std::string devices = "all";      // --devices (agent/components.h)
  int candidates_per_iteration = 1; // --candidates-per-iteration
  double request_timeout_s = 900;   // whole provider request
  double idle_timeout_s = 180;      // no byte of a streamed reply for this long (0: off)
  bool no_stream = false;
  int max_reply_tokens = 8192;
  // Which flags were given on the command line: a resume takes the recorded value of each one
  // left out and refuses one that differs from the record.
  bool provider_given = false, model_given = false, base_url_given = false;
  bool api_key_env_given = false, budget_given = false, seed_given = false;
  bool replay_session_given = false, max_tokens_given = false, max_cost_given = false;
  bool price_in_given = false, price_out_given = false, candidates_given = false;
};

// The session parameters kloop records (sessions.params_json) and a resume reads back.
nlohmann::json session_params(const OptimizeArgs& a) {
  nlohmann::json params = {{"base_url", a.base_url},
                           {"api_key_env", a.api_key_env},
                           {"no_sandbox", a.no_sandbox},
                           {"replay_session", a.replay_session},
                           {"max_tokens", a.max_tokens},
                           {"max_cost_usd", a.max_cost_usd},
                           {"usd_per_mtok_input", a.usd_per_mtok_input},
                           {"usd_per_mtok_output", a.usd_per_mtok_output}};
  if (a.candidates_per_iteration != 1) // a resume takes it from here (take_recorded)
    params["candidates_per_iteration"] = a.candidates_per_iteration;
  return params;
}

// Progress lines on stdout. A write that fails with EPIPE (the reader of a pipe went away, e.g.
// `| head -2`) cancels the session like Ctrl-C; after a failed write nothing more is written.
class StdoutProgress : public agent::ProgressSink {
public:
  explicit StdoutProgress(bool quiet) : quiet_(quiet) {}
  void line(const std::string& text) override {
    if (quiet_ || broken_) return;
    errno = 0;
    if (std::fputs((text + "\n").c_str(), stdout) == EOF || std::fflush(stdout) != 0) {
      broken_ = true;
      if (errno == EPIPE) {
        g_cancel_signal.store(SIGPIPE);
        g_cancel.store(true);
      }
    }
  }

private:
  bool quiet_;
  bool broken_ = false;
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
    // One record per candidate, in order (`--candidates-per-iteration` records several, each
    // with its stop reason and refusal under the notes' "replies"); an iteration without a
    // candidate (a provider error) serves one empty reply, as recorded.
    const auto replies = it.iteration.notes.value("replies", nlohmann::json::array());
    std::size_t served = 0;
    for (const auto& c : it.candidates)
      for (const auto& a : c.artifacts)
        if (a.name == "reply.txt") {
          agent::ReplayRecord one = r;
          one.response_text = st.blob(a.sha256);
          const auto k = static_cast<std::size_t>(c.candidate.ordinal);
          if (replies.is_array() && k < replies.size() && replies[k].is_object()) {
            one.stop_reason = replies[k].value("stop_reason", std::string());
            one.refusal = replies[k].value("refusal", std::string());
          }
          records.push_back(std::move(one));
          ++served;
        }
    if (served == 0) records.push_back(std::move(r));
  }
  return records;
}

// `st` is needed by (and only by) the replay provider; the others are built before the store is
// opened, so a provider that is not configured (no API key) leaves no store behind.
std::unique_ptr<agent::Provider> make_provider(const OptimizeArgs& a, const op::Operator& op,
                                               store::Store* st, agent::Budget* budget) {
  if (a.provider == "offline") return std::make_unique<agent::OfflineProvider>(op, a.seed);
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
  config.pricing = {a.usd_per_mtok_input, a.usd_per_mtok_output};
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

// Recorded parameter `key` of `params` when it holds a T, else `fallback` (a session recorded
// before the key existed, or an edited row: never a type_error).
template <typename T>
T recorded_param(const nlohmann::json& params, const char* key, const T& fallback) {
  if (!params.is_object()) return fallback;
  const auto it = params.find(key);
  if (it == params.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->template get<bool>() : fallback;
  } else {
    return it->is_number_integer() ? it->template get<T>() : fallback;
  }
}

// For --resume: the generator (provider, model, base URL, replay session), the budget and the
// seed are the session's recorded ones, so a resumed session stays one session of one generator.
// Fills every flag left out from the record; returns the refusal (naming the recorded value) for
// a flag given with another value, or "" when the command line agrees with the record.
std::string take_recorded(OptimizeArgs& a, const op::Operator& op, const store::SessionRecord& s) {
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
  if (s.operator_name != op.name())
    return fmt::format("--resume {}: session {} optimizes {}, not {}; resume it with `kloop "
                       "optimize {} --resume {}`",
                       s.id, s.id, shown(s.operator_name), op.name(),
                       op::find_operator(s.operator_name)
                           ? std::string(op::find_operator(s.operator_name)->cli_name())
                           : s.operator_name,
                       s.id);
  if (a.provider_given && a.provider != s.provider)
    return refuse("--provider", shown(s.provider), shown(a.provider));
  a.provider = s.provider;
  if (a.model_given && a.model != s.model) return refuse("--model", shown(s.model), shown(a.model));
  a.model = s.model;
  const std::string recorded_url = recorded_param(s.params, "base_url", std::string());
  if (a.base_url_given &&
      effective_base_url(s.provider, a.base_url) != effective_base_url(s.provider, recorded_url))
    return refuse("--base-url", shown(effective_base_url(s.provider, recorded_url)),
                  shown(a.base_url));
  a.base_url = recorded_url;
  const auto recorded_replay = recorded_param(s.params, "replay_session", std::int64_t{0});
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
  const int recorded_k = std::clamp(recorded_param(s.params, "candidates_per_iteration", 1), 1, 16);
  if (a.candidates_given && a.candidates_per_iteration != recorded_k)
    return refuse("--candidates-per-iteration", std::to_string(recorded_k),
                  std::to_string(a.candidates_per_iteration));
  a.candidates_per_iteration = recorded_k;
  // The spending limits and the price they are counted at hold for the whole session (a session
  // recorded before they were recorded has none).
  const auto number = [&](const char* key) { // within the options' ranges (an edited row)
    const auto v = s.params.is_object() ? s.params.value(key, nlohmann::json()) : nlohmann::json();
    const double x = v.is_number() ? v.get<double>() : 0.0;
    return std::isfinite(x) ? std::clamp(x, 0.0, 9007199254740992.0) : 0.0;
  };
  const auto limit_text = [](double v) { return v > 0 ? fmt::format("{}", v) : "none"; };
  const auto recorded_tokens = static_cast<std::int64_t>(number("max_tokens"));
  if (a.max_tokens_given && a.max_tokens != recorded_tokens)
    return refuse("--max-tokens", limit_text(static_cast<double>(recorded_tokens)),
                  std::to_string(a.max_tokens));
  a.max_tokens = recorded_tokens;
  for (const auto& [flag, key, value, given] :
       {std::tuple<const char*, const char*, double*, bool>{"--max-cost-usd", "max_cost_usd",
                                                            &a.max_cost_usd, a.max_cost_given},
        {"--usd-per-mtok-input", "usd_per_mtok_input", &a.usd_per_mtok_input, a.price_in_given},
        {"--usd-per-mtok-output", "usd_per_mtok_output", &a.usd_per_mtok_output,
         a.price_out_given}}) {
    if (given && *value != number(key))
      return refuse(flag, limit_text(number(key)), fmt::format("{}", *value));
    *value = number(key);
  }
  // Sandboxing: a session recorded with sandboxed builds is never continued without one (its
  // candidates would differ in how they were built; each records its sandbox anyway). A session
  // recorded with --no-sandbox continues as recorded.
  const bool recorded_no_sandbox = recorded_param(s.params, "no_sandbox", false);
  if (a.no_sandbox && !recorded_no_sandbox)
    return fmt::format("--resume {}: session {} was recorded with sandboxed builds; --no-sandbox "
                       "would build its remaining candidates without isolation. Leave "
                       "--no-sandbox out to resume it sandboxed, or start a new session with "
                       "--no-sandbox",
                       s.id, s.id);
  a.no_sandbox = recorded_no_sandbox;
  // The key's variable is not part of the generator: a new one may be given (a rotated key).
  if (!a.api_key_env_given) a.api_key_env = recorded_param(s.params, "api_key_env", std::string());
  return "";
}

// Flags the chosen provider would silently ignore, and a cost budget that could not be counted;
// returns the refusal, or "" when none.
std::string unused_flags(const OptimizeArgs& a) {
  if (a.replay_session > 0 && a.provider != "replay")
    return "--replay-session needs --provider replay (it names the session whose responses the "
           "replay provider serves)";
  const bool priced = a.usd_per_mtok_input > 0 || a.usd_per_mtok_output > 0;
  if ((a.provider == "offline" || a.provider == "replay") &&
      (a.max_tokens > 0 || a.max_cost_usd > 0 || priced))
    return fmt::format("--max-tokens, --max-cost-usd and the --usd-per-mtok prices are for "
                       "--provider openai or anthropic; the {} provider sends no request and "
                       "spends nothing (drop them or choose a provider)",
                       a.provider);
  if (a.max_cost_usd > 0 && !priced)
    return "--max-cost-usd needs the model's price to count what the session costs: give "
           "--usd-per-mtok-input X and --usd-per-mtok-output Y (US dollars per million input and "
           "output tokens, from the provider's price list), or limit tokens with --max-tokens";
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

// What the session records about this run: the throughput switches, devices and start-up
// phases (issue 26), and kloop's own host-memory peak (issue 8: under 1 GiB; a resumed session
// keeps the larger peak). A store error is reported and does not change the exit code.
void record_run(store::Store& st, std::int64_t session_id, const agent::DeviceContext& device,
                long rss_kib) {
  if (session_id <= 0) return;
  try { // the throughput switches, devices and start-up phases of this run (issue 26)
    st.set_session_param(session_id, "throughput", device.throughput_record());
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "kloop optimize: could not record the throughput settings: %s\n",
                 e.what());
  }
  try {
    long peak = rss_kib;
    const auto params = st.load_session(session_id).session.params;
    const auto prior =
        params.is_object() ? params.value("resources", nlohmann::json()) : nlohmann::json();
    peak = std::max(peak, recorded_param(prior, "kloop_peak_rss_kib", 0L));
    st.set_session_param(
        session_id, "resources",
        {{"kloop_peak_rss_kib", peak},
         {"last_run_peak_rss_kib", rss_kib},
         {"scope", "the kloop process only: getrusage(RUSAGE_SELF).ru_maxrss, children "
                   "(build and GPU workers, sanitizer, ncu) excluded; their peaks are on "
                   "their tool_calls rows"}});
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "kloop optimize: could not record the peak RSS: %s\n", e.what());
  }
}

// The session's outcome on stdout: the LoopResult as JSON, or the iteration table and the
// decision.
void print_result(const OptimizeArgs& a, const agent::LoopResult& r, long rss_kib) {
  if (a.json) {
    nlohmann::json out = r.to_json();
    out["kloop_peak_rss_kib"] = rss_kib;
    std::cout << store::json_text(out, 2) << "\n";
  } else {
    std::printf("\n%-10s %-26s %-9s %s\n", "iteration", "verdict", "seconds", "speed-up");
    for (const auto& it : r.iterations) {
      const std::string label = a.candidates_per_iteration > 1
                                    ? fmt::format("{}.{}", it.index + 1, it.candidate + 1)
                                    : std::to_string(it.index + 1);
      std::printf("%-10s %-26s %-9.1f %s\n", label.c_str(), it.verdict.c_str(),
                  a.candidates_per_iteration > 1 ? it.evaluation_s : it.wall_s,
                  it.speedup ? fmt::format("{:.3f}x", *it.speedup).c_str() : "-");
    }
    std::printf("\nsession %lld: %s\n  %s\n", static_cast<long long>(r.session_id),
                r.decision.c_str(), r.reason.c_str());
    if (!r.export_dir.empty()) std::printf("  promoted artifact: %s\n", r.export_dir.c_str());
    std::printf("  store: %s (%s)\n", a.store_dir.c_str(),
                store::kloop_command(fmt::format("show {}", r.session_id), a.store_dir).c_str());
    std::printf("  kloop peak RSS %ld MiB\n", (rss_kib + 1023) / 1024);
  }
}

int run_optimize(OptimizeArgs a) {
  const op::Operator* op = nullptr;
  try {
    op = &resolve_operator(a.op);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
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
      refusal = take_recorded(a, *op, st->resume_info(a.resume).session);
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
  // A resumed session's limits count what it already spent (agent::recorded_usage).
  if (a.resume > 0 && (a.max_tokens > 0 || a.max_cost_usd > 0))
    budget.charge(agent::recorded_usage(st->load_session(a.resume)),
                  agent::Pricing{a.usd_per_mtok_input, a.usd_per_mtok_output});
  std::unique_ptr<agent::Provider> provider;
  // Every provider but replay (which reads the store) is configured before the store is created.
  const auto build_provider = [&]() -> int {
    try {
      provider = make_provider(a, *op, st ? &*st : nullptr, &budget);
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
  install_cancel_handlers(); // before the device probe: the session is not created yet
  const WorkRoot work_root;  // $TMPDIR of this run; a killed run's is removed by the next one
  agent::DeviceOptions device_options{a.no_sandbox, a.worker_timeout_s, a.seed};
  device_options.devices = a.devices;
  try {
    device_options.throughput = evaluator::throughput_from_env();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitUsage;
  }
  std::optional<agent::DeviceContext> device_context;
  try {
    device_context.emplace(device_options, progress);
  } catch (const agent::DeviceSelectionError& e) {
    std::fprintf(stderr, "kloop optimize: %s\n", e.what());
    return kExitUsage;
  }
  agent::DeviceContext& device = *device_context;

  agent::LoopOptions o;
  o.budget = a.budget;
  o.candidates_per_iteration = a.candidates_per_iteration;
  o.max_reply_tokens = a.max_reply_tokens;
  o.seed = a.seed;
  o.provider_name = a.provider;
  o.model = a.model;
  o.params = session_params(a);
  o.cancel_cause = cancel_cause;
  if (a.resume > 0) o.resume_session = a.resume;
  o.op = op;
  o.holdout_dir = std::filesystem::path(a.store_dir) / "holdout";
  o.export_dir = std::filesystem::path(a.store_dir) / "exports";
  if (!a.sign_key.empty()) o.signing_key_file = a.sign_key;
  o.kloop_version = KLOOP_VERSION;
  o.kloop_commit = KLOOP_GIT_COMMIT;
  o.device_name = device.device_name();
  o.device_uuid = device.device_uuid();
  o.driver_version = device.driver_version();

  agent::LoopResult r;
  try {
    r = agent::run_loop(o, *provider, device.evaluator(*op), device.holdout_runner(), *st, progress,
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
  record_run(*st, r.session_id, device, rss_kib);
  print_result(a, r, rss_kib);
  return r.exit_code;
}

} // namespace

CLI::Validator devices_check() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        try {
          agent::check_devices_syntax(text);
        } catch (const agent::DeviceSelectionError& e) {
          return e.what();
        }
        return {};
      },
      "DEVICES");
}

void register_optimize(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<OptimizeArgs>();
  auto* sub = app.add_subcommand("optimize", "Run the refinement loop for an operator");
  sub->add_option("op", args->op, "Operator: " + op::operator_names())->required();
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
  auto* max_tokens =
      sub->add_option("--max-tokens", args->max_tokens, "Token budget of the session (0: none)")
          ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 53));
  auto* max_cost =
      sub->add_option("--max-cost-usd", args->max_cost_usd,
                      "Cost budget of the session in US dollars (0: none; needs the prices)")
          ->check(finite_number_check(0, 1e9, "US dollars; 0: no limit"));
  auto* price_in = sub->add_option("--usd-per-mtok-input", args->usd_per_mtok_input,
                                   "The model's price per million input tokens, US dollars")
                       ->check(finite_number_check(0, 1e6, "US dollars per million tokens"));
  auto* price_out = sub->add_option("--usd-per-mtok-output", args->usd_per_mtok_output,
                                    "The model's price per million output tokens, US dollars")
                        ->check(finite_number_check(0, 1e6, "US dollars per million tokens"));
  sub->add_option("--worker-timeout", args->worker_timeout_s,
                  "Watchdog deadline per GPU worker batch, seconds")
      ->check(finite_number_check(1, 3600, "seconds"));
  sub->add_option("--devices", args->devices,
                  "GPUs to use: all (default), none, or a comma list of indices / GPU UUIDs")
      ->check(devices_check());
  auto* candidates =
      sub->add_option("--candidates-per-iteration", args->candidates_per_iteration,
                      "Candidates per iteration, evaluated in parallel across devices (1-16)")
          ->check(CLI::Range(1, 16));
  sub->add_option("--request-timeout", args->request_timeout_s,
                  "Provider request deadline, seconds (default 900)")
      ->check(finite_number_check(1, 86400, "seconds"));
  sub->add_option("--idle-timeout", args->idle_timeout_s,
                  "End a streamed provider reply after this many seconds without data (default "
                  "180; 0: no idle limit)")
      ->check(finite_number_check(0, 86400, "seconds; 0: no idle limit"));
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
    args->candidates_given = candidates->count() > 0;
    args->max_tokens_given = max_tokens->count() > 0;
    args->max_cost_given = max_cost->count() > 0;
    args->price_in_given = price_in->count() > 0;
    args->price_out_given = price_out->count() > 0;
    exit_code = run_optimize(*args);
  });
}

} // namespace kloop::app
