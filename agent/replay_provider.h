// The replay provider: serves the responses recorded for a stored session, in order, so a session
// can be re-driven without a model. Each call must carry the same prompt as the recording (matched
// by prompt_sha256); a prompt that differs, or a call past the end of the recording, is a
// kReplayMismatch outcome whose message names the iteration. The lead wires the records from the
// store.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "agent/provider.h"

namespace kloop::agent {

// One recorded response, as the store keeps it.
struct ReplayRecord {
  int iteration = 0;
  std::string prompt_sha256; // prompt_sha256() of the request that produced the response
  std::string response_text;
  TokenUsage usage;
  std::string stop_reason; // as recorded (iteration notes "stop_reason"), so the reply parser
  std::string refusal;     // reads a replayed reply as it read the original
};

class ReplayProvider final : public Provider {
public:
  // `records` in the order they were served. `session_id` only labels messages.
  ReplayProvider(std::vector<ReplayRecord> records, std::string session_id);
  std::string name() const override { return "replay"; }
  // Serves the next record when the request's prompt hash equals the recorded one.
  ProviderResponse complete(const ProviderRequest& request) override;
  std::size_t served() const { return next_; } // records served so far

private:
  std::vector<ReplayRecord> records_;
  std::string session_id_;
  std::size_t next_ = 0;
};

std::unique_ptr<Provider> make_replay_provider(std::vector<ReplayRecord> records,
                                               std::string session_id);

} // namespace kloop::agent
