// Fuzz target `worker_result`: a GPU worker's result.json (and progress.json) as kloop reads them
// (evaluator/gpu_runner.h: classify_gpu_run, device_memory_of) and turns them into gates
// (correctness_gate_from, benchmark_gate, roofline_gate, the sanitizer's poison check, the PC
// sampling stalls). The worker is a separate process running the candidate: its files are
// untrusted. perf_gates.h documents InfraError for a malformed "benchmark" member. Input:
// RESULT_JSON \0 PROGRESS_JSON \0 one byte choosing the exit status.
#include <nlohmann/json.hpp>

#include "evaluator/device_gates.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/perf_gates.h"
#include "evaluator/sanitizer.h"
#include "fuzz/fuzz_target.h"
#include "kernels/rmsnorm/operator.h"

KLOOP_FUZZ_TARGET(worker_result) {
  using nlohmann::json;
  const auto parts = kloop::fuzz::split_input(kloop::fuzz::text_of(data, size), 3);
  const json result = json::parse(parts[0], nullptr, /*allow_exceptions=*/false);
  const json progress = json::parse(parts[1], nullptr, /*allow_exceptions=*/false);
  const json r = result.is_discarded() ? json() : result;
  const json p = progress.is_discarded() ? json() : progress;
  static constexpr int kExits[] = {0, 2, 3, 4, 5, 1, -1, 139};
  const int exit_code =
      kExits[(parts[2].empty() ? 0 : static_cast<unsigned char>(parts[2][0])) % 8];
  const bool timed_out = !parts[2].empty() && (parts[2][0] & 0x40);
  const auto run =
      kloop::evaluator::classify_gpu_run(exit_code, exit_code == 139 ? 11 : 0, timed_out, r, p);
  (void)run.to_json().dump(-1, ' ', false, json::error_handler_t::replace);
  (void)kloop::evaluator::device_memory_of(r);
  const auto correctness = kloop::evaluator::correctness_gate_from(run);
  (void)correctness.evidence.dump(-1, ' ', false, json::error_handler_t::replace);
  // As GpuWorkerGates reads a benchmark batch: the gates from the result's "benchmark" member; a
  // malformed member is an InfraError naming the key (perf_gates.h), recorded as infra_error.
  const json bench = r.is_object() && r.contains("benchmark") ? r["benchmark"] : r;
  try {
    (void)kloop::evaluator::perf::benchmark_gate(kloop::rmsnorm::declaration(), bench)
        .evidence.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const kloop::evaluator::InfraError&) {
  }
  try {
    (void)kloop::evaluator::perf::roofline_gate(kloop::rmsnorm::declaration(), bench)
        .evidence.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const kloop::evaluator::InfraError&) {
  }
  (void)kloop::evaluator::sanitizer::judge_poison(r);
  (void)kloop::evaluator::stalls_from_pcsample(r);
  return 0;
}
