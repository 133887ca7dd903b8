// The offline provider ("offline", the default generator): no network, no model. Each call asks
// the operator's offline generator (kernels/offline_generator.h: its kernel family and policy,
// e.g. kernels/rmsnorm/family_policy.h) for the next family member, given the previous public
// report, and replies like a model would: a short rationale, one ```cuda block (kernel.cu) and
// one ```json block (manifest.json). The previous report comes from
// observe_report() when the loop passes it, else from the last JSON object with a "gates" array in
// the request's last user message (the rendered feedback). Deterministic for a seed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/provider.h"
#include "kernels/offline_generator.h"
#include "kernels/operator.h"

namespace kloop::agent {

class OfflineProvider : public Provider {
public:
  // Throws ProviderConfigError naming the operator when it has no offline family.
  OfflineProvider(const op::Operator& op, std::uint64_t seed);
  std::string name() const override { return "offline"; }
  // Always kOk (the generator cannot fail on valid variants); usage is zero tokens.
  ProviderResponse complete(const ProviderRequest& request) override;
  // `--candidates-per-iteration` K > 1: K distinct members at once (OfflineGenerator::next_batch),
  // from every report observed since the last call (the previous iteration's K candidates).
  std::vector<ProviderResponse>
  complete_batch(const std::vector<ProviderRequest>& requests) override;
  // The public report (evaluator::PublicReport::to_json()) of a candidate of the previous
  // iteration, in its order; used by the next call instead of searching the prompt text.
  void observe_report(const nlohmann::json& report) { observed_.push_back(report); }
  void observe_public_report(const nlohmann::json& report) override { observe_report(report); }
  // The names of the family members served so far, oldest first.
  std::vector<std::string> history() const { return generator_->history(); }

private:
  // The reply for one generated candidate.
  ProviderResponse respond(const ProviderRequest& request, const op::OfflineCandidate& candidate,
                           bool report_seen, std::chrono::steady_clock::time_point start) const;
  std::unique_ptr<op::OfflineGenerator> generator_;
  std::vector<nlohmann::json> observed_;
};

// The last JSON object in `text` that has a "gates" array (a public report rendered into a
// prompt); nullopt when there is none. Never throws.
std::optional<nlohmann::json> find_report_json(std::string_view text);

// A model-style reply for a generated candidate: rationale, ```cuda block, ```json block.
std::string render_reply(const op::OfflineCandidate& candidate);

} // namespace kloop::agent
