// Checker-coverage report -> store rows (see store_report.h).
#include "mutation/store_report.h"

#include <stdexcept>

namespace kloop::mutation {

std::int64_t store_report(store::Store& st, const CoverageReport& report,
                          const StoreContext& context) {
  if (!context.op) throw std::invalid_argument("store_report: no operator given");
  const op::Operator& op = *context.op;
  store::SessionRecord s;
  s.operator_name = std::string(op.name());
  s.contract_version = std::to_string(op.declaration().version);
  s.contract_sha256 = op.contract_sha256();
  s.provider = std::string(store::kCheckerCoverageProvider);
  s.model = "in-tree baseline mutants";
  s.budget = static_cast<int>(report.outcomes.size());
  s.seed = static_cast<std::int64_t>(context.seed);
  s.kloop_version = context.kloop_version;
  s.kloop_commit = context.kloop_commit;
  s.device_name = report.device;
  s.params = {{"selection", report.selection}};
  const std::int64_t id = st.create_session(s);

  nlohmann::json full = report.to_json();
  nlohmann::json summary = full;
  summary.erase("mutants"); // the full list lives in the blob
  auto step = st.begin_step();
  store::IterationRecord it;
  it.session_id = id;
  it.index = 0;
  it.wall_ms = report.wall_ms;
  it.notes = {{"checker_coverage", summary}};
  step.add_iteration(it);
  store::ArtifactRecord a;
  a.iteration_id = it.id;
  a.kind = store::ArtifactKind::kOther;
  a.name = "checker_coverage.json";
  step.add_artifact(a, full.dump(2));
  step.commit();

  store::VerdictCode verdict = store::VerdictCode::kPass;
  if (!report.gaps().empty())
    verdict = store::VerdictCode::kReject;
  else if (!report.complete())
    verdict = store::VerdictCode::kPendingDeviceValidation;
  st.finish_session(id, store::SessionStatus::kCompleted, verdict);
  return id;
}

} // namespace kloop::mutation
