// The HTTP boundary of the model providers: one POST with timeouts, a response size cap and a
// cancel flag, behind an interface (HttpTransport) so unit tests use a fake and integration tests
// use the real libcurl client (CurlTransport) against a loopback server. A transport reports what
// happened as a TransportStatus value; it never retries (http_retry.h does) and never logs.
// Also the injected Clock (time and cancellable sleep) used for latency and backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kloop::agent {

// Default cap on a response body: 8 MiB (a reply of 8192 tokens is well under 100 KiB).
inline constexpr std::size_t kDefaultMaxResponseBytes = 8 * 1024 * 1024;

struct HttpRequest {
  std::string url;                                          // http:// or https:// only
  std::vector<std::pair<std::string, std::string>> headers; // name, value
  std::string body;                                         // sent as the POST body
  std::chrono::milliseconds connect_timeout{10'000};        // TCP+TLS connect
  std::chrono::milliseconds total_timeout{300'000};         // whole transfer
  // Abort when no body byte arrives for this long, counted from the request's start (a streaming
  // server sends its first bytes at once and then one event per few tokens); 0 = no idle limit.
  std::chrono::milliseconds idle_timeout{0};
  std::size_t max_response_bytes = kDefaultMaxResponseBytes;
  const std::atomic<bool>* cancel = nullptr; // checked during the transfer; may be null
  // Called with each piece of the body as it arrives (may be empty: the body is still collected).
  std::function<void(std::string_view chunk)> on_data;
  // Called at most every 250 ms while the transfer runs: body bytes so far, time since the start.
  std::function<void(std::size_t bytes, std::chrono::milliseconds elapsed)> on_progress;
};

// How a transfer ended. kOk means a complete HTTP response arrived (any status code).
enum class TransportStatus {
  kOk,
  kTimeout,      // connect, total or idle timeout
  kConnectError, // refused, unresolvable, unreachable
  kIoError,      // reset, truncated body, protocol error
  kTooLarge,     // body passed max_response_bytes; transfer aborted
  kCancelled,    // the cancel flag was set
};
const char* transport_status_name(TransportStatus status); // "ok", "timeout", ...

struct HttpResponse {
  TransportStatus status = TransportStatus::kOk;
  long http_status = 0;                       // 0 when no status line arrived
  std::string body;                           // at most max_response_bytes
  std::map<std::string, std::string> headers; // lower-case names; last value wins
  std::string error;                          // transport error text ("" on kOk)
};

class HttpTransport {
public:
  virtual ~HttpTransport() = default;
  // Performs one POST. Expected failures are values in HttpResponse::status; throws
  // evaluator::InfraError only when the HTTP library itself cannot be set up.
  virtual HttpResponse post(const HttpRequest& request) = 0;
};

// libcurl implementation (one easy handle per call; no redirects; http/https only; no signals;
// never verbose, so headers with keys are never printed).
class CurlTransport final : public HttpTransport {
public:
  CurlTransport(); // initialises libcurl once per process; throws InfraError on failure
  HttpResponse post(const HttpRequest& request) override;
};

// Time source and sleeper, injected so retry tests run without waiting.
class Clock {
public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() = 0;
  // Sleeps for `duration`; returns false early when *cancel becomes true (cancel may be null).
  virtual bool sleep_for(std::chrono::milliseconds duration, const std::atomic<bool>* cancel) = 0;
};

// The real clock: steady_clock, sleeping in 20 ms slices so cancellation is prompt.
class SystemClock final : public Clock {
public:
  std::chrono::steady_clock::time_point now() override;
  bool sleep_for(std::chrono::milliseconds duration, const std::atomic<bool>* cancel) override;
};

} // namespace kloop::agent
