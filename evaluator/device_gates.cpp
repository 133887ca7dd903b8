// Correctness on the device through the GPU worker (see device_gates.h).
#include "evaluator/device_gates.h"

namespace kloop::evaluator {

GateResult correctness_gate_from(const GpuRunResult& run) {
  GateResult g;
  g.name = std::string(kGateCorrectness);
  g.status = run.status;
  g.reason = run.status == GateStatus::kPass ? std::string() : run.reason;
  nlohmann::json ev{{"worker", run.to_json()}};
  if (run.result.is_object()) {
    for (const char* key : {"device", "path_counts", "evidence", "fault", "kernels"})
      if (run.result.contains(key)) ev[key] = run.result.at(key);
    if (run.result.contains("suite")) {
      const nlohmann::json& s = run.result.at("suite");
      ev["suite"] = {{"pass", s.value("pass", false)},
                     {"passed", s.value("passed", 0)},
                     {"failed", s.value("failed", 0)},
                     {"first_failure", s.value("first_failure", nlohmann::json())}};
    }
  }
  g.evidence = std::move(ev);
  return g;
}

std::vector<GateResult> GpuWorkerGates::run(const BuiltCandidate& built) {
  runs_.clear();
  GpuRunRequest req;
  req.mode = "correctness";
  req.cubin = built.cubin;
  req.source = built.candidate.source;
  req.manifest = nlohmann::json::parse(built.candidate.manifest_text, nullptr, false);
  req.cases = {{"suite", "public"}, {"seed", options_.public_seed}};
  req.options = {{"stop_at_first_failure", true}};
  GpuRunOptions ro = options_.runner;
  ro.deadline = options_.deadline;
  runs_.push_back(run_gpu_worker(req, ro));
  if (options_.large_cases && runs_.back().status == GateStatus::kPass) {
    req.cases = {{"suite", "large"}, {"seed", options_.public_seed}};
    req.options["concurrency"] = false;
    ro.deadline = options_.large_deadline;
    runs_.push_back(run_gpu_worker(req, ro));
  }
  // The gate takes the first batch that did not pass (or the last one).
  const GpuRunResult* decisive = &runs_.back();
  for (const GpuRunResult& r : runs_)
    if (r.status != GateStatus::kPass) {
      decisive = &r;
      break;
    }
  GateResult correctness = correctness_gate_from(*decisive);
  if (runs_.size() > 1) correctness.evidence["batches"] = runs_.size();
  std::vector<GateResult> out{correctness};
  const std::string why = correctness.status == GateStatus::kPass
                              ? "not wired into GpuWorkerGates yet"
                              : "correctness did not pass";
  for (std::string_view name : {kGateSanitizer, kGateBenchmark, kGateRoofline})
    out.push_back(
        GateResult{std::string(name), GateStatus::kNotRun, why, nlohmann::json::object()});
  return out;
}

} // namespace kloop::evaluator
