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
        for (const auto& g : out.gates) {
          const GateRecord* old = c.gate(g.name);
          const std::string before = old ? std::string(name(old->status)) : "absent";
          if (before == name(g.status)) continue;
          if (g.status == GateCode::kNotRun) { // nothing checked now: not a change
            row.not_rerun_gates.push_back(
                fmt::format("{}: recorded {}, not re-run{}", g.name, before,
                            g.reason.empty() ? std::string() : " (" + g.reason + ")"));
          } else {
            row.changed_gates.push_back(
                fmt::format("{}: {} -> {}", g.name, before, name(g.status)));
          }
        }
        row.changed =
            !row.changed_gates.empty() || (out.verdict != c.candidate.verdict &&
                                           out.verdict != VerdictCode::kPendingDeviceValidation);
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
                   {"iteration", r.iteration_index},
                   {"recorded", name(r.recorded)},
                   {"now", r.now ? nlohmann::json(name(*r.now)) : nlohmann::json(nullptr)},
                   {"changed", r.changed},
                   {"changed_gates", r.changed_gates},
                   {"not_rerun_gates", r.not_rerun_gates},
                   {"error", r.error}});
  return out;
}

} // namespace kloop::store
