#include "agent/http_retry.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kloop::agent {

bool is_retryable(const HttpResponse& r) {
  switch (r.status) {
  case TransportStatus::kTimeout:
  case TransportStatus::kConnectError:
  case TransportStatus::kIoError:
    return true;
  case TransportStatus::kTooLarge:
  case TransportStatus::kCancelled:
    return false;
  case TransportStatus::kOk:
    return r.http_status == 429 || r.http_status >= 500;
  }
  return false;
}

RetryingHttpClient::RetryingHttpClient(HttpTransport& transport, Clock& clock, RetryPolicy policy)
    : transport_(transport), clock_(clock), policy_(policy),
      rng_(policy.jitter_seed != 0 ? policy.jitter_seed : std::random_device{}()) {}

std::chrono::milliseconds RetryingHttpClient::backoff(int retry, const HttpResponse& response) {
  // Retry-After as delta-seconds (RFC 9110 10.2.3); an HTTP-date falls back to the backoff.
  if (auto it = response.headers.find("retry-after"); it != response.headers.end()) {
    long long seconds = -1;
    const auto& v = it->second;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec == std::errc() && ptr == v.data() + v.size() && seconds >= 0)
      return std::min(std::chrono::milliseconds(seconds * 1000), policy_.max_retry_after);
  }
  const int shift = std::clamp(retry - 1, 0, 30);
  const double base = std::min(static_cast<double>(policy_.initial_backoff.count()) *
                                   static_cast<double>(1LL << shift),
                               static_cast<double>(policy_.max_backoff.count()));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  std::lock_guard<std::mutex> lock(rng_mu_); // parallel requests share one client
  return std::chrono::milliseconds(static_cast<long long>(base * jitter(rng_)));
}

HttpCallResult RetryingHttpClient::post(const HttpRequest& request, const RetryClassifier& classify,
                                        const RetryNotice& notice) {
  HttpCallResult result;
  const auto start = clock_.now();
  int timeouts = 0;
  for (int attempt = 0;; ++attempt) {
    result.response = transport_.post(request);
    std::optional<bool> verdict;
    if (classify) verdict = classify(result.response);
    if (!verdict.value_or(is_retryable(result.response)) || attempt >= policy_.max_retries) break;
    if (result.response.status == TransportStatus::kTimeout &&
        ++timeouts > policy_.max_timeout_retries)
      break;
    const auto wait = backoff(attempt + 1, result.response);
    if (notice) notice(attempt + 1, result.response, wait);
    if (!clock_.sleep_for(wait, request.cancel)) {
      result.cancelled_while_waiting = true;
      break;
    }
    ++result.retries;
  }
  result.latency_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - start).count();
  return result;
}

std::string scrub_secrets(std::string text, const std::vector<std::string>& secrets) {
  static const std::string kMark = "[REDACTED]";
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (auto pos = text.find(secret); pos != std::string::npos;
         pos = text.find(secret, pos + kMark.size()))
      text.replace(pos, secret.size(), kMark);
  }
  return text;
}

bool is_secret_header(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower == "authorization" || lower == "proxy-authorization" ||
         lower.find("key") != std::string::npos || lower.find("token") != std::string::npos;
}

} // namespace kloop::agent
