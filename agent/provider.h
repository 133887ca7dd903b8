// The Provider interface: one call sends a conversation (system prompt plus user/assistant turns)
// to a generator and returns its reply text, token usage and an Exchange record of what went over
// the wire (request body with the key removed, response body, HTTP status, latency, retries). Every
// expected outcome (HTTP 429 after retries, a timeout, a malformed body, a spent budget, a
// cancelled run, a replay that does not match) is a ProviderOutcome value, never an exception.
// Implementations: openai_provider.h, anthropic_provider.h, replay_provider.h and the offline
// generator.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::agent {

// One turn of the conversation. role is "user" or "assistant".
struct Message {
  std::string role;
  std::string content;
};

// What the loop asks for. iteration (0-based) only labels the call for records and replay errors.
struct ProviderRequest {
  std::string system;            // system prompt
  std::vector<Message> messages; // user/assistant turns, oldest first; the last is "user"
  std::string model;             // provider model name; empty = the provider's configured default
  int max_tokens = 8192;         // reply token limit sent to the API
  double temperature = 0.2;      // sampling temperature sent to the API
  int iteration = 0;
  // Which of the iteration's candidates this request asks for (`--candidates-per-iteration`,
  // 0-based, of `candidates`); labels the call only (not part of the prompt or its hash).
  int candidate = 0;
  int candidates = 1;
};

// Whether a reply's token counts can be trusted. Persisted by name ("reported", "absent",
// "invalid") in the exchange record.
enum class UsageStatus : int {
  kReported = 0, // the API sent counts that make sense (offline and replay: known counts)
  kAbsent = 1,   // the API sent no usage (a server without stream usage, an old server)
  kInvalid = 2,  // the API sent usage that makes no sense (a string, a negative or fractional
                 // count, more than kMaxPlausibleTokens); `problem` says what
};
std::string_view usage_status_name(UsageStatus status);

// True for the stop reasons that mean the token limit ended the reply: OpenAI-compatible
// finish_reason "length", Anthropic stop_reason "max_tokens".
bool is_token_limit(std::string_view stop_reason);

// Largest token count of one call taken at face value (10^8: no model's context comes close).
inline constexpr std::int64_t kMaxPlausibleTokens = 100'000'000;

// Token counts of one call. Only kReported counts are numbers to add up: an absent or invalid
// usage is unknown, never 0 tokens (its counts stay 0 here and must not be charged as such).
struct TokenUsage {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  UsageStatus status = UsageStatus::kReported;
  std::string problem; // kInvalid: which field and value, e.g. "usage.prompt_tokens is a string"
  bool known() const { return status == UsageStatus::kReported; }
  std::int64_t total() const { return input_tokens + output_tokens; }
  // {"status", "input_tokens", "output_tokens"} (counts only when reported) and "problem".
  nlohmann::json to_json() const;
};

// Reads an API's usage object: `input_key` / `output_key` (e.g. "prompt_tokens" /
// "completion_tokens"). Absent object or keys -> kAbsent; a count that is not a non-negative
// integer up to kMaxPlausibleTokens (integral floats such as 12.0 are accepted) -> kInvalid naming
// `where`.`key` and the value. Never throws.
TokenUsage read_usage(const nlohmann::json* usage, const char* input_key, const char* output_key,
                      const std::string& where = "usage");

// Result class of one provider call. Persisted: values are fixed and never reused.
enum class ProviderOutcome : int {
  kOk = 0,
  kHttpError = 1,      // a non-retryable HTTP status (4xx but 429), or 429/5xx after all retries
  kTransport = 2,      // connection refused/reset, truncated body, ... after all retries
  kTimeout = 3,        // connect or total timeout, after all retries
  kTooLarge = 4,       // the response passed the size cap; the transfer was aborted
  kBadResponse = 5,    // HTTP 2xx but the body is not the API's JSON (or has no text)
  kCancelled = 6,      // the cancel flag was set (SIGINT)
  kBudgetExceeded = 7, // the session's token or cost budget is spent; nothing was sent
  kReplayMismatch = 8, // replay: the prompt differs from the recording, or the recording ended
};
std::string_view provider_outcome_name(ProviderOutcome outcome); // "ok", "http_error", ...

// What went over the wire for one call, for the store. Never holds an API key: request headers are
// recorded with secrets replaced by "[REDACTED]" and every text field is scrubbed of the key.
struct Exchange {
  std::string provider;     // "openai", "anthropic", "replay", "offline"
  std::string url;          // endpoint URL ("" for providers without HTTP)
  std::string request_body; // JSON text sent (contains no key)
  std::vector<std::pair<std::string, std::string>> request_headers; // secrets redacted
  std::string response_body;   // last response body received (may be truncated at the cap)
  long http_status = 0;        // last HTTP status (0 when no response arrived)
  std::int64_t latency_ms = 0; // wall time of the whole call, retries and waits included
  int retries = 0;             // attempts after the first
  std::string error;           // "" on success; otherwise what failed, scrubbed
  TokenUsage usage;
  bool streamed = false;          // the reply came as a server-sent event stream
  std::string stop_reason;        // finish_reason / stop_reason as the API sent it ("" unknown)
  std::string reasoning;          // reasoning returned beside the answer (reasoning_content,
                                  // reasoning, thinking blocks); never parsed as the answer
  nlohmann::json to_json() const; // {"provider","url","request_body",...}, for the store
};

