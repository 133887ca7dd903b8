// Shared machinery of the HTTP JSON providers (openai, anthropic): configuration, API key lookup,
// the budget check, the retrying POST, outcome mapping, and the scrubbed Exchange record. A
// concrete provider supplies only its endpoint, headers, request JSON and response parsing.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agent/http_retry.h"
#include "agent/http_transport.h"
#include "agent/provider.h"

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
  std::chrono::milliseconds total_timeout{300'000};
  std::size_t max_response_bytes = kDefaultMaxResponseBytes;
  RetryPolicy retry;
  Pricing pricing; // for the cost budget
};

// What a provider needs at run time besides its configuration. transport and clock must be set;
// budget and cancel may be null (no budget; not cancellable).
struct ProviderRuntime {
  std::shared_ptr<HttpTransport> transport;
  std::shared_ptr<Clock> clock;
  Budget* budget = nullptr;
  const std::atomic<bool>* cancel = nullptr; // set by the loop's SIGINT handler
};
// The production runtime: CurlTransport and SystemClock.
ProviderRuntime default_runtime(Budget* budget, const std::atomic<bool>* cancel);

// The parsed body of a 2xx reply.
struct ApiReply {
  bool ok = false;
  std::string text; // reply text (ok only)
  TokenUsage usage;
  std::string error; // why the body is not a usable reply (!ok)
};

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
  HttpJsonProvider(HttpProviderConfig config, ProviderRuntime runtime, std::string api_key);
  virtual std::string endpoint_url() const = 0;
  virtual std::vector<std::pair<std::string, std::string>> headers() const = 0;
  virtual std::string request_body(const ProviderRequest& request) const = 0;
  virtual ApiReply parse_reply_body(const std::string& body) const = 0;
  // The API's own error message from an error body ("" when there is none).
  virtual std::string api_error_message(const std::string& body) const = 0;

  const HttpProviderConfig& config() const { return config_; }
  const std::string& api_key() const { return api_key_; }

private:
  HttpProviderConfig config_;
  ProviderRuntime runtime_;
  std::string api_key_;
  RetryingHttpClient client_;
};

// Reads the API key from the environment variable `env_name`. Returns "" when it is unset or empty
// and `required` is false; throws ProviderConfigError naming the variable when `required`.
std::string read_api_key(const std::string& env_name, bool required, const std::string& why);

// Host part of an http(s) URL, lower-case ("api.openai.com"); throws ProviderConfigError when the
// URL is not http:// or https://.
std::string url_host(const std::string& url);

// base_url without trailing slashes.
std::string trim_base_url(std::string base_url);

} // namespace kloop::agent
