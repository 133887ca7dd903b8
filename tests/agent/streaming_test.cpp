// Unit tests of the streaming pieces: SSE framing (line ends, comments, multi-line data, chunk
// boundaries anywhere), both APIs' stream parsers (usage at the end, reasoning, error events,
// incomplete streams), the request-field fallback, spend-limit detection, usage validation, and
// the provider over a scripted transport (an overloaded stream retried, a 400 fallback sent once).
#include <gtest/gtest.h>

#include "agent/anthropic_provider.h"
#include "agent/openai_provider.h"
#include "agent/sse.h"
#include "tests/agent/fakes.h"

namespace kloop::agent {
namespace {

using nlohmann::json;
using testing::FakeClock;
using testing::http;
using testing::ScriptedTransport;

TEST(Sse, FramingFollowsTheStandard) {
  const auto e = parse_sse("\xEF\xBB\xBF: comment\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\n"
                           "data:  lead\rid: 7\r\rdata\n\nevent: only\n\n"
                           "data: not ended");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0], (SseEvent{"a", "1\n2", ""}));
  EXPECT_EQ(e[1], (SseEvent{"", " lead", "7"}));
  EXPECT_EQ(e[2], (SseEvent{"", "", "7"})); // "data" with no colon: an empty data line
  EXPECT_EQ(e[3], (SseEvent{"only", "", "7"}));
}

TEST(Sse, ChunkBoundariesAnywhereGiveTheSameEvents) {
  const std::string body = "event: x\r\ndata: {\"a\":1}\r\n\r\n: ping\n\ndata: [DONE]\n\n";
  const auto whole = parse_sse(body);
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    SseDecoder d;
    std::vector<SseEvent> got;
    d.feed(body.substr(0, cut), got);
    d.feed(body.substr(cut), got);
    EXPECT_EQ(got, whole) << "cut at " << cut;
    EXPECT_FALSE(d.pending());
  }
  SseDecoder d;
  std::vector<SseEvent> got;
  d.feed("data: half", got);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(d.pending());
}

std::string data(const json& j) {
  return "data: " + j.dump() + "\n\n";
}

TEST(OpenAiStream, ReadsTextReasoningFinishAndFinalUsage) {
  const std::string body =
      data({{"choices", {{{"delta", {{"role", "assistant"}, {"reasoning_content", "think "}}}}}}}) +
      data({{"choices", {{{"delta", {{"content", "hel"}}}}}}}) +
      data({{"choices", {{{"delta", {{"content", "lo"}, {"reasoning", "more"}}}}}}}) +
      data({{"choices", {{{"delta", json::object()}, {"finish_reason", "length"}}}}}) +
      data({{"choices", json::array()},
            {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 2}}}}) +
      "data: [DONE]\n\n";
  const ApiReply r = openai_parse_stream(parse_sse(body), false);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.text, "hello");
  EXPECT_EQ(r.reasoning, "think more");
  EXPECT_EQ(r.stop_reason, "length");
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.usage.status, UsageStatus::kReported);
  EXPECT_EQ(r.usage.total(), 7);
}

TEST(OpenAiStream, NoUsageIsAbsentAndACutStreamIsIncomplete) {
  const std::string head = data({{"choices", {{{"delta", {{"content", "x"}}}}}}});
  const ApiReply done = openai_parse_stream(
      parse_sse(head +
                data({{"choices", {{{"delta", json::object()}, {"finish_reason", "stop"}}}}}) +
                "data: [DONE]\n\n"),
      false);
  ASSERT_TRUE(done.ok);
  EXPECT_EQ(done.usage.status, UsageStatus::kAbsent);
  const ApiReply cut = openai_parse_stream(parse_sse(head), false);
  EXPECT_FALSE(cut.ok);
  EXPECT_TRUE(cut.incomplete);
  const ApiReply err = openai_parse_stream(
      parse_sse(head + data({{"error", {{"type", "server_error"}, {"message", "boom"}}}})), false);
  EXPECT_EQ(err.stream_error_type, "server_error");
  EXPECT_EQ(err.stream_error_message, "boom");
  const ApiReply bad = openai_parse_stream(parse_sse("data: {\"choi\n\n" + head), false);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("not JSON"), std::string::npos);
}

TEST(AnthropicStream, ReadsBlocksStopReasonUsageAndErrorEvents) {
  auto ev = [](const char* name, const json& j) {
    return std::string("event: ") + name + "\n" + data(j);
  };
  const std::string body =
      ev("message_start",
         {{"type", "message_start"},
          {"message", {{"usage", {{"input_tokens", 30}, {"output_tokens", 1}}}}}}) +
      ev("content_block_delta", {{"type", "content_block_delta"},
                                 {"delta", {{"type", "thinking_delta"}, {"thinking", "hmm"}}}}) +
      "event: ping\ndata: {\"type\": \"ping\"}\n\n" +
      ev("content_block_delta",
         {{"type", "content_block_delta"}, {"delta", {{"type", "text_delta"}, {"text", "ok"}}}}) +
      ev("message_delta", {{"type", "message_delta"},
                           {"delta", {{"stop_reason", "max_tokens"}}},
                           {"usage", {{"output_tokens", 12}}}});
  const ApiReply cut = anthropic_parse_stream(parse_sse(body), false);
  EXPECT_TRUE(cut.incomplete);
  const ApiReply r = anthropic_parse_stream(
      parse_sse(body + ev("message_stop", {{"type", "message_stop"}})), false);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.text, "ok");
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.usage.input_tokens, 30);
  EXPECT_EQ(r.usage.output_tokens, 12);
  const ApiReply over = anthropic_parse_stream(
      parse_sse(body + ev("error",
                          {{"type", "error"},
                           {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}})),
      false);
  EXPECT_EQ(over.stream_error_type, "overloaded_error");
}

