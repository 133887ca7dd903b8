#include "agent/provider.h"

#include <cmath>

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
          {"usage", usage.to_json()},
          {"streamed", streamed},
          {"stop_reason", stop_reason},
          {"reasoning", reasoning}};
}

bool is_token_limit(std::string_view stop_reason) {
  return stop_reason == "length" || stop_reason == "max_tokens";
}

std::string_view usage_status_name(UsageStatus status) {
  switch (status) {
  case UsageStatus::kReported:
    return "reported";
  case UsageStatus::kAbsent:
    return "absent";
  case UsageStatus::kInvalid:
    return "invalid";
  }
  return "invalid";
}

nlohmann::json TokenUsage::to_json() const {
  nlohmann::json j = {{"status", usage_status_name(status)}};
  if (known()) {
    j["input_tokens"] = input_tokens;
    j["output_tokens"] = output_tokens;
  }
  if (!problem.empty()) j["problem"] = problem;
  return j;
}

TokenUsage read_usage(const nlohmann::json* usage, const char* input_key, const char* output_key,
                      const std::string& where) {
  TokenUsage out;
  out.status = UsageStatus::kAbsent;
  if (usage == nullptr || usage->is_null()) return out;
  auto invalid = [&](std::string problem) {
    out = TokenUsage{};
    out.status = UsageStatus::kInvalid;
    out.problem = std::move(problem);
    return out;
  };
  if (!usage->is_object())
    return invalid(fmt::format("{} is a {}, not an object", where, usage->type_name()));
  int present = 0;
  std::string missing;
  for (auto [key, count] :
       {std::pair{input_key, &out.input_tokens}, std::pair{output_key, &out.output_tokens}}) {
    const auto it = usage->find(key);
    if (it == usage->end() || it->is_null()) {
      missing = key;
      continue;
    }
    const std::string field = where + "." + key;
    if (!it->is_number())
      return invalid(fmt::format(
          "{} is a {} ({}), not a token count", field, it->type_name(),
          it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40)));
    const double v = it->get<double>();
    if (!(v >= 0) || v != std::floor(v) || v > static_cast<double>(kMaxPlausibleTokens))
      return invalid(fmt::format("{} = {} is not a plausible token count (a whole number from 0 "
                                 "to {})",
                                 field, it->dump(), kMaxPlausibleTokens));
    *count = it->is_number_integer() ? it->get<std::int64_t>() : static_cast<std::int64_t>(v);
    ++present;
  }
  if (present == 1)
    return invalid(fmt::format("{}.{} is missing while the other count is given", where, missing));
  out.status = present == 2 ? UsageStatus::kReported : UsageStatus::kAbsent;
  return out;
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

void Budget::charge(const TokenUsage& usage, const Pricing& pricing) {
  std::lock_guard<std::mutex> lock(mu_);
  if (usage.status == UsageStatus::kInvalid) {
    if (unknown_usage_.empty()) unknown_usage_ = usage.problem;
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
