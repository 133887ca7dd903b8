// Retries for provider HTTP calls: exponential backoff with jitter on transport errors, timeouts,
// HTTP 429 and 5xx (529 "overloaded" included; honouring a Retry-After of delta-seconds, capped);
// no retry on other 4xx, on a response over the size cap, on a 2xx, or after cancellation. A
// provider may override the decision for a response (a stream that reported an overloaded error
// with HTTP 200 is retried; a 429 that says the spend limit is reached is not). Timeouts are
// retried at most max_timeout_retries times: a server that hangs does not cost five deadlines. Also
// the secret scrubbing applied to every text that leaves a provider (error messages, recorded
// bodies and headers).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "agent/http_transport.h"

namespace kloop::agent {

struct RetryPolicy {
  int max_retries = 4;                               // attempts after the first
  std::chrono::milliseconds initial_backoff{1000};   // wait before retry 1 (before jitter)
  std::chrono::milliseconds max_backoff{30'000};     // cap of the exponential wait
  std::chrono::milliseconds max_retry_after{60'000}; // cap on a server's Retry-After
  int max_timeout_retries = 1;                       // retries after a timeout (within max_retries)
  std::uint64_t jitter_seed = 0;                     // 0: seeded from std::random_device
};

// A provider's view of one finished attempt: true = retry, false = do not, nullopt = the default
// rule (is_retryable).
using RetryClassifier = std::function<std::optional<bool>(const HttpResponse& response)>;
// Told before each wait: the attempt that failed (1-based), its response, and the wait.
using RetryNotice =
    std::function<void(int attempt, const HttpResponse& response, std::chrono::milliseconds wait)>;

// Whether a finished attempt may be retried (see the file comment).
bool is_retryable(const HttpResponse& response);

// The result of a call with retries: the last attempt's response plus bookkeeping.
struct HttpCallResult {
  HttpResponse response;
  int retries = 0;                      // attempts after the first
  std::int64_t latency_ms = 0;          // first send to last byte, waits included (injected clock)
  bool cancelled_while_waiting = false; // the cancel flag ended a backoff wait
};

class RetryingHttpClient {
public:
  RetryingHttpClient(HttpTransport& transport, Clock& clock, RetryPolicy policy);
  // Sends `request`, retrying as the policy (and `classify`, when set) allows. Never throws for
  // expected failures.
  HttpCallResult post(const HttpRequest& request, const RetryClassifier& classify = {},
                      const RetryNotice& notice = {});
  // The wait before retry number `retry` (1-based) after `response`: the Retry-After seconds when
  // the server sent them (capped at max_retry_after), else min(max_backoff, initial * 2^(retry-1))
  // scaled by a jitter factor drawn uniformly from [0.5, 1.0].
  std::chrono::milliseconds backoff(int retry, const HttpResponse& response);

private:
  HttpTransport& transport_;
  Clock& clock_;
  RetryPolicy policy_;
  std::mutex rng_mu_; // post() may run from several threads (HttpJsonProvider::complete_batch)
  std::mt19937_64 rng_;
};

// `text` with every occurrence of each non-empty secret replaced by "[REDACTED]".
std::string scrub_secrets(std::string text, const std::vector<std::string>& secrets);

// True for header names that carry credentials (authorization, x-api-key, api-key, any name
// containing "key" or "token"; case-insensitive). Their values are recorded as "[REDACTED]".
bool is_secret_header(std::string_view name);

} // namespace kloop::agent