TEST(Usage, NonsenseIsInvalidNeverZeroTokens) {
  const json ok = {{"a", 3}, {"b", 4.0}};
  EXPECT_EQ(read_usage(&ok, "a", "b").status, UsageStatus::kReported);
  EXPECT_EQ(read_usage(&ok, "a", "b").total(), 7);
  EXPECT_EQ(read_usage(nullptr, "a", "b").status, UsageStatus::kAbsent);
  for (const json& bad :
       {json{{"a", "12"}, {"b", 1}}, json{{"a", -1}, {"b", 1}}, json{{"a", 1e30}, {"b", 1}},
        json{{"a", 1.5}, {"b", 1}}, json{{"a", 3}}, json("usage")}) {
    const TokenUsage u = read_usage(&bad, "a", "b");
    EXPECT_EQ(u.status, UsageStatus::kInvalid) << bad.dump();
    EXPECT_FALSE(u.known());
    EXPECT_FALSE(u.problem.empty());
    EXPECT_FALSE(u.to_json().contains("input_tokens")) << "an invalid count is not a number";
  }
}

TEST(WireFallback, A400NamingAFieldChangesItOnce) {
  WireOptions w;
  w.max_tokens_field = "max_tokens";
  const auto a =
      adapt_to_refusal("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                       "'max_completion_tokens' instead.",
                       w);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->max_tokens_field, "max_completion_tokens");
  EXPECT_FALSE(adapt_to_refusal("Unsupported parameter: 'max_completion_tokens'", *a));
  const auto b = adapt_to_refusal("extra fields not permitted: stream_options", w);
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->stream_usage);
  EXPECT_TRUE(b->stream);
  EXPECT_FALSE(adapt_to_refusal("max_tokens: 9000 > 4096, the maximum for this model", w));
  EXPECT_FALSE(adapt_to_refusal("model not found", w));
}

TEST(SpendLimit, ReadsTheErrorCodeNotTheMessage) {
  EXPECT_TRUE(is_spend_limit(
      R"({"error":{"type":"rate_limit_error","details":{"error_code":"SPEND_LIMIT_EXCEEDED"}}})"));
  EXPECT_TRUE(is_spend_limit(R"({"error":{"code":"insufficient_quota","message":"..."}})"));
  EXPECT_FALSE(is_spend_limit(R"({"error":{"type":"rate_limit_error","message":"spend limit"}})"));
  EXPECT_FALSE(is_spend_limit("not json"));
}

struct Harness {
  std::shared_ptr<ScriptedTransport> transport = std::make_shared<ScriptedTransport>();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  ProviderRuntime runtime() { return ProviderRuntime{transport, clock, nullptr, nullptr, {}}; }
  static HttpProviderConfig config() {
    HttpProviderConfig c;
    c.base_url = "http://127.0.0.1:9/v1";
    c.model = "m";
    c.retry.initial_backoff = std::chrono::milliseconds(100);
    c.retry.jitter_seed = 1;
    return c;
  }
};

ProviderRequest request() {
  ProviderRequest r;
  r.messages = {{"user", "hi"}};
  return r;
}

TEST(StreamingProvider, AnOverloadedStreamIsRetriedAndAJsonAnswerToAStreamRequestIsRead) {
  Harness h;
  const std::string overloaded =
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n";
  h.transport->script = {
      http(200, overloaded, {{"content-type", "text/event-stream"}}),
      http(200, R"({"content":[{"type":"text","text":"fine"}],"stop_reason":"end_turn",)"
                R"("usage":{"input_tokens":1,"output_tokens":1}})")};
  auto p = make_anthropic_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "fine");
  EXPECT_EQ(r.exchange.retries, 1);
  EXPECT_FALSE(r.exchange.streamed); // the server answered with one JSON body
  EXPECT_EQ(json::parse(h.transport->requests[0].body)["stream"], true);
  EXPECT_EQ(h.transport->requests[0].idle_timeout, Harness::config().idle_timeout);
}

TEST(StreamingProvider, NoStreamSendsNoStreamFieldsAndNoIdleLimit) {
  Harness h;
  auto c = Harness::config();
  c.stream = false;
  h.transport->script = {http(200, R"({"choices":[{"message":{"content":"x"},)"
                                   R"("finish_reason":"stop"}],"usage":{"prompt_tokens":1,)"
                                   R"("completion_tokens":1}})")};
  auto p = make_openai_provider(c, h.runtime());
  ASSERT_TRUE(p->complete(request()).ok());
  const json sent = json::parse(h.transport->requests[0].body);
  EXPECT_FALSE(sent.contains("stream"));
  EXPECT_FALSE(sent.contains("stream_options"));
  EXPECT_EQ(sent["max_tokens"], 8192); // not api.openai.com: the classic field
  EXPECT_EQ(h.transport->requests[0].idle_timeout.count(), 0);
}

TEST(StreamingProvider, TruncatedEmptyReplyIsOkAndSaysSo) {
  Harness h;
  h.transport->script = {http(200,
                              R"({"choices":[{"message":{"content":null,)"
                              R"("reasoning_content":"long thoughts"},"finish_reason":"length"}],)"
                              R"("usage":{"prompt_tokens":1,"completion_tokens":8192}})")};
  auto p = make_openai_provider(Harness::config(), h.runtime());
  const ProviderResponse r = p->complete(request());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.text.empty());
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.stop_reason, "length");
  EXPECT_EQ(r.exchange.reasoning, "long thoughts");
}

} // namespace
} // namespace kloop::agent
