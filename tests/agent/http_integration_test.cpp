// Integration tests of the real libcurl transport and both providers against a loopback HTTP
// server (cpp-httplib) that speaks each API and injects faults: slow first byte past the timeout,
// 429 with Retry-After, 500 then success, connection reset, truncated body, invalid JSON, a 50 MiB
// body, an error that echoes the key, and cancellation mid-request; and the streaming cases: a
// slow stream (usage only in its last chunk), a stream dropped mid-way then served whole, an
// Anthropic `error` event (overloaded) then success, 529 with Retry-After, a spend-limit 429, a
// 400 naming max_tokens, a stalled stream cut by the idle timeout, an unreachable server's
// stop, an invalid UTF-8 body and a string token count. Every wait is bounded (at most ~2 s).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "agent/anthropic_provider.h"
#include "agent/openai_provider.h"

namespace kloop::agent {
namespace {

using namespace std::chrono_literals;

constexpr const char* kKey = "sk-integration-KEY-42";
const char* kOpenAiOk =
    R"({"choices":[{"message":{"role":"assistant","content":"ok text"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":3,"completion_tokens":2}})";
const char* kAnthropicOk =
    R"({"content":[{"type":"text","text":"ok text"}],"usage":{"input_tokens":3,"output_tokens":2}})";

// Loopback server; the first path segment names the fault scenario.
class FaultServer {
public:
  FaultServer() {
    auto handler = [this](bool openai) {
      return [this, openai](const httplib::Request& req, httplib::Response& res) {
        handle(req.matches[1], openai, req, res);
      };
    };
    server_.Post(R"(/(\w+)/chat/completions)", handler(true));
    server_.Post(R"(/(\w+)/v1/messages)", handler(false));
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FaultServer() {
    stopping_ = true;
    server_.stop();
    thread_.join();
  }
  std::string base(const std::string& scenario) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + scenario;
  }
  int hits(const std::string& scenario) {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_[scenario];
  }
  std::map<std::string, std::string> last_headers() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_headers_;
  }

