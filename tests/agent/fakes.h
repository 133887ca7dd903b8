// Test doubles for the provider boundary: a scripted HttpTransport and a Clock that advances only
// when slept on, recording every sleep.
#pragma once

#include <deque>
#include <vector>

#include "agent/http_transport.h"

namespace kloop::agent::testing {

class ScriptedTransport final : public HttpTransport {
public:
  std::deque<HttpResponse> script;   // popped front per call; empty -> 200 "{}"
  std::vector<HttpRequest> requests; // every request received
  HttpResponse post(const HttpRequest& request) override {
    requests.push_back(request);
    if (script.empty()) return HttpResponse{TransportStatus::kOk, 200, "{}", {}, ""};
    HttpResponse r = script.front();
    script.pop_front();
    return r;
  }
};

class FakeClock final : public Clock {
public:
  std::chrono::steady_clock::time_point t{};
  std::vector<std::chrono::milliseconds> sleeps;
  std::atomic<bool>* cancel_on_sleep = nullptr; // set this flag when sleep_for is called
  std::chrono::steady_clock::time_point now() override { return t; }
  bool sleep_for(std::chrono::milliseconds d, const std::atomic<bool>* cancel) override {
    sleeps.push_back(d);
    if (cancel_on_sleep) cancel_on_sleep->store(true);
    if (cancel && cancel->load()) return false;
    t += d;
    return true;
  }
};

inline HttpResponse http(long status, std::string body,
                         std::map<std::string, std::string> headers = {}) {
  return HttpResponse{TransportStatus::kOk, status, std::move(body), std::move(headers), ""};
}

inline HttpResponse transport_failure(TransportStatus s, std::string error) {
  return HttpResponse{s, 0, "", {}, std::move(error)};
}

} // namespace kloop::agent::testing
