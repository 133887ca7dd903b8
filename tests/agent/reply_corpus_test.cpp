// The reply corpus (tests/agent/replies/, README there): each transcript is wrapped in its API's
// reply layout (a Chat Completions or Messages body, or an event stream of it), read by the real
// provider parser, then by the reply parser with the provider's stop reason and refusal, and the
// outcome checked against the transcript's expectation. Then the loop records a parse outcome and
// its reason in the store.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "agent/anthropic_provider.h"
#include "agent/loop.h"
#include "agent/openai_provider.h"
#include "agent/reply_parser.h"
#include "agent/sse.h"
#include "kernels/rmsnorm/operator.h"
#include "store/store.h"
#include "tests/support/test_files.h"

namespace kloop::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Transcript {
  std::string file;
  std::map<std::string, std::string> header;
  std::string text;
  std::string get(const std::string& key, const std::string& fallback = "") const {
    const auto it = header.find(key);
    return it == header.end() ? fallback : it->second;
  }
};

Transcript load(const fs::path& path) {
  const std::string all = test_support::read_file(path);
  Transcript t;
  t.file = path.filename().string();
  const auto sep = all.find("\n---\n");
  EXPECT_NE(sep, std::string::npos) << t.file << " has no --- line";
  std::istringstream head(all.substr(0, sep));
  for (std::string line; std::getline(head, line);) {
    if (line.rfind("# ", 0) != 0) continue;
    const auto colon = line.find(": ");
    if (colon != std::string::npos) t.header[line.substr(2, colon - 2)] = line.substr(colon + 2);
  }
  t.text = all.substr(sep + 5);
  if (!t.text.empty() && t.text.back() == '\n') t.text.pop_back(); // the file's own last newline
  if (t.get("crlf") == "true") {
    std::string crlf;
    for (char c : t.text)
      crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    t.text = crlf;
  }
  return t;
}

std::vector<Transcript> corpus() {
  std::vector<Transcript> out;
  for (const auto& e :
       fs::directory_iterator(std::string(KLOOP_SOURCE_DIR) + "/tests/agent/replies"))
    if (e.path().extension() == ".txt") out.push_back(load(e.path()));
  std::sort(out.begin(), out.end(),
            [](const Transcript& a, const Transcript& b) { return a.file < b.file; });
  return out;
}

// Pieces of `text` of at most n bytes (a stream sends a reply a few tokens at a time).
std::vector<std::string> pieces(const std::string& text, std::size_t n = 37) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); i += n)
    out.push_back(text.substr(i, n));
  return out;
}

std::string sse(const std::string& event, const json& data) {
  return (event.empty() ? "" : "event: " + event + "\n") + "data: " + data.dump() + "\n\n";
}