private:
  void wait(std::chrono::milliseconds d) {
    for (auto end = std::chrono::steady_clock::now() + d;
         !stopping_ && std::chrono::steady_clock::now() < end;)
      std::this_thread::sleep_for(10ms);
  }

  void handle(const std::string& scenario, bool openai, const httplib::Request& req,
              httplib::Response& res) {
    int n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = ++hits_[scenario];
      last_headers_.clear();
      for (const auto& [k, v] : req.headers)
        last_headers_[k] = v;
    }
    const std::string ok = openai ? kOpenAiOk : kAnthropicOk;
    if (stream_scenario(scenario, n, openai, req, res)) return;
    if (scenario == "ok") {
      res.set_content(ok, "application/json");
    } else if (scenario == "slow") {
      wait(1500ms);
      res.set_content(ok, "application/json");
    } else if (scenario == "ratelimit" && n == 1) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      res.set_content(R"({"error":{"message":"rate limited"}})", "application/json");
    } else if (scenario == "flaky" && n == 1) {
      res.status = 500;
      res.set_content("internal error", "text/plain");
    } else if (scenario == "truncated") {
      res.set_content_provider(1000, "application/json",
                               [](size_t, size_t, httplib::DataSink& sink) {
                                 sink.write(R"({"choices":[{"mess)", 17);
                                 return false; // close the connection after 17 of 1000 bytes
                               });
    } else if (scenario == "badjson") {
      res.set_content("<html>gateway</html>", "text/html");
    } else if (scenario == "huge") {
      res.set_chunked_content_provider(
          "application/json", [sent = std::size_t{0}](size_t, httplib::DataSink& sink) mutable {
            static const std::string chunk(1 << 20, 'x');
            if (sent >= (50u << 20)) {
              sink.done();
              return true;
            }
            sent += chunk.size();
            return sink.write(chunk.data(), chunk.size());
          });
    } else if (scenario == "echo401") {
      res.status = 401;
      const std::string key = req.has_header("Authorization")
                                  ? req.get_header_value("Authorization")
                                  : req.get_header_value("x-api-key");
      res.set_content(R"({"error":{"type":"authentication_error","message":"bad key )" + key +
                          R"("}})",
                      "application/json");
    } else {
      res.set_content(ok, "application/json");
    }
  }

  // A stream as the API sends it: the reply text in chunks, usage only at the end.
  static std::vector<std::string> events(bool openai, const std::string& text) {
    std::vector<std::string> out;
    auto data = [](const nlohmann::json& j) { return "data: " + j.dump() + "\n\n"; };
    if (openai) {
      for (std::size_t i = 0; i < text.size(); i += 3)
        out.push_back(data({{"choices",
                             {{{"index", 0},
                               {"delta", {{"content", text.substr(i, 3)}}},
                               {"finish_reason", nullptr}}}}}));
      out.push_back(data(
          {{"choices",
            {{{"index", 0}, {"delta", nlohmann::json::object()}, {"finish_reason", "stop"}}}}}));
      out.push_back(data({{"choices", nlohmann::json::array()},
                          {"usage", {{"prompt_tokens", 21}, {"completion_tokens", 9}}}}));
      out.push_back("data: [DONE]\n\n");
      return out;
    }
    auto ev = [&](const char* name, const nlohmann::json& j) {
      return std::string("event: ") + name + "\n" + data(j);
    };
    out.push_back(ev("message_start",
                     {{"type", "message_start"},
                      {"message", {{"usage", {{"input_tokens", 21}, {"output_tokens", 1}}}}}}));
    out.push_back(ev("content_block_start", {{"type", "content_block_start"},
                                             {"index", 0},
                                             {"content_block", {{"type", "text"}, {"text", ""}}}}));
    for (std::size_t i = 0; i < text.size(); i += 3)
      out.push_back(ev("content_block_delta",
                       {{"type", "content_block_delta"},
                        {"index", 0},
                        {"delta", {{"type", "text_delta"}, {"text", text.substr(i, 3)}}}}));
    out.push_back(ev("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}));
    out.push_back(ev("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", "end_turn"}}},
                                       {"usage", {{"output_tokens", 9}}}}));
    out.push_back(ev("message_stop", {{"type", "message_stop"}}));
    return out;
  }

  // Streams `list` with `gap` between events; after `cut_after` events (when >= 0) it closes the
  // connection without ending the chunked body.
  void stream(httplib::Response& res, std::vector<std::string> list, std::chrono::milliseconds gap,
              int cut_after = -1) {
    res.set_chunked_content_provider(
        "text/event-stream", [this, list = std::move(list), gap, cut_after,
                              i = std::size_t{0}](size_t, httplib::DataSink& sink) mutable {
          if (cut_after >= 0 && i == static_cast<std::size_t>(cut_after)) return false;
          if (i == list.size()) {
            sink.done();
            return true;
          }
          if (i > 0) wait(gap);
          if (stopping_) return false;
          const std::string& e = list[i++];
          return sink.write(e.data(), e.size());
        });
  }

  bool stream_scenario(const std::string& scenario, int n, bool openai, const httplib::Request& req,
                       httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_bodies_[scenario] = body;
    }
    if (scenario == "sse_slow") { // 7 events 120 ms apart: longer than the idle limit in total
      stream(res, events(openai, "streamed!"), 120ms);
    } else if (scenario == "sse_drop" && n == 1) {
      stream(res, events(openai, "dropped and resent"), 10ms, 3);
    } else if (scenario == "sse_drop") {
      stream(res, events(openai, "dropped and resent"), 1ms);
    } else if (scenario == "sse_error" && n == 1) {
      auto list = events(openai, "after overload");
      list.resize(3);
      list.push_back("event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": "
                     "\"overloaded_error\", \"message\": \"Overloaded\"}}\n\n");
      stream(res, list, 1ms);
    } else if (scenario == "sse_error") {
      stream(res, events(openai, "after overload"), 1ms);
    } else if (scenario == "idle") { // one event, then silence past the idle limit
      auto list = events(openai, "x");
      list.resize(2);
      list.insert(list.begin() + 1, std::string(": keep quiet\n\n"));
      stream(res, list, 1500ms);
    } else if (scenario == "overloaded" && n == 1) {
      res.status = 529;
      res.set_header("retry-after", "1");
      res.set_content(
          R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})",
          "application/json");
    } else if (scenario == "overloaded") {
      stream(res, events(openai, "served"), 1ms);
    } else if (scenario == "spend") {
      res.status = 429;
      res.set_content(R"({"error":{"type":"rate_limit_error","message":"You have reached your )"
                      R"(spend limit","details":{"error_code":"SPEND_LIMIT_EXCEEDED"}}})",
                      "application/json");
    } else if (scenario == "fieldname") {
      if (body.is_object() && body.contains("max_tokens")) {
        res.status = 400;
        res.set_content(R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not )"
                        R"(supported with this model. Use 'max_completion_tokens' instead.",)"
                        R"("type":"invalid_request_error","param":"max_tokens"}})",
                        "application/json");
      } else {
        stream(res, events(openai, "field ok"), 1ms);
      }
    } else if (scenario == "badutf8") {
      res.set_content(std::string(R"({"choices":[{"message":{"content":"caf)") + "\xe9\xff" +
                          R"("},"finish_reason":"stop"}]})",
                      "application/json");
    } else if (scenario == "usagestring") {
      res.set_content(R"({"choices":[{"message":{"content":"text"},"finish_reason":"stop"}],)"
                      R"("usage":{"prompt_tokens":"12","completion_tokens":3}})",
                      "application/json");
    } else {
      return false;
    }
    return true;
  }

