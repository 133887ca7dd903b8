// Unit tests of the providers with a scripted transport and a fake clock: request/response JSON of
// both APIs, retry policy, key scrubbing, budget, cancellation, configuration errors and replay.
#include <cstdlib>

#include <gtest/gtest.h>

#include "agent/anthropic_provider.h"
#include "agent/openai_provider.h"
#include "agent/replay_provider.h"
#include "tests/agent/fakes.h"

namespace kloop::agent {
namespace {

using testing::FakeClock;
using testing::http;
using testing::ScriptedTransport;
using testing::transport_failure;

constexpr const char* kSecret = "sk-test-SECRET-0123456789abcdef";

// No streaming, the classic max_tokens field: the request shape every server understands.
const WireOptions kPlain{false, false, "max_tokens", true, false};

ProviderRequest sample_request() {
  ProviderRequest r;
  r.system = "system text";
  r.messages = {{"user", "write a kernel"}, {"assistant", "```cuda\n```"}, {"user", "fix it"}};
  r.model = "m-1";
  r.max_tokens = 1234;
  r.temperature = 0.5;
  return r;
}

const char* kOpenAiOk = R"({"id":"x","choices":[{"index":0,"message":{"role":"assistant",
  "content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7}})";
const char* kAnthropicOk = R"({"id":"msg","type":"message","role":"assistant","content":[
  {"type":"text","text":"hel"},{"type":"text","text":"lo"}],"stop_reason":"end_turn",
  "usage":{"input_tokens":13,"output_tokens":5}})";

struct Harness {
  std::shared_ptr<ScriptedTransport> transport = std::make_shared<ScriptedTransport>();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  ProviderRuntime runtime(Budget* budget = nullptr, const std::atomic<bool>* cancel = nullptr) {
    return ProviderRuntime{transport, clock, budget, cancel};
  }
  static HttpProviderConfig config() {
    HttpProviderConfig c;
    c.base_url = "http://127.0.0.1:9/v1/";
    c.api_key_env = "KLOOP_TEST_KEY";
    c.model = "default-model";
    c.retry.initial_backoff = std::chrono::milliseconds(100);
    c.retry.max_backoff = std::chrono::milliseconds(1000);
    c.retry.max_retries = 3;
    c.retry.jitter_seed = 7;
    return c;
  }
};

class ProviderTest : public ::testing::Test {
protected:
  void SetUp() override { setenv("KLOOP_TEST_KEY", kSecret, 1); }
  void TearDown() override { unsetenv("KLOOP_TEST_KEY"); }
};

TEST(OpenAiJson, RequestCarriesSystemTurnsModelAndSampling) {
  const auto j = openai_request_json(sample_request(), "default", kPlain);
  EXPECT_EQ(j["model"], "m-1");
  ASSERT_EQ(j["messages"].size(), 4u);
  EXPECT_EQ(j["messages"][0]["role"], "system");
  EXPECT_EQ(j["messages"][0]["content"], "system text");
  EXPECT_EQ(j["messages"][2]["role"], "assistant");
  EXPECT_EQ(j["messages"][3]["content"], "fix it");
  EXPECT_EQ(j["max_tokens"], 1234);
  EXPECT_DOUBLE_EQ(j["temperature"].get<double>(), 0.5);
  ProviderRequest no_model = sample_request();
  no_model.model.clear();
  no_model.system.clear();
  const auto k = openai_request_json(no_model, "default", kPlain);
  EXPECT_EQ(k["model"], "default");
  EXPECT_EQ(k["messages"].size(), 3u); // no empty system message
}

TEST(OpenAiJson, ParsesTextAndUsage) {
  const ApiReply r = openai_parse_reply(kOpenAiOk);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.text, "hello");
  EXPECT_EQ(r.usage.input_tokens, 11);
  EXPECT_EQ(r.usage.output_tokens, 7);
}