// One provider call's result. text is set iff outcome == kOk (and may be empty: an empty reply, or
// one cut at the token limit before any answer, is the reply parser's to judge).
struct ProviderResponse {
  ProviderOutcome outcome = ProviderOutcome::kOk;
  std::string text;  // the reply text (kOk only)
  TokenUsage usage;  // same as exchange.usage
  std::string error; // one line naming the cause and next step ("" on kOk)
  Exchange exchange;
  std::string stop_reason; // same as exchange.stop_reason
  bool truncated = false;  // the stop reason is the token limit ("length", "max_tokens")
  std::string refusal;     // the API's own refusal text (OpenAI message.refusal), "" if none
  // The next iteration would fail the same way (provider unreachable after every retry, a spend
  // limit, a rejected key, an unknown model, a request the server refuses): the loop ends the
  // session instead of asking again.
  bool stop_session = false;
  bool ok() const { return outcome == ProviderOutcome::kOk; }
};

// A generator. Implementations are not thread-safe; one loop drives one provider.
class Provider {
public:
  virtual ~Provider() = default;
  virtual std::string name() const = 0; // "openai", "anthropic", "replay", "offline"
  // Sends one request. Never throws for expected outcomes (see ProviderOutcome); may throw
  // evaluator::InfraError for failures of kloop itself (e.g. libcurl cannot be initialised).
  virtual ProviderResponse complete(const ProviderRequest& request) = 0;
  // The requests of one iteration's candidates (`--candidates-per-iteration`), answers in their
  // order. Default: complete() one after another, stopping (kCancelled for the rest) when one
  // is cancelled. The HTTP providers send them in parallel; the offline generator proposes that
  // many distinct variants. One request: the same as complete().
  virtual std::vector<ProviderResponse>
  complete_batch(const std::vector<ProviderRequest>& requests);
  // The loop hands every provider the previous iteration's public report (PublicReport::to_json())
  // before the next complete(). LLM providers see it only through the rendered feedback prompt and
  // ignore this; the offline generator's policy reads it directly. Never receives holdout data.
  virtual void observe_public_report(const nlohmann::json& public_report) { (void)public_report; }
};

// SHA-256 (hex) identifying a request's prompt: the canonical JSON
// {"system": ..., "messages": [{"role","content"}...]} (model and sampling settings excluded).
// The store records it with each response; the replay provider matches on it.
std::string prompt_sha256(const ProviderRequest& request);

// Price of a model, for the cost budget. 0 means unknown (the cost budget then only counts 0).
struct Pricing {
  double usd_per_mtok_input = 0.0;  // US dollars per million input tokens
  double usd_per_mtok_output = 0.0; // US dollars per million output tokens
  double cost_usd(const TokenUsage& usage) const;
};

// Token and cost budget of one session. A provider checks it before each request (a spent budget
// gives kBudgetExceeded and sends nothing) and charges it with the usage of each reply; a resumed
// session is charged first with what its recorded responses used (agent/loop_record.h).
// Thread-safe (parallel requests of one iteration); requests sent together are all checked before
// any is charged, so one batch can pass the budget by its own replies.
class Budget {
public:
  // nullopt = no limit on that axis.
  Budget(std::optional<std::int64_t> max_tokens, std::optional<double> max_cost_usd)
      : max_tokens_(max_tokens), max_cost_usd_(max_cost_usd) {}
  // Adds `usage` at `pricing`. Usage that makes no sense (UsageStatus::kInvalid) adds nothing and
  // marks the spend unknown: with a limit set, exhausted() then stops the session.
  void charge(const TokenUsage& usage, const Pricing& pricing);
  // Why no further request may be sent ("token budget spent: 12000 of 10000 tokens used"; "the
  // token budget cannot be checked: ..."), or nullopt while the budget lasts.
  std::optional<std::string> exhausted() const;
  std::int64_t tokens_used() const {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_used_;
  }
  double cost_used_usd() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cost_used_usd_;
  }
  // The first usage report that made no sense ("" when every one did).
  std::string unknown_usage() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unknown_usage_;
  }

private:
  std::optional<std::int64_t> max_tokens_;
  std::optional<double> max_cost_usd_;
  mutable std::mutex mu_;
  std::int64_t tokens_used_ = 0;
  double cost_used_usd_ = 0.0;
  std::string unknown_usage_;
};

} // namespace kloop::agent
