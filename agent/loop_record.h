// How the refinement loop writes to the store: one Store::Step (one transaction) per iteration,
// holding the prompt, the response, the candidate files, build artifacts, gate results, tool calls
// and the raw benchmark samples; plus the holdout commitment, the holdout run and the promotion.
// Large evidence (raw samples, sanitizer reports, verbatim logs) goes to blobs, never inline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agent/loop.h"
#include "agent/provider.h"
#include "evaluator/gate.h"
#include "evaluator/pipeline.h"
#include "store/store.h"

namespace kloop::agent {

// The paired speed-up of a report's benchmark gate (geometric mean over the sweep against the
// in-tree baseline), or nullopt when the gate did not pass or has no figure.
std::optional<double> speedup_of(const evaluator::PublicReport& report);
// The bootstrap 95% interval of that speed-up, when the gate reports one.
std::optional<std::pair<double, double>> speedup_interval_of(const evaluator::PublicReport& report);
// True when the benchmark gate says the speed-up clears the A/A noise floor.
bool clears_noise_floor(const evaluator::PublicReport& report);

// The store row of one gate result (candidate_id is left for the caller).
store::GateRecord gate_record(const evaluator::GateResult& gate, int ordinal);

class Recorder {
public:
  explicit Recorder(store::Store& store) : store_(store) {}

  void holdout_commitment(std::int64_t session_id, const std::string& commitment);
  // An iteration whose provider call failed (no candidate).
  void provider_failure(std::int64_t session_id, int index, const ProviderRequest& request,
                        const ProviderResponse& response, double wall_s);
  // A full iteration: prompt, response, candidate (when the reply parsed), gates, artifacts.
  void iteration(std::int64_t session_id, int index, const ProviderRequest& request,
                 const ProviderResponse& response, const evaluator::Candidate& candidate,
                 bool parsed, const std::optional<evaluator::Evaluation>& evaluation,
                 const evaluator::PublicReport& report, double wall_s);

  // What the next iteration needs after a resume: the last committed candidate's public report,
  // reply and source.
  struct PublicState {
    evaluator::PublicReport report;
    std::string reply, source;
    int iteration = 0;
  };
  std::optional<PublicState> last_public_state(std::int64_t session_id);

private:
  std::int64_t add_exchange(store::Store::Step& step, std::int64_t iteration_id,
                            const ProviderRequest& request, const ProviderResponse& response);
  store::Store& store_;
};

// Ends a session without a verdict because its holdout evidence is missing or void (no
// commitment in the store, a sealed file that does not match it, a suite unsealed by an earlier
// run that recorded nothing): the reason goes to params.holdout_error, the status to `failed`, no
// promotion decision is recorded; `result` says "failed" with exit code 3.
void end_session_failed(store::Store& store, std::int64_t session_id, const std::string& why,
                        LoopResult& result);

// Steps 3-5 of the loop: freeze the best public candidate, run the holdout once, decide
// promotion, write the receipt and export the promoted artifact. Fills `result`.
void finish_session(const LoopOptions& options, const store::SessionRecord& session,
                    holdout::SealedSuite& sealed, HoldoutRunner& holdout_runner, Recorder& rec,
                    store::Store& store, ProgressSink& progress, const std::string& stop_note,
                    LoopResult& result);

} // namespace kloop::agent