TEST(OpenAiJson, RejectsBodiesWithoutText) {
  EXPECT_FALSE(openai_parse_reply("not json").ok);
  EXPECT_FALSE(openai_parse_reply("[]").ok);
  EXPECT_FALSE(openai_parse_reply(R"({"choices":[]})").ok);
  // A null content is an empty reply when the token limit explains it (the reply parser then says
  // the reply was cut), and a bad body when nothing does.
  const ApiReply cut =
      openai_parse_reply(R"({"choices":[{"message":{"content":null},"finish_reason":"length"}]})");
  EXPECT_TRUE(cut.ok);
  EXPECT_TRUE(cut.truncated);
  const ApiReply null_content =
      openai_parse_reply(R"({"choices":[{"message":{"content":null},"finish_reason":"stop"}]})");
  EXPECT_FALSE(null_content.ok);
  EXPECT_NE(null_content.error.find("stop"), std::string::npos);
  EXPECT_EQ(openai_error_message(R"({"error":{"message":"bad model","type":"x"}})"), "bad model");
  EXPECT_EQ(openai_error_message("<html>"), "");
}

TEST(AnthropicJson, RequestPutsSystemAtTopLevel) {
  const auto j = anthropic_request_json(sample_request(), "default", kPlain);
  EXPECT_EQ(j["system"], "system text");
  EXPECT_EQ(j["model"], "m-1");
  ASSERT_EQ(j["messages"].size(), 3u);
  EXPECT_EQ(j["messages"][0]["role"], "user");
  EXPECT_EQ(j["max_tokens"], 1234);
  ProviderRequest no_system = sample_request();
  no_system.system.clear();
  EXPECT_FALSE(anthropic_request_json(no_system, "d", kPlain).contains("system"));
}

TEST(AnthropicJson, ConcatenatesTextBlocksAndReadsUsage) {
  const ApiReply r = anthropic_parse_reply(kAnthropicOk);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.text, "hello");
  EXPECT_EQ(r.usage.input_tokens, 13);
  EXPECT_EQ(r.usage.output_tokens, 5);
  EXPECT_FALSE(anthropic_parse_reply(R"({"content":[{"type":"tool_use"}]})").ok);
  EXPECT_FALSE(anthropic_parse_reply(R"({"content":"text"})").ok);
  EXPECT_EQ(anthropic_error_message(
                R"({"type":"error","error":{"type":"overloaded_error","message":"busy"}})"),
            "overloaded_error: busy");
}

TEST_F(ProviderTest, OpenAiSendsBearerKeyToChatCompletionsAndRecordsExchange) {
  Harness h;
  h.transport->script.push_back(http(200, kOpenAiOk));
  auto p = make_openai_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(sample_request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "hello");
  ASSERT_EQ(h.transport->requests.size(), 1u);
  const HttpRequest& sent = h.transport->requests[0];
  EXPECT_EQ(sent.url, "http://127.0.0.1:9/v1/chat/completions");
  bool bearer = false;
  for (const auto& [k, v] : sent.headers)
    bearer |= (k == "Authorization" && v == std::string("Bearer ") + kSecret);
  EXPECT_TRUE(bearer);
  EXPECT_EQ(r.exchange.http_status, 200);
  EXPECT_EQ(r.exchange.retries, 0);
  EXPECT_EQ(r.exchange.usage.output_tokens, 7);
  EXPECT_EQ(r.exchange.response_body, kOpenAiOk);
  EXPECT_EQ(nlohmann::json::parse(r.exchange.request_body)["model"], "m-1");
}

TEST_F(ProviderTest, AnthropicSendsKeyAndVersionHeaders) {
  Harness h;
  h.transport->script.push_back(http(200, kAnthropicOk));
  auto p = make_anthropic_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(sample_request());
  ASSERT_TRUE(r.ok()) << r.error;
  const HttpRequest& sent = h.transport->requests.at(0);
  EXPECT_EQ(sent.url, "http://127.0.0.1:9/v1/v1/messages");
  std::map<std::string, std::string> hdr(sent.headers.begin(), sent.headers.end());
  EXPECT_EQ(hdr["x-api-key"], kSecret);
  EXPECT_EQ(hdr["anthropic-version"], "2023-06-01");
}

