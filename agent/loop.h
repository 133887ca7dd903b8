// The refinement loop (`kloop optimize`), seed "The refinement feedback loop": open a session, seal
// the holdout suite and store its commitment before the first prompt; for each iteration render
// the prompt (contract, then feedback from the previous public report), ask the provider, parse,
// evaluate through the public gates and record everything in one store step; then freeze the best
// candidate that passed every public gate, run it once against the holdout in a fresh GPU worker,
// retire the suite, decide promotion and write the receipt. Every boundary is an interface
// (Provider, CandidateEvaluator, HoldoutRunner, store::Store, ProgressSink), so tests drive the
// loop with fakes on a CPU-only machine.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/provider.h"
#include "evaluator/candidate.h"
#include "evaluator/pipeline.h"
#include "holdout/holdout.h"
#include "kernels/manifest.h"
#include "store/store.h"

namespace kloop::agent {

// Evaluates one candidate through the public gates. The real implementation wraps
// evaluator::evaluate_candidate with the GPU worker's device gates.
class CandidateEvaluator {
public:
  virtual ~CandidateEvaluator() = default;
  virtual evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) = 0;
  // The candidates of one iteration, evaluations in their order; nullopt for a candidate that was
  // not started because `cancel` (may be null) was set. Default: evaluate() one after another.
  // The scheduler (agent/scheduler.h) runs them in parallel across devices.
  virtual std::vector<std::optional<evaluator::Evaluation>>
  evaluate_batch(const std::vector<evaluator::Candidate>& candidates,
                 const std::atomic<bool>* cancel);
  // Whether the next batch's reports feed a prompt (CUPTI stall sampling is then wanted; the
  // loop says no in the last iteration). Default: ignored.
  virtual void want_profile(bool wanted) { (void)wanted; }
};

// Runs the frozen candidate once against the unsealed holdout suite (a fresh GPU worker). Returns
// status not_run with the reason where no device is available.
class HoldoutRunner {
public:
  virtual ~HoldoutRunner() = default;
  virtual holdout::HoldoutResult run(const op::Operator& op, const evaluator::Candidate& candidate,
                                     const std::string& cubin,
                                     const std::vector<nlohmann::json>& suite) = 0;
};

// Progress on the terminal: one line per iteration and gate, then a summary. `--json` replaces it
// with a silent sink and prints LoopResult::to_json() at the end.
class ProgressSink {
public:
  virtual ~ProgressSink() = default;
  virtual void line(const std::string& text) = 0;
};

struct LoopOptions {
  const op::Operator* op = nullptr; // the operator (kernels/registry.h); required
  int budget = 5;                   // iterations (1..100)
  // Candidates per iteration (`--candidates-per-iteration`, 1..16): K requests at once (an LLM
  // provider sends them in parallel, the offline generator proposes K variants), evaluated in
  // parallel across devices, recorded in order; the next prompt's feedback covers all K.
  int candidates_per_iteration = 1;
  int max_reply_tokens = 8192; // token limit of each reply, sent to the provider
  std::uint64_t seed = 1;      // public seed: provider sampling, offline policy
  std::string provider_name;   // recorded in the session
  std::string model;           // recorded and sent to the provider
  nlohmann::json params = nlohmann::json::object(); // recorded for --resume (base_url, ...)
  std::optional<std::int64_t> resume_session;       // continue this session
  std::filesystem::path holdout_dir;                // sealed suites (outside every sandbox)
  holdout::SuiteOptions holdout_options;
  std::optional<std::string> signing_key_file; // sign the receipt when set
  std::filesystem::path export_dir;            // promoted artifacts go to export_dir/ID
  std::string kloop_version, kloop_commit;
  std::string device_name, device_arch = "sm_90", driver_version, toolkit_version = "13.0";
  std::string device_uuid; // "GPU-..." (nvidia-smi form); "" without a device
  // What set the cancel flag, for the interrupted session's message ("Ctrl-C", "SIGTERM", "the
  // output pipe closed"); unset: "Ctrl-C".
  std::function<std::string()> cancel_cause;
};

// One candidate of an iteration (one per iteration with K = 1).
struct IterationSummary {
  int index = 0;       // 0-based (the store's); to_json() and the progress lines print index + 1
  int candidate = 0;   // 0-based position within the iteration
  std::string verdict; // verdict_name, or "provider_error"
  double wall_s = 0;   // the whole iteration (generation, every candidate's evaluation, record)
  double evaluation_s = 0; // this candidate's evaluation (0 when none ran)
  // Where the evaluation's time went: phase group -> seconds (store/phase_view.h groups).
  nlohmann::json phases = nlohmann::json::object();
  std::vector<std::pair<std::string, std::string>> gates; // name -> status
  std::optional<double> speedup;
  std::string note; // provider error, format failure, ...
};

struct LoopResult {
  std::int64_t session_id = 0;
  // "promoted", "rejected", "pending_device_validation", "interrupted", "failed"
  std::string decision;
  std::string reason;
  std::vector<IterationSummary> iterations;
  std::optional<int> frozen_iteration; // 0-based; to_json() prints it 1-based
  std::optional<holdout::HoldoutResult> holdout;
  std::string holdout_commitment;
  std::string receipt_file; // written receipt JSON ("" when none)
  std::string export_dir;   // promoted artifact folder ("" when none)
  int exit_code = 3;        // 0 promoted, 1 rejected, 3 could not finish
  // The `--json` document; iteration numbers in it ("iteration", "frozen_iteration") are 1-based,
  // as `kloop optimize` and `kloop show` print them.
  nlohmann::json to_json() const;
};

// Runs the loop. Cancellation (`cancel` set, e.g. by SIGINT or SIGTERM) ends the session
// `interrupted` after the current step; what was committed stays. A sealed holdout the store's
// commitment does not vouch for (or one already unsealed without a recorded result) ends the
// session `failed`, exit 3 (loop_record.h, end_session_failed). Any other exception once the
// session is running (a store failure as store::StoreError, an infrastructure failure) ends the
// session `failed`, its message recorded in params "failure", and propagates; the session stays
// resumable.
LoopResult run_loop(const LoopOptions& options, Provider& provider, CandidateEvaluator& evaluator,
                    HoldoutRunner& holdout_runner, store::Store& store, ProgressSink& progress,
                    const std::atomic<bool>& cancel);

// Rank of a manifest's dispatch domain for tie-breaks: lower is simpler (fewer restrictions).
int dispatch_restriction_rank(const op::Declaration& decl, const op::Manifest& manifest);

// What the freeze step (step 3) orders passing candidates by.
struct FreezeKey {
  bool clears_noise_floor = false; // the public benchmark already meets the promotion rule
  double speedup = 0;              // geometric-mean paired speed-up over the in-tree baseline
  int restriction_rank = 0;        // dispatch_restriction_rank of the manifest
  int iteration = 0;               // 0-based
};
// True when `a` is frozen in preference to `b`: first a candidate whose public benchmark clears the
// A/A noise floor (faster somewhere, slower nowhere: the promotion rule, decidable before the
// holdout), so the one holdout run is not spent on a candidate the public evidence already rules
// out; then the higher speed-up, the simpler dispatch domain, the earlier iteration.
bool freezes_before(const FreezeKey& a, const FreezeKey& b);

} // namespace kloop::agent
