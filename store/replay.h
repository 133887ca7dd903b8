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
  // A gate that ran now with a different status than recorded, or a verdict that differs for a
  // reason other than gates that could not run now (pending_device_validation).
  bool changed = false;
  std::vector<std::string> changed_gates; // "correctness: pass -> fail"
  // Gates recorded with a result that did not run now (no GPU here): "sanitizer: recorded pass,
  // not re-run (<reason>)". They are not re-checked, which is not the same as changed.
  std::vector<std::string> not_rerun_gates;
  std::string error; // why `now` is missing
};

// Iterates the session's candidates in order. `reevaluate` null: rows carry recorded verdicts
// only. A gate that did not run now (not_run) while its recorded status is another one (or none
// was recorded) lands in not_rerun_gates, not in changed_gates; a verdict that is now
// pending_device_validation counts as changed only when a gate that did run changed. Throws
// StoreError for an unknown session or an unreadable blob (NoSuchSession for an unknown ID).
std::vector<ReplayRow> replay_session(Store& store, std::int64_t session_id,
                                      const Reevaluate* reevaluate);
nlohmann::json to_json(const std::vector<ReplayRow>& rows);

// Process-wide hook used by `kloop replay`; the lead registers the evaluator here.
void set_default_reevaluator(Reevaluate fn);
const Reevaluate* default_reevaluator(); // nullptr when none registered

} // namespace kloop::store
