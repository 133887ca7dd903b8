#include "agent/http_provider.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluator/gate.h"

namespace kloop::agent {

ProviderRuntime default_runtime(Budget* budget, const std::atomic<bool>* cancel,
                                std::function<void(const std::string&)> progress) {
  return ProviderRuntime{std::make_shared<CurlTransport>(), std::make_shared<SystemClock>(), budget,
                         cancel, std::move(progress)};
}

namespace {

ProviderRuntime checked(ProviderRuntime runtime) {
  if (!runtime.transport || !runtime.clock)
    throw evaluator::InfraError("provider runtime without transport or clock (a kloop bug)");
  return runtime;
}

ProviderOutcome outcome_of(TransportStatus status) {
  switch (status) {
  case TransportStatus::kTimeout:
    return ProviderOutcome::kTimeout;
  case TransportStatus::kTooLarge:
    return ProviderOutcome::kTooLarge;
  case TransportStatus::kCancelled:
    return ProviderOutcome::kCancelled;
  case TransportStatus::kConnectError:
  case TransportStatus::kIoError:
  case TransportStatus::kOk:
    return ProviderOutcome::kTransport;
  }
  return ProviderOutcome::kTransport;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool mentions(const std::string& text, const std::string& word) {
  return text.find(word) != std::string::npos;
}

// An error event type worth another attempt (Anthropic's overloaded_error and api_error; OpenAI
// compatible servers' server_error).
bool retryable_stream_error(const std::string& type) {
  return type == "overloaded_error" || type == "api_error" || type == "server_error" ||
         type == "rate_limit_error";
}

std::string seconds(std::chrono::milliseconds d) {
  return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

std::string bytes_text(std::size_t n) {
  return n < 10'000 ? fmt::format("{} bytes", n) : fmt::format("{:.1f} KiB", n / 1024.0);
}

} // namespace

std::optional<WireOptions> adapt_to_refusal(const std::string& api_message, WireOptions wire) {
  const std::string m = lower(api_message);
  const bool refused = mentions(m, "unsupported") || mentions(m, "not supported") ||
                       mentions(m, "unknown") || mentions(m, "unrecognized") ||
                       mentions(m, "extra") || mentions(m, "not permitted") ||
                       mentions(m, "not allowed") || mentions(m, "invalid") || mentions(m, "use ");
  if (!refused) return std::nullopt;
  if (!wire.max_tokens_field.empty() && !wire.max_tokens_switched &&
      mentions(m, wire.max_tokens_field)) {
    wire.max_tokens_field =
        wire.max_tokens_field == "max_tokens" ? "max_completion_tokens" : "max_tokens";
    wire.max_tokens_switched = true;
    return wire;
  }
  if (wire.stream && wire.stream_usage && mentions(m, "stream_options")) {
    wire.stream_usage = false;
    return wire;
  }
  if (wire.temperature && mentions(m, "temperature")) {
    wire.temperature = false;
    return wire;
  }
  if (wire.stream && mentions(m, "stream")) {
    wire.stream = false;
    return wire;
  }
  return std::nullopt;
}

bool is_spend_limit(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return false;
  const auto& e = j["error"];
  std::vector<std::string> codes;
  for (const char* key : {"code", "type"})
    if (e.contains(key) && e[key].is_string()) codes.push_back(lower(e[key].get<std::string>()));
  if (e.contains("details") && e["details"].is_object() && e["details"].contains("error_code") &&
      e["details"]["error_code"].is_string())
    codes.push_back(lower(e["details"]["error_code"].get<std::string>()));
  for (const auto& c : codes)
    if (mentions(c, "spend_limit") || mentions(c, "insufficient_quota") || mentions(c, "billing") ||
        mentions(c, "credit") || mentions(c, "budget_exceeded"))
      return true;
  return false;
}

const nlohmann::json* json_member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string json_string(const nlohmann::json& j, const char* key) {
  const nlohmann::json* v = json_member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

bool is_event_stream(const HttpResponse& r) {
  if (const auto it = r.headers.find("content-type"); it != r.headers.end())
    if (lower(it->second).find("text/event-stream") != std::string::npos) return true;
  std::string_view b = r.body;
  if (b.substr(0, 3) == "\xEF\xBB\xBF") b.remove_prefix(3);
  while (!b.empty() && (b.front() == '\n' || b.front() == '\r'))
    b.remove_prefix(1);
  return b.substr(0, 5) == "data:" || b.substr(0, 6) == "event:" || b.substr(0, 1) == ":";
}

HttpJsonProvider::HttpJsonProvider(HttpProviderConfig config, ProviderRuntime runtime,
                                   std::string api_key, WireOptions wire)
    : config_(std::move(config)), runtime_(checked(std::move(runtime))),
      api_key_(std::move(api_key)), client_(*runtime_.transport, *runtime_.clock, config_.retry),
      wire_(std::move(wire)) {
  if (!config_.stream) wire_.stream = false;
}

ApiReply HttpJsonProvider::parse_response(const HttpResponse& r, bool streamed) const {
  if (!streamed || !is_event_stream(r)) return parse_reply_body(r.body);
  SseDecoder decoder;
  std::vector<SseEvent> events;
  decoder.feed(r.body, events);
  return parse_stream(events, decoder.pending());
}

HttpRequest HttpJsonProvider::http_request(const ProviderRequest& request, const std::string& url) {
  HttpRequest http;
  http.url = url;
  http.headers = headers();
  if (wire_.stream) http.headers.emplace_back("Accept", "text/event-stream");
  http.body = request_body(request, wire_);
  http.connect_timeout = config_.connect_timeout;
  http.total_timeout = config_.request_timeout;
  http.idle_timeout = wire_.stream ? config_.idle_timeout : std::chrono::milliseconds(0);
  http.max_response_bytes =
      wire_.stream ? 4 * config_.max_response_bytes : config_.max_response_bytes;
  http.cancel = runtime_.cancel;
  if (runtime_.progress) {
    const auto every = runtime_.progress_every;
    auto next = std::make_shared<std::chrono::milliseconds>(every);
    const std::string who = name();
    const bool stream = wire_.stream;
    http.on_progress = [progress = runtime_.progress, next, every, who,
                        stream](std::size_t bytes, std::chrono::milliseconds elapsed) {
      if (elapsed < *next) return;
      *next = elapsed + every;
      progress(fmt::format("    {}: waiting for the reply: {}, {} received{}", who,
                           seconds(elapsed), bytes_text(bytes), stream ? " (streaming)" : ""));
    };
  }
  return http;
}

HttpCallResult HttpJsonProvider::send(const ProviderRequest& request, Exchange& ex, int& retries,
                                      std::int64_t& latency_ms) {
  const std::vector<std::string> secrets = {api_key_};
  const auto classify = [this](const HttpResponse& r) -> std::optional<bool> {
    if (r.status != TransportStatus::kOk) return std::nullopt;
    if (r.http_status == 429 && is_spend_limit(r.body)) return false;
    if (r.http_status >= 200 && r.http_status < 300 && is_event_stream(r)) {
      const ApiReply a = parse_response(r, true);
      if (a.incomplete || retryable_stream_error(a.stream_error_type)) return true;
    }
    return std::nullopt;
  };
  const auto notice = [this, &secrets](int attempt, const HttpResponse& r,
                                       std::chrono::milliseconds wait) {
    if (!runtime_.progress) return;
    std::string what;
    if (r.status != TransportStatus::kOk) {
      what = fmt::format("{} ({})", transport_status_name(r.status), r.error);
    } else if (r.http_status >= 200 && r.http_status < 300) {
      const ApiReply a = parse_response(r, true);
      what = a.stream_error_type.empty() ? "the stream ended before its end event"
                                         : "the stream reported " + a.stream_error_type;
    } else {
      what = fmt::format("HTTP {}", r.http_status);
    }
    runtime_.progress(scrub_secrets(fmt::format("    {}: attempt {} failed: {}; retrying in {}",
                                                name(), attempt, what, seconds(wait)),
                                    secrets));
  };
  HttpCallResult call;
  for (int round = 0; round < 5; ++round) { // one resend per refused field, four fields
    HttpRequest http = http_request(request, ex.url);
    ex.request_body = scrub_secrets(http.body, secrets);
    ex.request_headers.clear();
    for (const auto& [k, v] : http.headers)
      ex.request_headers.emplace_back(k, is_secret_header(k) ? "[REDACTED]"
                                                             : scrub_secrets(v, secrets));
    call = client_.post(http, classify, notice);
    retries += call.retries + (round > 0 ? 1 : 0);
    latency_ms += call.latency_ms;
    const HttpResponse& r = call.response;
    if (call.cancelled_while_waiting || r.status != TransportStatus::kOk || r.http_status != 400)
      break;
    const std::string msg = api_error_message(r.body);
    const auto adapted = adapt_to_refusal(msg, wire_);
    if (!adapted) break;
    if (runtime_.progress)
      runtime_.progress(scrub_secrets(
          fmt::format("    {}: the server refused a request field ({}); resending without it",
                      name(), msg.substr(0, 200)),
          secrets));
    wire_ = *adapted;
  }
  return call;
}

std::string HttpJsonProvider::http_error(const HttpResponse& r, const std::string& attempts,
                                         bool* stop_session) const {
  const std::string api_msg = api_error_message(r.body);
  const bool spend = r.http_status == 429 && is_spend_limit(r.body);
  const long s = r.http_status;
  const std::string hint =
      spend ? "the account's spend limit or quota is reached; not retried: raise the limit with "
              "the provider or wait for it to reset"
      : (s == 401 || s == 403) ? fmt::format("check the key in ${}", config_.api_key_env)
      : s == 429               ? "wait, or lower the request rate"
      : s >= 500               ? "the server failed; try again later"
      : s == 404               ? "check the model name and --base-url"
                               : "check the model name and request settings";
  // A client error other than a timeout, a conflict or a rate limit fails the same way again.
  *stop_session = spend || (s >= 400 && s < 500 && s != 408 && s != 409 && s != 429);
  return fmt::format("{}: HTTP {} from {} after {}{}{}; {}", name(), s, endpoint_url(), attempts,
                     api_msg.empty() ? "" : ": ", api_msg, hint);
}

ProviderResponse HttpJsonProvider::complete(const ProviderRequest& request) {
  ProviderResponse out;
  Exchange& ex = out.exchange;
  ex.provider = name();
  ex.url = endpoint_url();
  // Until a reply says otherwise, nothing is known of the tokens this call cost.
  out.usage.status = ex.usage.status = UsageStatus::kAbsent;
  const std::vector<std::string> secrets = {api_key_};
  auto fail = [&](ProviderOutcome outcome, std::string error, bool stop_session = false) {
    out.outcome = outcome;
    out.error = scrub_secrets(std::move(error), secrets);
    out.stop_session = stop_session;
    ex.error = out.error;
    return out;
  };
  if (runtime_.budget) {
    if (auto why = runtime_.budget->exhausted())
      return fail(ProviderOutcome::kBudgetExceeded, fmt::format("{}: {}", name(), *why));
  }
  int retries = 0;
  std::int64_t latency_ms = 0;
  const HttpCallResult call = send(request, ex, retries, latency_ms);
  const HttpResponse& r = call.response;
  ex.response_body = scrub_secrets(r.body, secrets);
  ex.http_status = r.http_status;
  ex.latency_ms = latency_ms;
  ex.retries = retries;
  const std::string attempts = fmt::format("{} attempt{}", retries + 1, retries ? "s" : "");

  if (call.cancelled_while_waiting)
    return fail(ProviderOutcome::kCancelled,
                fmt::format("{}: cancelled while waiting to retry {} (after {})", name(), ex.url,
                            attempts));
  if (r.status != TransportStatus::kOk) {
    const bool unreachable = r.status == TransportStatus::kConnectError ||
                             r.status == TransportStatus::kTimeout ||
                             r.status == TransportStatus::kIoError;
    return fail(outcome_of(r.status),
                fmt::format("{}: POST {} failed ({}): {} after {}; check that the server is up "
                            "and reachable at this --base-url, or raise --request-timeout "
                            "(now {} s) or --idle-timeout (now {} s)",
                            name(), ex.url, transport_status_name(r.status), r.error, attempts,
                            config_.request_timeout.count() / 1000,
                            config_.idle_timeout.count() / 1000),
                unreachable);
  }
  if (r.http_status < 200 || r.http_status >= 300) {
    bool stop = false;
    std::string error = http_error(r, attempts, &stop);
    return fail(ProviderOutcome::kHttpError, std::move(error), stop);
  }
  ex.streamed = wire_.stream && is_event_stream(r);
  ApiReply reply = parse_response(r, wire_.stream);
  ex.usage = reply.usage;
  out.usage = reply.usage;
  ex.stop_reason = reply.stop_reason;
  ex.reasoning = reply.reasoning;
  if (runtime_.budget) runtime_.budget->charge(reply.usage, config_.pricing);
  if (!reply.stream_error_type.empty())
    return fail(ProviderOutcome::kHttpError,
                fmt::format("{}: the stream from {} reported {}{}{} after {}; {}", name(), ex.url,
                            reply.stream_error_type, reply.stream_error_message.empty() ? "" : ": ",
                            reply.stream_error_message, attempts,
                            retryable_stream_error(reply.stream_error_type)
                                ? "the server is overloaded or failing; try again later"
                                : "check the model name and request settings"));
  if (reply.incomplete)
    return fail(ProviderOutcome::kTransport,
                fmt::format("{}: the stream from {} ended before the API's end event after {} (a "
                            "dropped connection); check the server or proxy",
                            name(), ex.url, attempts),
                true);
  if (reply.usage.status == UsageStatus::kInvalid)
    return fail(ProviderOutcome::kBadResponse,
                fmt::format("{}: HTTP {} from {} but its usage makes no sense: {}; the reply is "
                            "recorded but not used, since its token cost is unknown",
                            name(), r.http_status, ex.url, reply.usage.problem));
  if (!reply.ok)
    return fail(ProviderOutcome::kBadResponse,
                fmt::format("{}: HTTP {} from {} but the body is not a usable reply: {}", name(),
                            r.http_status, ex.url, reply.error));
  out.outcome = ProviderOutcome::kOk;
  out.text = std::move(reply.text);
  out.stop_reason = reply.stop_reason;
  out.truncated = reply.truncated;
  out.refusal = reply.refusal;
  return out;
}

std::vector<ProviderResponse>
HttpJsonProvider::complete_batch(const std::vector<ProviderRequest>& requests) {
  if (requests.size() <= 1) return Provider::complete_batch(requests);
  std::vector<ProviderResponse> out(requests.size());
  std::vector<std::exception_ptr> failures(requests.size()); // complete()'s InfraError, rethrown
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < requests.size(); ++i)
      threads.emplace_back([this, &out, &failures, &requests, i] {
        try {
          out[i] = complete(requests[i]);
        } catch (...) {
          failures[i] = std::current_exception();
        }
      });
  }
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
  return out;
}

std::string read_api_key(const std::string& env_name, bool required, const std::string& why) {
  const char* value = env_name.empty() ? nullptr : std::getenv(env_name.c_str());
  if (value && *value) return value;
  if (!required) return "";
  throw ProviderConfigError(fmt::format(
      "no API key: environment variable {} is {} ({}); export it, or name another variable "
      "with --api-key-env",
      env_name.empty() ? "(none named)" : env_name, value ? "empty" : "not set", why));
}

std::string url_host(const std::string& url) {
  std::string rest;
  if (url.rfind("https://", 0) == 0)
    rest = url.substr(8);
  else if (url.rfind("http://", 0) == 0)
    rest = url.substr(7);
  else
    throw ProviderConfigError(fmt::format(
        "base URL '{}' is not http:// or https://; pass e.g. --base-url http://127.0.0.1:8000/v1",
        url));
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest.front() == '[')
    rest = rest.substr(0, rest.find(']') + 1);
  else
    rest = rest.substr(0, rest.find(':'));
  std::transform(rest.begin(), rest.end(), rest.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (rest.empty()) throw ProviderConfigError(fmt::format("base URL '{}' has no host", url));
  return rest;
}

std::string trim_base_url(std::string base_url) {
  while (!base_url.empty() && base_url.back() == '/')
    base_url.pop_back();
  return base_url;
}

} // namespace kloop::agent
