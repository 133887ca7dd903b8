// Shared machinery of the HTTP JSON providers (openai, anthropic): configuration, API key lookup,
// the budget check, the retrying POST, streaming (server-sent events, on by default, so a long
// generation is not cut by an idle connection; a server that answers a stream request with plain
// JSON is read as such), the one-time fallback when a server refuses a request field (HTTP 400
// naming it: max_tokens / max_completion_tokens, stream_options, temperature, stream), the
// outcome mapping, progress lines while waiting, and the scrubbed Exchange record. A concrete
// provider supplies its endpoint, headers, request JSON and the parsing of a reply body or stream.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agent/http_retry.h"
#include "agent/http_transport.h"
#include "agent/provider.h"
#include "agent/sse.h"

namespace kloop::agent {

// A provider that cannot be configured as asked (missing API key, bad base URL). The CLI reports
// it as a usage error (exit 2); the message names the setting and the fix.
class ProviderConfigError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct HttpProviderConfig {
  std::string base_url;    // e.g. "https://api.openai.com/v1"; no trailing slash needed
  std::string api_key_env; // environment variable holding the key (e.g. "OPENAI_API_KEY")
  std::string model;       // default model when ProviderRequest::model is empty
  std::chrono::milliseconds connect_timeout{10'000};
  // Whole request, first byte to last (`--request-timeout`): long enough for a long streamed
  // generation.
  std::chrono::milliseconds request_timeout{900'000};
  // No byte for this long ends a streamed request (`--idle-timeout`; a hung server); 0 = off. A
  // request sent without streaming has only the request timeout, its body arriving at the end.
  std::chrono::milliseconds idle_timeout{180'000};
  bool stream = true; // ask for a server-sent event stream (`--no-stream` turns it off)
  // Cap on a response body; a stream may use 4 times this (its events repeat JSON framing).
  std::size_t max_response_bytes = kDefaultMaxResponseBytes;
  RetryPolicy retry;
  Pricing pricing; // for the cost budget
};

// What a provider needs at run time besides its configuration. transport and clock must be set;
// budget, cancel and progress may be null (no budget; not cancellable; silent).
struct ProviderRuntime {
  std::shared_ptr<HttpTransport> transport;
  std::shared_ptr<Clock> clock;
  Budget* budget = nullptr;
  const std::atomic<bool>* cancel = nullptr; // set by the loop's SIGINT handler
  // One line at a time while a call runs: every `progress_every` of waiting, and before each
  // retry.
  std::function<void(const std::string&)> progress;
  std::chrono::milliseconds progress_every{15'000};
};
// The production runtime: CurlTransport and SystemClock.
ProviderRuntime default_runtime(Budget* budget, const std::atomic<bool>* cancel,
                                std::function<void(const std::string&)> progress = {});

// The parsed body (or stream) of a 2xx reply.
struct ApiReply {
  bool ok = false;
  std::string text; // reply text (ok only; may be empty, e.g. cut at the token limit)
  TokenUsage usage;
  std::string error;       // why the body is not a usable reply (!ok)
  std::string stop_reason; // finish_reason / stop_reason as sent ("" when not sent)
  bool truncated = false;  // stop_reason is the token limit
  std::string reasoning;   // reasoning text returned beside the answer
  std::string refusal;     // the API's refusal text
  // Streams: the stream ended before the API's terminal event (a dropped connection that closed
  // cleanly), or carried an error event of this type ("overloaded_error", ...).
  bool incomplete = false;
  std::string stream_error_type;
  std::string stream_error_message;
};

// Which request fields a server accepts; starts from the provider's defaults and changes at most
// once per field when a 400 names it. Kept across calls.
struct WireOptions {
  bool stream = true;
  bool stream_usage = true;     // OpenAI: stream_options.include_usage
  std::string max_tokens_field; // OpenAI: "max_tokens" or "max_completion_tokens"; "" = fixed
  bool temperature = true;      // send the sampling temperature
  bool max_tokens_switched = false;
};

// The WireOptions after a server refused a field with `api_message` (HTTP 400): the first field it
// names that can still change, changed; nullopt when none applies. Exposed for unit tests.
std::optional<WireOptions> adapt_to_refusal(const std::string& api_message, WireOptions wire);

// True when a 429 body says a spend limit or quota is exhausted (error.details.error_code,
// error.code or error.type naming it): waiting does not help, so it is not retried.
bool is_spend_limit(const std::string& body);

// Base of the HTTP JSON providers. complete() checks the budget, builds the request, posts it with
// retries, maps the result to a ProviderOutcome, charges the budget and records the Exchange with
// every secret scrubbed.
class HttpJsonProvider : public Provider {
public:
  ProviderResponse complete(const ProviderRequest& request) override;
  // One thread per request (each transfer its own easy handle); answers in request order.
  std::vector<ProviderResponse>
  complete_batch(const std::vector<ProviderRequest>& requests) override;

protected:
  HttpJsonProvider(HttpProviderConfig config, ProviderRuntime runtime, std::string api_key,
                   WireOptions wire);
  virtual std::string endpoint_url() const = 0;
  virtual std::vector<std::pair<std::string, std::string>> headers() const = 0;
  virtual std::string request_body(const ProviderRequest& request,
                                   const WireOptions& wire) const = 0;
  virtual ApiReply parse_reply_body(const std::string& body) const = 0;
  // `pending`: the stream ended inside an event.
  virtual ApiReply parse_stream(const std::vector<SseEvent>& events, bool pending) const = 0;
  // The API's own error message from an error body ("" when there is none).
  virtual std::string api_error_message(const std::string& body) const = 0;

  const HttpProviderConfig& config() const { return config_; }
  const std::string& api_key() const { return api_key_; }

private:
  // The reply of a finished 2xx response: a stream when it is one, else a JSON body.
  ApiReply parse_response(const HttpResponse& response, bool streamed) const;
  HttpRequest http_request(const ProviderRequest& request, const std::string& url);
  // Posts `request` with retries, resending once per refused field (adapt_to_refusal); records
  // the request in `ex`. `retries` counts every attempt after the first.
  HttpCallResult send(const ProviderRequest& request, Exchange& ex, int& retries,
                      std::int64_t& latency_ms);
  // The error line of a non-2xx response; *stop_session: asking again cannot help.
  std::string http_error(const HttpResponse& response, const std::string& attempts,
                         bool* stop_session) const;
  HttpProviderConfig config_;
  ProviderRuntime runtime_;
  std::string api_key_;
  RetryingHttpClient client_;
  WireOptions wire_;
};

// Reply-body helpers of the providers' parsers: the member `key` of `j` (nullptr when `j` is not
// an object, lacks it or holds null), and that member as text ("" unless a string).
const nlohmann::json* json_member(const nlohmann::json& j, const char* key);
std::string json_string(const nlohmann::json& j, const char* key);

// Whether `response` is a server-sent event stream (Content-Type text/event-stream, or a body
// that starts like one).
bool is_event_stream(const HttpResponse& response);

// Reads the API key from the environment variable `env_name`. Returns "" when it is unset or empty
// and `required` is false; throws ProviderConfigError naming the variable when `required`.
std::string read_api_key(const std::string& env_name, bool required, const std::string& why);

// Host part of an http(s) URL, lower-case ("api.openai.com"); throws ProviderConfigError when the
// URL is not http:// or https://.
std::string url_host(const std::string& url);

// base_url without trailing slashes.
std::string trim_base_url(std::string base_url);

} // namespace kloop::agent
