// The offline provider (offline_provider.h).
#include "agent/offline_provider.h"

#include <chrono>

#include "agent/http_provider.h"

namespace kloop::agent {
namespace {

// End of the balanced {...} starting at text[begin] (JSON strings respected), or npos.
std::size_t object_end(std::string_view text, std::size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

} // namespace

std::optional<nlohmann::json> find_report_json(std::string_view text) {
  std::optional<nlohmann::json> found;
  std::size_t pos = 0;
  while ((pos = text.find('{', pos)) != std::string_view::npos) {
    const std::size_t end = object_end(text, pos);
    if (end == std::string_view::npos) break;
    const std::string_view candidate = text.substr(pos, end - pos);
    if (candidate.find("\"gates\"") != std::string_view::npos) {
      auto doc = nlohmann::json::parse(candidate, nullptr, /*allow_exceptions=*/false);
      if (doc.is_object() && doc.contains("gates") && doc["gates"].is_array()) {
        found = std::move(doc);
        pos = end; // skip the inner objects of this report
        continue;
      }
    }
    ++pos;
  }
  return found;
}

OfflineProvider::OfflineProvider(const op::Operator& op, std::uint64_t seed)
    : generator_(op.offline_generator(seed)) {
  if (!generator_)
    throw ProviderConfigError(std::string("--provider offline: operator ") +
                              std::string(op.cli_name()) + " (" + op.contract_id() +
                              ") has no offline kernel family; use an HTTP provider");
}

std::string render_reply(const op::OfflineCandidate& c) {
  return "Offline family variant " + c.name + ".\n\n" + c.rationale + "\n\n```cuda\n" +
         c.kernel_cu + "```\n\n```json\n" + c.manifest_json + "```\n";
}

ProviderResponse OfflineProvider::respond(const ProviderRequest& request,
                                          const op::OfflineCandidate& candidate, bool report_seen,
                                          std::chrono::steady_clock::time_point start) const {
  ProviderResponse out;
  out.outcome = ProviderOutcome::kOk;
  out.text = render_reply(candidate);
  out.exchange.provider = "offline";
  nlohmann::json body{{"iteration", request.iteration},
                      {"prompt_sha256", prompt_sha256(request)},
                      {"report_seen", report_seen}};
  if (request.candidates > 1) body["candidate"] = request.candidate;
  out.exchange.request_body = body.dump();
  out.exchange.response_body = out.text;
  out.exchange.latency_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
  return out;
}

ProviderResponse OfflineProvider::complete(const ProviderRequest& request) {
  const auto start = std::chrono::steady_clock::now(); // latency record only
  std::optional<nlohmann::json> report;
  if (!observed_.empty()) report = std::move(observed_.back());
  observed_.clear();
  if (!report && request.iteration > 0 && !request.messages.empty())
    report = find_report_json(request.messages.back().content);
  return respond(request, generator_->next(report ? &*report : nullptr), report.has_value(), start);
}

std::vector<ProviderResponse>
OfflineProvider::complete_batch(const std::vector<ProviderRequest>& requests) {
  if (requests.size() <= 1) return Provider::complete_batch(requests);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<nlohmann::json> reports = std::move(observed_);
  observed_.clear();
  std::vector<const nlohmann::json*> seen;
  for (const auto& r : reports)
    seen.push_back(&r);
  const auto candidates = generator_->next_batch(seen, static_cast<int>(requests.size()));
  std::vector<ProviderResponse> out;
  for (std::size_t i = 0; i < requests.size(); ++i)
    out.push_back(respond(requests[i], candidates.at(i), !reports.empty(), start));
  return out;
}

} // namespace kloop::agent
