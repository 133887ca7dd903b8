// The CPU emulation of the GPU worker's correctness batch (cpu_device.h): kloop's side.
#include "evaluator/device_gates.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/pipeline.h"
#include "tests/agent/cpu_device.h"

namespace kloop::testing {

evaluator::GateResult gate_from_worker_result(const WorkerFiles& files) {
  const evaluator::GpuRunResult run =
      evaluator::classify_gpu_run(evaluator::kGpuWorkerOk, 0, false, files.result, files.progress);
  return evaluator::correctness_gate_from(run);
}

std::vector<evaluator::GateResult> cpu_gates(const std::string& source, const std::string& manifest,
                                             const CpuKernel& kernel,
                                             const std::vector<rmsnorm::CaseSpec>& specs) {
  using evaluator::GateStatus;
  const evaluator::Candidate candidate{source, manifest, source.size(), manifest.size()};
  std::vector<evaluator::GateResult> gates;
  gates.push_back(evaluator::contract_gate(candidate, nullptr));
  if (gates.back().status != GateStatus::kPass) {
    for (std::string_view n :
         {evaluator::kGateBuild, evaluator::kGateStatic, evaluator::kGateCorrectness,
          evaluator::kGateSanitizer, evaluator::kGateBenchmark, evaluator::kGateRoofline})
      gates.push_back({std::string(n), GateStatus::kNotRun, "contract gate failed", {}});
    return gates;
  }
  gates.push_back({std::string(evaluator::kGateBuild), GateStatus::kNotRun, kNotBuiltHere, {}});
  gates.push_back({std::string(evaluator::kGateStatic), GateStatus::kNotRun, kNotBuiltHere, {}});
  gates.push_back(gate_from_worker_result(cpu_worker_result(kernel, specs)));
  const bool passed = gates.back().status == GateStatus::kPass;
  for (std::string_view n :
       {evaluator::kGateSanitizer, evaluator::kGateBenchmark, evaluator::kGateRoofline})
    gates.push_back({std::string(n), GateStatus::kNotRun,
                     passed ? "no GPU in this CPU test" : "correctness did not pass",
                     nlohmann::json::object()});
  return gates;
}

} // namespace kloop::testing