public:
  nlohmann::json last_body(const std::string& scenario) {
    std::lock_guard<std::mutex> lock(mu_);
    return last_bodies_[scenario];
  }

private:
  std::map<std::string, nlohmann::json> last_bodies_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, int> hits_;
  std::map<std::string, std::string> last_headers_;
};

// A TCP server that accepts, reads the request and resets the connection (SO_LINGER 0).
class ResetServer {
public:
  ResetServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        if (stopping_) {
          ::close(c);
          return;
        }
        ++accepted_;
        char buf[4096];
        (void)::recv(c, buf, sizeof buf, 0);
        linger l{1, 0};
        ::setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        ::close(c);
      }
    });
  }
  ~ResetServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::atomic<int> accepted_{0};

private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

class HttpIntegration : public ::testing::Test {
protected:
  void SetUp() override { setenv("KLOOP_IT_KEY", kKey, 1); }
  void TearDown() override { unsetenv("KLOOP_IT_KEY"); }
  static HttpProviderConfig config(const std::string& base) {
    HttpProviderConfig c;
    c.base_url = base;
    c.api_key_env = "KLOOP_IT_KEY";
    c.model = "test-model";
    c.connect_timeout = 1000ms;
    c.request_timeout = 3000ms;
    c.idle_timeout = 2000ms; // the streaming tests that need a short one set it
    c.retry.max_retries = 1;
    c.retry.initial_backoff = 10ms;
    c.retry.jitter_seed = 3;
    return c;
  }
  ProviderRuntime runtime(const std::atomic<bool>* cancel = nullptr) {
    return ProviderRuntime{std::make_shared<CurlTransport>(), std::make_shared<SystemClock>(),
                           nullptr, cancel};
  }
  ProviderRequest request() {
    ProviderRequest r;
    r.system = "sys";
    r.messages = {{"user", "hi"}};
    return r;
  }
  void expect_no_key(const ProviderResponse& r) {
    const std::string all = r.exchange.to_json().dump() + r.error;
    EXPECT_EQ(all.find(kKey), std::string::npos) << all;
  }
  FaultServer server;
};

TEST_F(HttpIntegration, OpenAiRoundTripRecordsExchange) {
  auto p = make_openai_provider(config(server.base("ok")), runtime());
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "ok text");
  EXPECT_EQ(r.exchange.http_status, 200);
  EXPECT_EQ(r.exchange.usage.input_tokens, 3);
  EXPECT_EQ(server.last_headers()["Authorization"], std::string("Bearer ") + kKey);
  expect_no_key(r);
}

TEST_F(HttpIntegration, AnthropicRoundTripSendsKeyAndVersion) {
  auto p = make_anthropic_provider(config(server.base("ok")), runtime());
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "ok text");
  auto h = server.last_headers();
  EXPECT_EQ(h["x-api-key"], kKey);
  EXPECT_EQ(h["anthropic-version"], "2023-06-01");
  expect_no_key(r);
}

TEST_F(HttpIntegration, SlowFirstBytePastTheTimeoutEndsAsTimeout) {
  auto c = config(server.base("slow"));
  c.request_timeout = 200ms;
  auto p = make_openai_provider(c, runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kTimeout) << r.error;
  EXPECT_EQ(r.exchange.retries, 1);
  EXPECT_EQ(server.hits("slow"), 2);
}

TEST_F(HttpIntegration, RateLimitHonoursRetryAfterThenSucceeds) {
  auto p = make_anthropic_provider(config(server.base("ratelimit")), runtime());
  const auto start = std::chrono::steady_clock::now();
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.exchange.retries, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1000ms);
  EXPECT_GE(r.exchange.latency_ms, 1000);
}