TEST_F(ProviderTest, KeyNeverAppearsInExchangeOrErrorEvenWhenTheServerEchoesIt) {
  Harness h;
  const std::string echo =
      std::string(R"({"error":{"message":"Incorrect API key provided: )") + kSecret + R"("}})";
  h.transport->script.push_back(http(401, echo));
  auto p = make_openai_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(sample_request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kHttpError);
  const std::string record = r.exchange.to_json().dump() + r.error;
  EXPECT_EQ(record.find(kSecret), std::string::npos) << record;
  EXPECT_NE(record.find("[REDACTED]"), std::string::npos);
  EXPECT_NE(r.error.find("KLOOP_TEST_KEY"), std::string::npos); // names where the key comes from
  EXPECT_EQ(h.transport->requests.size(), 1u);                  // 401 is not retried
}

TEST_F(ProviderTest, AnthropicKeyHeaderIsRedactedInTheRecord) {
  Harness h;
  h.transport->script.push_back(http(200, kAnthropicOk));
  auto p = make_anthropic_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(sample_request());
  const std::string record = r.exchange.to_json().dump();
  EXPECT_EQ(record.find(kSecret), std::string::npos);
  EXPECT_NE(record.find("x-api-key"), std::string::npos);
}

TEST_F(ProviderTest, RetriesServerErrorsWithGrowingJitteredBackoff) {
  Harness h;
  h.transport->script = {http(500, "oops"), http(503, "oops"), http(200, kOpenAiOk)};
  auto p = make_openai_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(sample_request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.exchange.retries, 2);
  ASSERT_EQ(h.clock->sleeps.size(), 2u);
  EXPECT_GE(h.clock->sleeps[0].count(), 50); // 100 ms * [0.5, 1]
  EXPECT_LE(h.clock->sleeps[0].count(), 100);
  EXPECT_GE(h.clock->sleeps[1].count(), 100); // 200 ms * [0.5, 1]
  EXPECT_LE(h.clock->sleeps[1].count(), 200);
  EXPECT_EQ(r.exchange.latency_ms, h.clock->sleeps[0].count() + h.clock->sleeps[1].count());
}

TEST_F(ProviderTest, HonoursRetryAfterSecondsCapped) {
  Harness h;
  auto cfg = Harness::config();
  cfg.retry.max_retry_after = std::chrono::milliseconds(5000);
  h.transport->script = {http(429, "{}", {{"retry-after", "2"}}),
                         http(429, "{}", {{"retry-after", "3600"}}), http(200, kOpenAiOk)};
  auto p = make_openai_provider(cfg, h.runtime());
  ASSERT_TRUE(p->complete(sample_request()).ok());
  ASSERT_EQ(h.clock->sleeps.size(), 2u);
  EXPECT_EQ(h.clock->sleeps[0].count(), 2000);
  EXPECT_EQ(h.clock->sleeps[1].count(), 5000);
}

TEST_F(ProviderTest, GivesUpAfterMaxRetriesWithHttpError) {
  Harness h;
  for (int i = 0; i < 10; ++i)
    h.transport->script.push_back(http(429, R"({"error":"slow down"})"));
  auto p = make_openai_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(sample_request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kHttpError);
  EXPECT_EQ(r.exchange.retries, 3);
  EXPECT_EQ(h.transport->requests.size(), 4u);
  EXPECT_NE(r.error.find("429"), std::string::npos);
  EXPECT_NE(r.error.find("slow down"), std::string::npos);
}

TEST_F(ProviderTest, DoesNotRetryClientErrorsOrOversizedOrBadBodies) {
  for (const HttpResponse& first : {http(400, "{}"), http(404, "{}"), http(200, "not json"),
                                    transport_failure(TransportStatus::kTooLarge, "too big")}) {
    Harness h;
    h.transport->script = {first, http(200, kOpenAiOk)};
    auto p = make_openai_provider(Harness::config(), h.runtime());
    const ProviderResponse r = p->complete(sample_request());
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(h.transport->requests.size(), 1u) << provider_outcome_name(r.outcome);
  }
}

TEST_F(ProviderTest, MapsTransportFailuresToOutcomesAfterRetries) {
  const std::pair<TransportStatus, ProviderOutcome> cases[] = {
      {TransportStatus::kTimeout, ProviderOutcome::kTimeout},
      {TransportStatus::kConnectError, ProviderOutcome::kTransport},
      {TransportStatus::kIoError, ProviderOutcome::kTransport}};
  for (const auto& [status, outcome] : cases) {
    Harness h;
    for (int i = 0; i < 4; ++i)
      h.transport->script.push_back(transport_failure(status, "x"));
    auto p = make_openai_provider(Harness::config(), h.runtime());
    const ProviderResponse r = p->complete(sample_request());
    EXPECT_EQ(r.outcome, outcome);
    // A timeout is retried once (a hung server does not cost max_retries deadlines).
    EXPECT_EQ(r.exchange.retries, status == TransportStatus::kTimeout ? 1 : 3);
    EXPECT_TRUE(r.stop_session); // unreachable: the loop stops instead of asking again
  }
}

TEST_F(ProviderTest, SpentBudgetSendsNothingAndSaysWhy) {
  Harness h;
  Budget budget(/*max_tokens=*/20, std::nullopt);
  h.transport->script = {http(200, kOpenAiOk), http(200, kOpenAiOk)};
  auto p = make_openai_provider(Harness::config(), h.runtime(&budget));
  ASSERT_TRUE(p->complete(sample_request()).ok()); // 18 tokens used
  EXPECT_EQ(budget.tokens_used(), 18);
  ASSERT_TRUE(p->complete(sample_request()).ok()); // 36 >= 20
  const ProviderResponse r = p->complete(sample_request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kBudgetExceeded);
  EXPECT_NE(r.error.find("token budget"), std::string::npos);
  EXPECT_EQ(h.transport->requests.size(), 2u);
}

TEST(BudgetTest, CostBudgetUsesPricing) {
  Budget b(std::nullopt, 0.01);
  Pricing price{.usd_per_mtok_input = 1000.0, .usd_per_mtok_output = 2000.0};
  b.charge(TokenUsage{4, 2}, price); // 0.004 + 0.004
  EXPECT_FALSE(b.exhausted().has_value());
  b.charge(TokenUsage{3, 0}, price); // +0.003 = 0.011
  ASSERT_TRUE(b.exhausted().has_value());
  EXPECT_NE(b.exhausted()->find("cost budget"), std::string::npos);
}

TEST_F(ProviderTest, CancelDuringBackoffEndsWithCancelled) {
  Harness h;
  std::atomic<bool> cancel{false};
  h.clock->cancel_on_sleep = &cancel;
  h.transport->script = {http(503, "{}"), http(200, kOpenAiOk)};
  auto p = make_openai_provider(Harness::config(), h.runtime(nullptr, &cancel));
  const ProviderResponse r = p->complete(sample_request());
  EXPECT_EQ(r.outcome, ProviderOutcome::kCancelled);
  EXPECT_EQ(h.transport->requests.size(), 1u);
}

TEST_F(ProviderTest, CancelledTransferIsNotRetried) {
  Harness h;
  h.transport->script = {transport_failure(TransportStatus::kCancelled, "cancelled"),
                         http(200, kOpenAiOk)};
  auto p = make_openai_provider(Harness::config(), h.runtime());
  EXPECT_EQ(p->complete(sample_request()).outcome, ProviderOutcome::kCancelled);
  EXPECT_EQ(h.transport->requests.size(), 1u);
}

TEST(ProviderConfig, MissingKeyForOfficialOpenAiIsAClearError) {
  unsetenv("KLOOP_ABSENT_KEY");
  Harness h;
  HttpProviderConfig c;
  c.api_key_env = "KLOOP_ABSENT_KEY";
  try {
    make_openai_provider(c, h.runtime());
    FAIL() << "expected ProviderConfigError";
  } catch (const ProviderConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("KLOOP_ABSENT_KEY"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--api-key-env"), std::string::npos);
  }
  HttpProviderConfig a;
  a.api_key_env = "KLOOP_ABSENT_KEY";
  EXPECT_THROW(make_anthropic_provider(a, h.runtime()), ProviderConfigError);
}

TEST(ProviderConfig, LocalServerRunsWithoutKeyAndSendsNoAuthorization) {
  unsetenv("KLOOP_ABSENT_KEY");
  Harness h;
  HttpProviderConfig c = Harness::config();
  c.api_key_env = "KLOOP_ABSENT_KEY";
  h.transport->script.push_back(http(200, kOpenAiOk));
  auto p = make_openai_provider(c, h.runtime());
  ASSERT_TRUE(p->complete(sample_request()).ok());
  for (const auto& [k, v] : h.transport->requests.at(0).headers)
    EXPECT_NE(k, "Authorization");
}

TEST(ProviderConfig, RejectsNonHttpBaseUrl) {
  Harness h;
  HttpProviderConfig c = Harness::config();
  c.base_url = "file:///etc/passwd";
  EXPECT_THROW(make_openai_provider(c, h.runtime()), ProviderConfigError);
  EXPECT_EQ(url_host("https://user@API.OpenAI.com:443/v1"), "api.openai.com");
}

TEST(PromptHash, DependsOnPromptNotOnModelOrSampling) {
  ProviderRequest a = sample_request();
  ProviderRequest b = a;
  b.model = "other";
  b.temperature = 1.0;
  b.iteration = 9;
  EXPECT_EQ(prompt_sha256(a), prompt_sha256(b));
  b.messages.back().content += " ";
  EXPECT_NE(prompt_sha256(a), prompt_sha256(b));
  EXPECT_EQ(prompt_sha256(a).size(), 64u);
}

TEST(ReplayProviderTest, ServesRecordedResponsesInOrder) {
  ProviderRequest r0 = sample_request();
  ProviderRequest r1 = sample_request();
  r1.iteration = 1;
  r1.messages.push_back({"user", "second"});
  ReplayProvider p(
      {{0, prompt_sha256(r0), "reply zero", {3, 4}}, {1, prompt_sha256(r1), "reply one", {5, 6}}},
      "s-42");
  const ProviderResponse a = p.complete(r0);
  ASSERT_TRUE(a.ok()) << a.error;
  EXPECT_EQ(a.text, "reply zero");
  EXPECT_EQ(a.usage.output_tokens, 4);
  const ProviderResponse b = p.complete(r1);
  ASSERT_TRUE(b.ok()) << b.error;
  EXPECT_EQ(b.text, "reply one");
  const ProviderResponse c = p.complete(r1);
  EXPECT_EQ(c.outcome, ProviderOutcome::kReplayMismatch);
  EXPECT_NE(c.error.find("only 2"), std::string::npos);
}

TEST(ReplayProviderTest, DifferentPromptIsAnErrorNamingTheIteration) {
  ProviderRequest recorded = sample_request();
  ProviderRequest now = recorded;
  now.iteration = 3;
  now.messages.back().content = "changed feedback";
  ReplayProvider p({{3, prompt_sha256(recorded), "reply", {}}}, "s-7");
  const ProviderResponse r = p.complete(now);
  EXPECT_EQ(r.outcome, ProviderOutcome::kReplayMismatch);
  EXPECT_NE(r.error.find("iteration 3"), std::string::npos);
  EXPECT_NE(r.error.find("s-7"), std::string::npos);
  EXPECT_EQ(p.served(), 0u);
}

} // namespace
} // namespace kloop::agent
