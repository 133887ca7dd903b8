#include "agent/provider.h"

#include <fmt/format.h>

#include "store/hash.h"

namespace kloop::agent {

std::string_view provider_outcome_name(ProviderOutcome outcome) {
  switch (outcome) {
  case ProviderOutcome::kOk:
    return "ok";
  case ProviderOutcome::kHttpError:
    return "http_error";
  case ProviderOutcome::kTransport:
    return "transport_error";
  case ProviderOutcome::kTimeout:
    return "timeout";
  case ProviderOutcome::kTooLarge:
    return "too_large";
  case ProviderOutcome::kBadResponse:
    return "bad_response";
  case ProviderOutcome::kCancelled:
    return "cancelled";
  case ProviderOutcome::kBudgetExceeded:
    return "budget_exceeded";
  case ProviderOutcome::kReplayMismatch:
    return "replay_mismatch";
  }
  return "transport_error";
}

nlohmann::json Exchange::to_json() const {
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& [k, v] : request_headers)
    headers.push_back({k, v});
  return {{"provider", provider},
          {"url", url},
          {"request_body", request_body},
          {"request_headers", headers},
          {"response_body", response_body},
          {"http_status", http_status},
          {"latency_ms", latency_ms},
          {"retries", retries},
          {"error", error},
          {"usage", usage.invalid.empty() ? nlohmann::json{{"input_tokens", usage.input_tokens},
                                                           {"output_tokens", usage.output_tokens}}
                                          : nlohmann::json{{"input_tokens", nullptr},
                                                           {"output_tokens", nullptr},
                                                           {"invalid", usage.invalid}}}};
}

std::string prompt_sha256(const ProviderRequest& request) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : request.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::json canonical = {{"system", request.system}, {"messages", messages}};
  // dump() without indent sorts object keys (std::map) and escapes deterministically.
  return store::sha256_hex(
      canonical.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

double Pricing::cost_usd(const TokenUsage& usage) const {
  return (static_cast<double>(usage.input_tokens) * usd_per_mtok_input +
          static_cast<double>(usage.output_tokens) * usd_per_mtok_output) /
         1e6;
}

std::vector<ProviderResponse>
Provider::complete_batch(const std::vector<ProviderRequest>& requests) {
  std::vector<ProviderResponse> out;
  for (const auto& r : requests) {
    if (!out.empty() && out.back().outcome == ProviderOutcome::kCancelled) {
      ProviderResponse c;
      c.outcome = ProviderOutcome::kCancelled;
      c.error = "cancelled before this candidate's request was sent";
      c.exchange.provider = name();
      c.exchange.error = c.error;
      out.push_back(std::move(c));
      continue;
    }
    out.push_back(complete(r));
  }
  return out;
}

TokenUsage usage_from_json(const nlohmann::json& usage, std::string_view input_key,
                           std::string_view output_key, std::string_view where) {
  TokenUsage out;
  if (!usage.is_object()) return out;
  const auto count = [&](std::string_view key, std::int64_t& n) {
    const auto it = usage.find(key);
    if (it == usage.end() || !out.invalid.empty()) return;
    if (it->is_number_unsigned() && it->get<std::uint64_t>() <= std::uint64_t(kMaxReportedTokens))
      n = static_cast<std::int64_t>(it->get<std::uint64_t>());
    else if (it->is_number_integer() && !it->is_number_unsigned() && it->get<std::int64_t>() >= 0 &&
             it->get<std::int64_t>() <= kMaxReportedTokens)
      n = it->get<std::int64_t>();
    else
      out.invalid = fmt::format("{}.{} is {}, not a token count from 0 to {}", where, key,
                                it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                                kMaxReportedTokens);
  };
  count(input_key, out.input_tokens);
  count(output_key, out.output_tokens);
  if (!out.invalid.empty()) out.input_tokens = out.output_tokens = 0;
  return out;
}

void Budget::charge(const TokenUsage& usage, const Pricing& pricing) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!usage.invalid.empty()) {
    if (unknown_usage_.empty()) unknown_usage_ = usage.invalid;
    return;
  }
  tokens_used_ += usage.total();
  cost_used_usd_ += pricing.cost_usd(usage);
}

std::optional<std::string> Budget::exhausted() const {
  std::lock_guard<std::mutex> lock(mu_);
  if ((max_tokens_ || max_cost_usd_) && !unknown_usage_.empty())
    return fmt::format("the {} budget cannot be checked: the provider reported usage that makes "
                       "no sense ({}), so the session's spend is unknown; check the provider, "
                       "then start a new session",
                       max_tokens_ ? "token" : "cost", unknown_usage_);
  if (max_tokens_ && tokens_used_ >= *max_tokens_)
    return fmt::format("token budget spent: {} of {} tokens used; raise the token budget or stop",
                       tokens_used_, *max_tokens_);
  if (max_cost_usd_ && cost_used_usd_ >= *max_cost_usd_)
    return fmt::format("cost budget spent: ${:.4f} of ${:.4f} used; raise the cost budget or stop",
                       cost_used_usd_, *max_cost_usd_);
  return std::nullopt;
}

} // namespace kloop::agent