TEST_F(HttpIntegration, ServerErrorThenSuccessIsRetried) {
  auto p = make_openai_provider(config(server.base("flaky")), runtime());
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.exchange.retries, 1);
  EXPECT_EQ(server.hits("flaky"), 2);
}

TEST_F(HttpIntegration, ConnectionResetEndsAsTransportErrorAfterRetries) {
  ResetServer reset;
  auto p = make_openai_provider(config(reset.base()), runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kTransport) << r.error;
  EXPECT_EQ(r.exchange.retries, 1);
  EXPECT_EQ(reset.accepted_.load(), 2);
  expect_no_key(r);
}

TEST_F(HttpIntegration, TruncatedBodyIsATransportError) {
  auto p = make_openai_provider(config(server.base("truncated")), runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kTransport) << r.error;
  EXPECT_EQ(server.hits("truncated"), 2);
}

TEST_F(HttpIntegration, InvalidJsonIsABadResponseNotRetried) {
  auto p = make_anthropic_provider(config(server.base("badjson")), runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kBadResponse) << r.error;
  EXPECT_EQ(r.exchange.response_body, "<html>gateway</html>");
  EXPECT_EQ(server.hits("badjson"), 1);
}

TEST_F(HttpIntegration, FiftyMebibyteBodyIsAbortedAtTheCap) {
  // Not streamed: the JSON cap (a stream may use 4 times it). The server compresses its body
  // (brotli), so the bytes behind the cap cost time: the smaller cap keeps the test short.
  auto c = config(server.base("huge"));
  c.stream = false;
  auto p = make_openai_provider(c, runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kTooLarge) << r.error;
  EXPECT_LE(r.exchange.response_body.size(), kDefaultMaxResponseBytes);
  EXPECT_EQ(server.hits("huge"), 1);
}

TEST_F(HttpIntegration, KeyEchoedByTheServerIsScrubbedFromRecordAndError) {
  for (bool openai : {true, false}) {
    auto c = config(server.base("echo401"));
    auto p = openai ? make_openai_provider(c, runtime()) : make_anthropic_provider(c, runtime());
    const ProviderResponse r = p->complete(request());
    EXPECT_EQ(r.outcome, ProviderOutcome::kHttpError);
    EXPECT_EQ(r.exchange.http_status, 401);
    EXPECT_NE(r.error.find("[REDACTED]"), std::string::npos) << r.error;
    expect_no_key(r);
  }
}

TEST_F(HttpIntegration, CancelFlagAbortsAnInFlightRequest) {
  std::atomic<bool> cancel{false};
  auto p = make_openai_provider(config(server.base("slow")), runtime(&cancel));
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    cancel = true;
  });
  const ProviderResponse r = p->complete(request());
  setter.join();
  EXPECT_EQ(r.outcome, ProviderOutcome::kCancelled) << r.error;
  EXPECT_EQ(server.hits("slow"), 1);
}

TEST_F(HttpIntegration, RefusedConnectionIsATransportError) {
  auto c = config("http://127.0.0.1:1/v1");
  auto p = make_openai_provider(c, runtime());
  EXPECT_EQ(p->complete(request()).outcome, ProviderOutcome::kTransport);
}

// ---- streaming and the services' own behaviours ----

TEST_F(HttpIntegration, SlowStreamIsReadWholeWithUsageFromItsLastChunk) {
  for (bool openai : {true, false}) {
    SCOPED_TRACE(openai ? "openai" : "anthropic");
    std::vector<std::string> lines;
    auto rt = runtime();
    rt.progress = [&](const std::string& s) { lines.push_back(s); };
    rt.progress_every = 300ms;
    auto c = config(server.base("sse_slow"));
    c.idle_timeout = 400ms;
    auto p = openai ? make_openai_provider(c, rt) : make_anthropic_provider(c, rt);
    const auto start = std::chrono::steady_clock::now();
    const ProviderResponse r = p->complete(request());
    ASSERT_TRUE(r.ok()) << r.error;
    // Longer in total than the 400 ms idle limit: data kept flowing, so it was not cut.
    EXPECT_GE(std::chrono::steady_clock::now() - start, 600ms);
    EXPECT_EQ(r.text, "streamed!");
    EXPECT_TRUE(r.exchange.streamed);
    EXPECT_EQ(r.usage.status, UsageStatus::kReported);
    EXPECT_EQ(r.usage.input_tokens, 21);
    EXPECT_EQ(r.usage.output_tokens, 9);
    EXPECT_EQ(r.stop_reason, openai ? "stop" : "end_turn");
    ASSERT_FALSE(lines.empty()); // progress while waiting
    EXPECT_NE(lines.front().find("waiting for the reply"), std::string::npos) << lines.front();
    const auto sent = server.last_body("sse_slow");
    EXPECT_EQ(sent["stream"], true);
    if (openai) {
      EXPECT_EQ(sent["stream_options"]["include_usage"], true);
    }
  }
}

