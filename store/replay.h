// Replay: re-evaluate a session's stored candidates with the current evaluator and report changed
// verdicts. The evaluator lives above store/, so re-evaluation is a callback the application
// registers (set_default_reevaluator, e.g. from app/main.cpp); without one, replay lists the
// recorded verdicts and says re-evaluation is not wired.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/records.h"

namespace kloop::store {

class Store;

// What a re-evaluation gets: the stored candidate bytes and what was recorded for them.
struct ReplayCandidate {
  std::int64_t session_id = 0, candidate_id = 0;
  int iteration_index = 0;
  std::string operator_name, contract_version;
  std::string source, manifest; // kernel.cu and manifest.json bytes ("" when absent)
  VerdictCode recorded_verdict = VerdictCode::kReject;
  std::vector<GateRecord> recorded_gates;
};

// What the current evaluator says now (gate names/statuses as evaluator kGate* / GateStatus).
struct ReplayOutcome {
  VerdictCode verdict = VerdictCode::kReject;
  std::vector<GateRecord> gates;
};

// Re-evaluates one candidate; may throw (the row then carries the error message).
using Reevaluate = std::function<ReplayOutcome(const ReplayCandidate&)>;

struct ReplayRow {
  std::int64_t candidate_id = 0;
  int iteration_index = 0;
  VerdictCode recorded = VerdictCode::kReject;
  std::optional<VerdictCode> now; // nullopt: not re-evaluated (no evaluator, or error)
  // A gate that had a result recorded and ran now with another one, or a verdict that differs for
  // a reason other than gates that could not run now (pending_device_validation) or gates that
  // ran now for the first time.
  bool changed = false;
  std::vector<std::string> changed_gates; // "correctness: pass -> fail"
  // Gates recorded with a result that did not run now (no GPU here): "sanitizer: recorded pass,
  // not re-run (<reason>)". They are not re-checked, which is not the same as changed. A gate
  // recorded not_run that could not finish now either (infra_error) is listed here too.
  std::vector<std::string> not_rerun_gates;
  // Gates recorded not_run (or not recorded) that ran now: "sanitizer: recorded not_run, now
  // pass". New evidence, not a changed result; one that now fails, times out or crashes is
  // evidence against the candidate and sets newly_failed.
  std::vector<std::string> newly_run_gates;
  bool newly_failed = false;
  std::string error; // why `now` is missing
};

// Iterates the session's candidates in order. `reevaluate` null: rows carry recorded verdicts
// only. A gate that did not run now (not_run) while its recorded status is another one (or none
// was recorded), or that could not run either time (not_run or infra_error, recorded and now;
// except for a candidate the record rejected, whose later gates were skipped by that rejection),
// lands in not_rerun_gates, not in changed_gates; one recorded not_run (or absent)
// that ran now lands in newly_run_gates. A verdict that is now pending_device_validation counts as
// changed only when a gate that did run changed; a recorded pending_device_validation that is now
// pass through newly run gates that all passed (or reject through one that newly failed) is not a
// change either. Throws
// StoreError for an unknown session or an unreadable blob (NoSuchSession for an unknown ID).
std::vector<ReplayRow> replay_session(Store& store, std::int64_t session_id,
                                      const Reevaluate* reevaluate);
nlohmann::json to_json(const std::vector<ReplayRow>& rows);

// Whether any row shows evidence against what was recorded: a changed result (changed) or a gate
// that ran for the first time and failed (newly_failed). `kloop replay` exits 1 then.
bool replay_found_regression(const std::vector<ReplayRow>& rows);

// Process-wide hook used by `kloop replay`; the lead registers the evaluator here.
void set_default_reevaluator(Reevaluate fn);
const Reevaluate* default_reevaluator(); // nullptr when none registered

} // namespace kloop::store
