#include "agent/replay_provider.h"

#include <fmt/format.h>

namespace kloop::agent {

ReplayProvider::ReplayProvider(std::vector<ReplayRecord> records, std::string session_id)
    : records_(std::move(records)), session_id_(std::move(session_id)) {}

ProviderResponse ReplayProvider::complete(const ProviderRequest& request) {
  ProviderResponse out;
  out.exchange.provider = name();
  const std::string hash = prompt_sha256(request);
  out.exchange.request_body = fmt::format("{{\"prompt_sha256\":\"{}\"}}", hash);
  auto mismatch = [&](std::string error) {
    out.outcome = ProviderOutcome::kReplayMismatch;
    out.error = std::move(error);
    out.exchange.error = out.error;
    return out;
  };
  if (next_ >= records_.size())
    return mismatch(fmt::format(
        "replay of session {}: iteration {} asks for response #{} but the recording has only {}; "
        "the session being replayed ran fewer iterations (lower --budget)",
        session_id_, request.iteration, next_ + 1, records_.size()));
  const ReplayRecord& rec = records_[next_];
  if (rec.prompt_sha256 != hash)
    return mismatch(fmt::format(
        "replay of session {}: the prompt of iteration {} differs from the recording (recorded "
        "iteration {}, prompt sha256 {} recorded, {} now); the prompts, contract or feedback "
        "changed since the session was recorded: replay with the kloop version that recorded it, "
        "or re-evaluate the stored candidates instead",
        session_id_, request.iteration, rec.iteration, rec.prompt_sha256, hash));
  ++next_;
  out.outcome = ProviderOutcome::kOk;
  out.text = rec.response_text;
  out.usage = rec.usage;
  out.stop_reason = rec.stop_reason;
  out.truncated = is_token_limit(rec.stop_reason);
  out.refusal = rec.refusal;
  out.exchange.stop_reason = rec.stop_reason;
  out.exchange.response_body = rec.response_text;
  out.exchange.usage = rec.usage;
  return out;
}

std::unique_ptr<Provider> make_replay_provider(std::vector<ReplayRecord> records,
                                               std::string session_id) {
  return std::make_unique<ReplayProvider>(std::move(records), std::move(session_id));
}

} // namespace kloop::agent
