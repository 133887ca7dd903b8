// The real mutant backend (see worker_backend.h).
#include "mutation/worker_backend.h"

#include <algorithm>

#include "evaluator/device_gates.h"
#include "evaluator/subprocess.h"

namespace kloop::mutation {
namespace {

using evaluator::GateResult;
using evaluator::GateStatus;

std::string worker_of(const WorkerBackendOptions& o) {
  return o.gpu_worker.empty() ? evaluator::worker_path("kloop-gpu-worker") : o.gpu_worker;
}

// Holds one sanitizer slot for its lifetime (none when `slots` is null).
class SlotHold {
public:
  explicit SlotHold(SanitizerSlots* slots) : slots_(slots) {
    if (slots_) slots_->acquire();
  }
  ~SlotHold() {
    if (slots_) slots_->release();
  }
  SlotHold(const SlotHold&) = delete;
  SlotHold& operator=(const SlotHold&) = delete;

private:
  SanitizerSlots* slots_;
};

GateResult skipped(std::string_view name, const std::string& why) {
  return GateResult{std::string(name), GateStatus::kNotRun,
                    std::string(kSkippedPrefix) + ": " + why, nlohmann::json::object()};
}

} // namespace

std::vector<GateResult> CorrectnessSanitizerGates::run(const evaluator::BuiltCandidate& built) {
  evaluator::GpuRunRequest req;
  req.mode = "correctness";
  req.operator_id = built.op.contract_id();
  req.cubin = built.cubin;
  req.source = built.candidate.source;
  req.manifest = nlohmann::json::parse(built.candidate.manifest_text, nullptr, false);
  req.cases = {{"suite", "public"}, {"seed", options_.public_seed}};
  req.options = {{"stop_at_first_failure", true}};
  evaluator::GpuRunOptions ro;
  ro.deadline = options_.worker_deadline;
  ro.worker = options_.gpu_worker;
  std::vector<GateResult> out{evaluator::correctness_gate_from(evaluator::run_gpu_worker(req, ro))};
  if (out[0].status != GateStatus::kPass) {
    for (std::string_view name :
         {evaluator::kGateSanitizer, evaluator::kGateBenchmark, evaluator::kGateRoofline})
      out.push_back(GateResult{std::string(name), GateStatus::kNotRun, "correctness did not pass",
                               nlohmann::json::object()});
    return out;
  }
  evaluator::GpuGatesOptions go; // the gate itself is GpuWorkerGates' (evaluator/device_gates.h)
  go.runner.worker = worker_of(options_);
  go.sanitizer_deadline = options_.sanitizer_deadline;
  {
    SlotHold hold(slots_.get()); // released on every exit, exceptions included
    out.push_back(evaluator::sanitizer_gate(built, go));
  }
  const std::string why = "timing is not part of the mutation analysis (--with-benchmark runs it)";
  out.push_back(skipped(evaluator::kGateBenchmark, why));
  out.push_back(skipped(evaluator::kGateRoofline, why));
  return out;
}

WorkerBackend::WorkerBackend(WorkerBackendOptions options)
    : options_(std::move(options)), sanitizer_slots_(std::make_shared<SanitizerSlots>(
                                        std::clamp(options_.max_concurrent_sanitizers, 1, 64))) {
  evaluator::GpuRunRequest probe;
  probe.mode = "probe";
  probe.cases = nlohmann::json::array();
  evaluator::GpuRunOptions po;
  po.deadline = std::chrono::milliseconds(20000);
  po.worker = options_.gpu_worker;
  evaluator::GpuRunResult r;
  try {
    r = evaluator::run_gpu_worker(probe, po);
  } catch (const evaluator::InfraError& e) {
    r.status = GateStatus::kInfraError;
    r.reason = e.what();
  }
  has_device_ = r.status == GateStatus::kPass;
  if (has_device_ && r.result.is_object() && r.result.contains("device"))
    device_name_ = r.result["device"].value("name", std::string("unknown device"));
  if (!has_device_) no_device_reason_ = r.reason.empty() ? "probe failed" : r.reason;
}

evaluator::Evaluation WorkerBackend::evaluate(const evaluator::Candidate& candidate) {
  evaluator::EvaluateOptions eo;
  eo.op = options_.op;
  eo.build = options_.build;
  if (!has_device_) {
    evaluator::NoDeviceGates none("no usable CUDA device: " + no_device_reason_);
    return evaluator::evaluate_candidate(candidate, eo, none);
  }
  if (options_.with_benchmark) { // GpuWorkerGates keeps per-run state: one instance per call
    evaluator::GpuGatesOptions go;
    go.public_seed = options_.public_seed;
    go.deadline = options_.worker_deadline;
    go.sanitizer_deadline = options_.sanitizer_deadline;
    go.runner.worker = options_.gpu_worker;
    go.bench_time_cap_s = 0.02;
    go.pc_sampling = false;
    evaluator::GpuWorkerGates gates(go);
    return evaluator::evaluate_candidate(candidate, eo, gates);
  }
  CorrectnessSanitizerGates gates(options_, sanitizer_slots_);
  return evaluator::evaluate_candidate(candidate, eo, gates);
}

evaluator::GpuRunResult WorkerBackend::run_cases(const evaluator::Candidate& candidate,
                                                 const std::string& cubin,
                                                 const std::vector<nlohmann::json>& cases) {
  evaluator::GpuRunRequest req;
  req.mode = "correctness";
  req.cubin = cubin;
  req.source = candidate.source;
  req.manifest = nlohmann::json::parse(candidate.manifest_text, nullptr, false);
  req.operator_id = options_.op->contract_id();
  req.cases = cases;
  req.options = {{"stop_at_first_failure", false}};
  evaluator::GpuRunOptions ro;
  ro.deadline = options_.worker_deadline;
  ro.worker = options_.gpu_worker;
  return evaluator::run_gpu_worker(req, ro);
}

} // namespace kloop::mutation