// The transcript as its API sends it, read by that provider's parser.
ApiReply api_reply(const Transcript& t) {
  const bool openai = t.get("provider") == "openai";
  const bool stream = t.get("stream") == "true";
  const std::string reasoning = t.get("reasoning");
  const std::string refusal = t.get("refusal");
  if (openai) {
    const std::string stop = t.get("stop", "stop");
    const std::string rkey = t.get("reasoning_key", "reasoning_content");
    const json usage = {{"prompt_tokens", 1200}, {"completion_tokens", 800}};
    if (!stream) {
      json msg = {{"role", "assistant"}, {"content", refusal.empty() ? json(t.text) : json()}};
      if (!reasoning.empty()) msg[rkey] = reasoning;
      if (!refusal.empty()) msg["refusal"] = refusal;
      return openai_parse_reply(json{
          {"choices", {{{"index", 0}, {"message", msg}, {"finish_reason", stop}}}},
          {"usage", usage}}.dump());
    }
    std::string body;
    auto chunk = [](json delta, json finish = nullptr) {
      return json{{"object", "chat.completion.chunk"},
                  {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}};
    };
    body += sse("", chunk({{"role", "assistant"}, {"content", ""}}));
    if (!reasoning.empty()) body += sse("", chunk({{rkey, reasoning}}));
    for (const auto& p : pieces(t.text))
      body += sse("", chunk({{"content", p}}));
    body += sse("", chunk(json::object(), stop));
    body += sse(
        "", {{"object", "chat.completion.chunk"}, {"choices", json::array()}, {"usage", usage}});
    body += "data: [DONE]\n\n";
    return openai_parse_stream(parse_sse(body), false);
  }
  const std::string stop = t.get("stop", "end_turn");
  if (!stream) {
    json content = json::array();
    if (!reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", reasoning}, {"signature", "sig"}});
    content.push_back({{"type", "text"}, {"text", t.text}});
    return anthropic_parse_reply(json{{"type", "message"},
                                      {"role", "assistant"},
                                      {"content", content},
                                      {"stop_reason", stop},
                                      {"usage", {{"input_tokens", 1200}, {"output_tokens", 800}}}}
                                     .dump());
  }
  std::string body = sse(
      "message_start", {{"type", "message_start"},
                        {"message", {{"usage", {{"input_tokens", 1200}, {"output_tokens", 1}}}}}});
  int index = 0;
  if (!reasoning.empty()) {
    body +=
        sse("content_block_start", {{"type", "content_block_start"},
                                    {"index", index},
                                    {"content_block", {{"type", "thinking"}, {"thinking", ""}}}});
    body += sse("content_block_delta",
                {{"type", "content_block_delta"},
                 {"index", index},
                 {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
    body += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index++}});
  }
  body += sse("content_block_start", {{"type", "content_block_start"},
                                      {"index", index},
                                      {"content_block", {{"type", "text"}, {"text", ""}}}});
  body += "event: ping\ndata: {\"type\": \"ping\"}\n\n";
  for (const auto& p : pieces(t.text))
    body += sse("content_block_delta", {{"type", "content_block_delta"},
                                        {"index", index},
                                        {"delta", {{"type", "text_delta"}, {"text", p}}}});
  body += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  body += sse("message_delta", {{"type", "message_delta"},
                                {"delta", {{"stop_reason", stop}}},
                                {"usage", {{"output_tokens", 800}}}});
  body += sse("message_stop", {{"type", "message_stop"}});
  return anthropic_parse_stream(parse_sse(body), false);
}

TEST(ReplyCorpus, HasAtLeastTwentyTranscriptsWithExpectations) {
  const auto all = corpus();
  EXPECT_GE(all.size(), 20u);
  for (const auto& t : all) {
    EXPECT_FALSE(t.get("expect").empty()) << t.file;
    EXPECT_TRUE(t.get("provider") == "openai" || t.get("provider") == "anthropic") << t.file;
  }
}

TEST(ReplyCorpus, EveryTranscriptParsesAsExpected) {
  for (const auto& t : corpus()) {
    SCOPED_TRACE(t.file);
    const ApiReply api = api_reply(t);
    ASSERT_TRUE(api.ok) << api.error;
    EXPECT_EQ(api.usage.status, UsageStatus::kReported);
    EXPECT_EQ(api.reasoning, t.get("reasoning"));
    const ParsedReply p =
        parse_reply(api.text, ReplyContext{api.truncated, api.stop_reason, api.refusal});
    EXPECT_EQ(reply_outcome_name(p.outcome), t.get("expect")) << p.error;
    EXPECT_EQ(p.ok, t.get("expect") == "ok") << p.error;
    if (!t.get("reason").empty()) {
      EXPECT_NE(p.why.find(t.get("reason")), std::string::npos) << p.why;
    }
    if (p.ok) {
      EXPECT_NE(p.kernel_source.find("__global__"), std::string::npos);
      EXPECT_EQ(p.kernel_source.find('\r'), std::string::npos) << "CR left in kernel.cu";
      EXPECT_TRUE(json::parse(p.manifest_text, nullptr, false).is_object());
      EXPECT_EQ(p.manifest_in_prose, t.get("in_prose") == "true");
    } else {
      EXPECT_NE(p.error.find(kFormatInstruction), std::string::npos) << p.error;
    }
    if (!t.get("kernel_has").empty()) {
      EXPECT_NE(p.kernel_source.find(t.get("kernel_has")), std::string::npos) << p.kernel_source;
    }
    if (!t.get("kernel_lacks").empty()) {
      const std::string lacks = t.get("kernel_lacks") == "\\r" ? "\r" : t.get("kernel_lacks");
      EXPECT_EQ(p.kernel_source.find(lacks), std::string::npos) << p.kernel_source;
    }
    const auto gate = format_gate_result(p, api.text.size());
    EXPECT_EQ(gate.evidence["outcome"], t.get("expect"));
    EXPECT_EQ(gate.evidence["stop_reason"], api.stop_reason);
  }
}

// A provider serving transcripts' reply texts in order, with their stop reasons.
class CorpusProvider final : public Provider {
public:
  explicit CorpusProvider(std::vector<Transcript> replies) : replies_(std::move(replies)) {}
  std::string name() const override { return "corpus"; }
  ProviderResponse complete(const ProviderRequest&) override {
    const ApiReply api = api_reply(replies_.at(next_++ % replies_.size()));
    ProviderResponse r;
    r.text = api.text;
    r.stop_reason = api.stop_reason;
    r.truncated = api.truncated;
    r.refusal = api.refusal;
    r.usage = api.usage;
    r.exchange.provider = name();
    r.exchange.stop_reason = api.stop_reason;
    r.exchange.reasoning = api.reasoning;
    return r;
  }

private:
  std::vector<Transcript> replies_;
  std::size_t next_ = 0;
};

class NeverEvaluated final : public CandidateEvaluator {
public:
  evaluator::Evaluation evaluate(const evaluator::Candidate&) override {
    ADD_FAILURE() << "no reply of this session parses to a candidate";
    return {};
  }
};

class NoHoldout final : public HoldoutRunner {
public:
  holdout::HoldoutResult run(const op::Operator&, const evaluator::Candidate&, const std::string&,
                             const std::vector<nlohmann::json>&) override {
    return {};
  }
};

class Quiet final : public ProgressSink {
public:
  void line(const std::string&) override {}
};

TEST(ReplyCorpus, TheLoopRecordsEachOutcomeAndReasonInTheStore) {
  std::vector<Transcript> picked;
  for (const auto& t : corpus())
    if (t.file == "15-truncated-mid-kernel.txt" || t.file == "19-refusal-text.txt" ||
        t.file == "06-two-kernel-versions.txt")
      picked.push_back(t);
  ASSERT_EQ(picked.size(), 3u);
  const test_support::TempDir tmp("corpus");
  const fs::path dir = tmp.dir();
  {
    store::Store st = store::Store::open((dir / "store").string());
    LoopOptions o;
    o.op = &rmsnorm::operator_instance();
    o.budget = 3;
    o.provider_name = "corpus";
    o.holdout_dir = dir / "holdout";
    o.holdout_options = {4, 4096};
    CorpusProvider provider(picked);
    NeverEvaluated eval;
    NoHoldout holdout;
    Quiet quiet;
    const std::atomic<bool> cancel{false};
    const LoopResult r = run_loop(o, provider, eval, holdout, st, quiet, cancel);
    const auto d = st.load_session(r.session_id);
    ASSERT_EQ(d.iterations.size(), 3u);
    const std::vector<std::pair<std::string, std::string>> want = {
        {"ambiguous", "2 different cuda blocks"},
        {"truncated", "cut at the token limit (stop reason length)"},
        {"refusal", "declines the task"}};
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& notes = d.iterations[i].iteration.notes;
      EXPECT_EQ(notes.value("reply_outcome", ""), want[i].first) << notes.dump();
      EXPECT_NE(notes.value("reply_reason", "").find(want[i].second), std::string::npos)
          << notes.dump();
      ASSERT_FALSE(d.iterations[i].candidates.empty());
      const auto* g = d.iterations[i].candidates.front().gate("format");
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(g->evidence.value("outcome", ""), want[i].first);
    }
    EXPECT_EQ(d.iterations[1].iteration.notes.value("stop_reason", ""), "length");
  }
}

} // namespace
} // namespace kloop::agent
