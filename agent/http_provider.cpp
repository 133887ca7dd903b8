#include "agent/http_provider.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "evaluator/gate.h"

namespace kloop::agent {

ProviderRuntime default_runtime(Budget* budget, const std::atomic<bool>* cancel) {
  return ProviderRuntime{std::make_shared<CurlTransport>(), std::make_shared<SystemClock>(), budget,
                         cancel};
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

} // namespace

HttpJsonProvider::HttpJsonProvider(HttpProviderConfig config, ProviderRuntime runtime,
                                   std::string api_key)
    : config_(std::move(config)), runtime_(checked(std::move(runtime))),
      api_key_(std::move(api_key)), client_(*runtime_.transport, *runtime_.clock, config_.retry) {}

ProviderResponse HttpJsonProvider::complete(const ProviderRequest& request) {
  ProviderResponse out;
  Exchange& ex = out.exchange;
  ex.provider = name();
  ex.url = endpoint_url();
  const std::vector<std::string> secrets = {api_key_};
  auto fail = [&](ProviderOutcome outcome, std::string error) {
    out.outcome = outcome;
    out.error = scrub_secrets(std::move(error), secrets);
    ex.error = out.error;
    return out;
  };
  if (runtime_.budget) {
    if (auto why = runtime_.budget->exhausted())
      return fail(ProviderOutcome::kBudgetExceeded, fmt::format("{}: {}", name(), *why));
  }
  HttpRequest http;
  http.url = ex.url;
  http.headers = headers();
  http.body = request_body(request);
  http.connect_timeout = config_.connect_timeout;
  http.total_timeout = config_.total_timeout;
  http.max_response_bytes = config_.max_response_bytes;
  http.cancel = runtime_.cancel;
  ex.request_body = scrub_secrets(http.body, secrets);
  for (const auto& [k, v] : http.headers)
    ex.request_headers.emplace_back(k,
                                    is_secret_header(k) ? "[REDACTED]" : scrub_secrets(v, secrets));

  HttpCallResult call = client_.post(http);
  const HttpResponse& r = call.response;
  ex.response_body = scrub_secrets(r.body, secrets);
  ex.http_status = r.http_status;
  ex.latency_ms = call.latency_ms;
  ex.retries = call.retries;
  const std::string attempts =
      fmt::format("{} attempt{}", call.retries + 1, call.retries ? "s" : "");

  if (call.cancelled_while_waiting)
    return fail(ProviderOutcome::kCancelled,
                fmt::format("{}: cancelled while waiting to retry {} (after {})", name(), ex.url,
                            attempts));
  if (r.status != TransportStatus::kOk)
    return fail(outcome_of(r.status),
                fmt::format("{}: POST {} failed ({}): {} after {}; check that the server is up "
                            "and reachable, or raise the timeouts",
                            name(), ex.url, transport_status_name(r.status), r.error, attempts));
  if (r.http_status < 200 || r.http_status >= 300) {
    std::string api_msg = api_error_message(r.body);
    std::string hint = (r.http_status == 401 || r.http_status == 403)
                           ? fmt::format("check the key in ${}", config_.api_key_env)
                       : r.http_status == 429 ? "wait, or lower the request rate"
                       : r.http_status >= 500 ? "the server failed; try again later"
                                              : "check the model name and request settings";
    return fail(ProviderOutcome::kHttpError,
                fmt::format("{}: HTTP {} from {} after {}{}{}; {}", name(), r.http_status, ex.url,
                            attempts, api_msg.empty() ? "" : ": ", api_msg, hint));
  }
  ApiReply reply = parse_reply_body(r.body);
  ex.usage = reply.usage;
  out.usage = reply.usage;
  if (runtime_.budget) runtime_.budget->charge(reply.usage, config_.pricing);
  if (!reply.ok)
    return fail(ProviderOutcome::kBadResponse,
                fmt::format("{}: HTTP {} from {} but the body is not a usable reply: {}", name(),
                            r.http_status, ex.url, reply.error));
  out.outcome = ProviderOutcome::kOk;
  out.text = std::move(reply.text);
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
