// Wires the current evaluator into `kloop replay` (store/replay.h): each stored candidate is
// re-evaluated through the same public gates as in `kloop optimize` (sandboxed build, static
// inspection, GPU worker device gates), so a hardened evaluator's changed verdicts show up.
#include <memory>

#include "agent/components.h"
#include "agent/loop_record.h"
#include "agent/reply_parser.h"
#include "app/commands.h"
#include "evaluator/pipeline.h"
#include "kernels/registry.h"
#include "store/replay.h"

namespace kloop::app {
namespace {

class SilentProgress : public agent::ProgressSink {
public:
  void line(const std::string&) override {}
};

store::ReplayOutcome reevaluate(const store::ReplayCandidate& c) {
  static SilentProgress progress;
  static std::unique_ptr<agent::DeviceContext> device; // one probe per process
  if (!device) device = std::make_unique<agent::DeviceContext>(agent::DeviceOptions{}, progress);
  store::ReplayOutcome out;
  if (c.source.empty() || c.manifest.empty()) { // the reply had no candidate: format failure
    out.verdict = store::VerdictCode::kReject;
    for (const auto& g : c.recorded_gates)
      if (g.name == "format") out.gates.push_back(g);
    return out;
  }
  evaluator::Candidate cand;
  cand.source = c.source;
  cand.manifest_text = c.manifest;
  cand.source_file_bytes = c.source.size();
  cand.manifest_file_bytes = c.manifest.size();
  // The operator the stored manifest's contract names. A manifest that names none fails the
  // contract gate (as when it was recorded), so no device gate and no baseline is needed for it.
  const op::Operator* op = op::find_operator(op::manifest_contract(c.manifest));
  evaluator::NoDeviceGates contract_only;
  auto evaluation =
      op ? device->evaluator(*op).evaluate(cand)
         : evaluator::evaluate_candidate(cand, evaluator::EvaluateOptions{}, contract_only);
  store::GateRecord format;
  format.name = "format";
  format.status = store::GateCode::kPass;
  out.gates.push_back(format);
  int ordinal = 1;
  for (const auto& g : evaluation.report.gates)
    out.gates.push_back(agent::gate_record(g, ordinal++));
  out.verdict = static_cast<store::VerdictCode>(evaluation.report.verdict);
  return out;
}

} // namespace

void register_replay_evaluator() {
  store::set_default_reevaluator(reevaluate);
}

} // namespace kloop::app
