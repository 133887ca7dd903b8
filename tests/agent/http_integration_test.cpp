// Integration tests of the real libcurl transport and both providers against a loopback HTTP
// server (cpp-httplib) that speaks each API and injects faults: slow first byte past the timeout,
// 429 with Retry-After, 500 then success, connection reset, truncated body, invalid JSON, a 50 MiB
// body, an error that echoes the key, and cancellation mid-request.
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
    c.total_timeout = 3000ms;
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
  c.total_timeout = 200ms;
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
  auto p = make_openai_provider(config(server.base("huge")), runtime());
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

} // namespace
} // namespace kloop::agent