TEST_F(HttpIntegration, StreamDroppedMidWayIsRetriedWhole) {
  for (bool openai : {true, false}) {
    FaultServer s;
    auto c = config(s.base("sse_drop"));
    auto p = openai ? make_openai_provider(c, runtime()) : make_anthropic_provider(c, runtime());
    const ProviderResponse r = p->complete(request());
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.text, "dropped and resent");
    EXPECT_EQ(r.exchange.retries, 1);
    EXPECT_EQ(s.hits("sse_drop"), 2);
  }
}

TEST_F(HttpIntegration, AnthropicOverloadedErrorEventMidStreamIsRetriedWithBackoff) {
  std::vector<std::string> lines;
  auto rt = runtime();
  rt.progress = [&](const std::string& s) { lines.push_back(s); };
  auto p = make_anthropic_provider(config(server.base("sse_error")), rt);
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "after overload");
  EXPECT_EQ(r.exchange.retries, 1);
  EXPECT_EQ(server.hits("sse_error"), 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("the stream reported overloaded_error"), std::string::npos) << lines[0];
}

TEST_F(HttpIntegration, Anthropic529HonoursRetryAfter) {
  auto p = make_anthropic_provider(config(server.base("overloaded")), runtime());
  const auto start = std::chrono::steady_clock::now();
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1000ms);
  EXPECT_EQ(r.exchange.retries, 1);
}

TEST_F(HttpIntegration, SpendLimit429IsNotRetriedAndStopsTheSession) {
  auto p = make_openai_provider(config(server.base("spend")), runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kHttpError);
  EXPECT_EQ(server.hits("spend"), 1);
  EXPECT_TRUE(r.stop_session);
  EXPECT_NE(r.error.find("spend limit or quota is reached; not retried"), std::string::npos)
      << r.error;
}

TEST_F(HttpIntegration, A400NamingMaxTokensIsAnsweredOnceWithTheOtherField) {
  auto p = make_openai_provider(config(server.base("fieldname")), runtime());
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "field ok");
  EXPECT_EQ(server.hits("fieldname"), 2);
  EXPECT_TRUE(server.last_body("fieldname").contains("max_completion_tokens"));
  // Remembered: the next call sends the accepted field at once.
  ASSERT_TRUE(p->complete(request()).ok());
  EXPECT_EQ(server.hits("fieldname"), 3);
}

TEST_F(HttpIntegration, StalledStreamIsCutByTheIdleTimeoutAndRetriedOnce) {
  auto c = config(server.base("idle"));
  c.idle_timeout = 400ms;
  auto p = make_openai_provider(c, runtime());
  const auto start = std::chrono::steady_clock::now();
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kTimeout) << r.error;
  EXPECT_NE(r.error.find("idle timeout"), std::string::npos) << r.error;
  EXPECT_TRUE(r.stop_session);
  EXPECT_EQ(server.hits("idle"), 2); // a timeout is retried once, not max_retries times
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
}

TEST_F(HttpIntegration, UnreachableServerStopsTheSession) {
  auto p = make_openai_provider(config("http://127.0.0.1:1/v1"), runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kTransport);
  EXPECT_TRUE(r.stop_session);
  EXPECT_NE(r.error.find("--request-timeout"), std::string::npos) << r.error;
}

TEST_F(HttpIntegration, InvalidUtf8BodyAndStringTokenCountAreBadResponsesNotCrashes) {
  auto p = make_openai_provider(config(server.base("badutf8")), runtime());
  const ProviderResponse r = p->complete(request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kBadResponse) << r.error;
  EXPECT_NO_THROW(
      (void)r.exchange.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  auto q = make_openai_provider(config(server.base("usagestring")), runtime());
  const ProviderResponse u = q->complete(request());
  EXPECT_EQ(u.outcome, ProviderOutcome::kBadResponse) << u.error;
  EXPECT_EQ(u.usage.status, UsageStatus::kInvalid);
  EXPECT_NE(u.error.find("usage.prompt_tokens is a string"), std::string::npos) << u.error;
}

} // namespace
} // namespace kloop::agent
