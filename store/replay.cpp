#include "store/replay.h"

#include <fmt/core.h>

#include "store/store.h"

namespace kloop::store {
namespace {

Reevaluate& hook() {
  static Reevaluate fn;
  return fn;
}

} // namespace

void set_default_reevaluator(Reevaluate fn) {
  hook() = std::move(fn);
}
const Reevaluate* default_reevaluator() {
  return hook() ? &hook() : nullptr;
}

std::vector<ReplayRow> replay_session(Store& store, std::int64_t session_id,
                                      const Reevaluate* reevaluate) {
  const SessionDetail d = store.load_session(session_id);
  std::vector<ReplayRow> rows;
  for (const auto& it : d.iterations) {
    for (const auto& c : it.candidates) {
      ReplayRow row{c.candidate.id, it.iteration.index, c.candidate.verdict};
      if (!reevaluate) {
        row.error = "re-evaluation not wired: this kloop has no evaluator hook registered";
        rows.push_back(std::move(row));
        continue;
      }
      ReplayCandidate in{session_id,
                         c.candidate.id,
                         it.iteration.index,
                         d.session.operator_name,
                         d.session.contract_version,
                         "",
                         "",
                         c.candidate.verdict,
                         c.gates};
      if (!c.candidate.source_sha256.empty()) in.source = store.blob(c.candidate.source_sha256);
      if (!c.candidate.manifest_sha256.empty())
        in.manifest = store.blob(c.candidate.manifest_sha256);
      try {
        const ReplayOutcome out = (*reevaluate)(in);
        row.now = out.verdict;
        const auto why = [](const GateRecord& g) {
          return g.reason.empty() ? std::string() : " (" + g.reason + ")";
        };
        for (const auto& g : out.gates) {
          const GateRecord* old = c.gate(g.name);
          const std::string before = old ? std::string(name(old->status)) : "absent";
          // A gate that does not run now (not_run, infra_error) re-checked nothing: it is listed as
          // not re-run (exit 3 in `kloop replay`), never as a changed result, whatever it recorded.
          // Without a recorded result and on a candidate rejected (recorded or now), it was
          // skipped because of that rejection: nothing is lost, nothing is listed.
          const auto unrun = [](GateCode s) {
            return s == GateCode::kNotRun || s == GateCode::kInfraError;
          };
          const bool had_result = old && !unrun(old->status);
          if (unrun(g.status)) {
            const bool rejected =
                c.candidate.verdict == VerdictCode::kReject || out.verdict == VerdictCode::kReject;
            if (!had_result && rejected) continue;
            row.not_rerun_gates.push_back(
                fmt::format("{}: recorded {}, not re-run{}{}", g.name, before,
                            g.status == GateCode::kInfraError ? " (infra_error)" : "", why(g)));
            continue;
          }
          if (before == name(g.status)) continue;
          if (!had_result) { // no result recorded: new evidence, not a changed result
            const bool failed = g.status != GateCode::kPass;
            // Evidence against the record only where the record did not already reject.
            row.newly_failed |= failed && c.candidate.verdict != VerdictCode::kReject;
            row.newly_run_gates.push_back(fmt::format("{}: recorded {}, now {}{}", g.name, before,
                                                      name(g.status),
                                                      failed ? why(g) : std::string()));
          } else {
            row.changed_gates.push_back(
                fmt::format("{}: {} -> {}", g.name, before, name(g.status)));
          }
        }
        // A recorded pending verdict settled by the newly run gates alone is not a change.
        const bool settled_by_new_gates =
            c.candidate.verdict == VerdictCode::kPendingDeviceValidation &&
            !row.newly_run_gates.empty() &&
            (row.newly_failed ? out.verdict == VerdictCode::kReject
                              : out.verdict == VerdictCode::kPass);
        row.changed =
            !row.changed_gates.empty() ||
            (out.verdict != c.candidate.verdict &&
             out.verdict != VerdictCode::kPendingDeviceValidation && !settled_by_new_gates);
      } catch (const std::exception& e) {
        row.error = e.what();
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

nlohmann::json to_json(const std::vector<ReplayRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows)
    out.push_back({{"candidate_id", r.candidate_id},
                   {"iteration", r.iteration_index + 1}, // 1-based, as `kloop show` prints it
                   {"recorded", name(r.recorded)},
                   {"now", r.now ? nlohmann::json(name(*r.now)) : nlohmann::json(nullptr)},
                   {"changed", r.changed},
                   {"changed_gates", r.changed_gates},
                   {"not_rerun_gates", r.not_rerun_gates},
                   {"newly_run_gates", r.newly_run_gates},
                   {"newly_failed", r.newly_failed},
                   {"error", r.error}});
  return out;
}

bool replay_found_regression(const std::vector<ReplayRow>& rows) {
  for (const auto& r : rows)
    if (r.changed || r.newly_failed) return true;
  return false;
}

} // namespace kloop::store
