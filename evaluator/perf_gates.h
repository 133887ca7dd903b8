// The benchmark and roofline gates (DESIGN.md gates 5 and 6) computed from the GPU worker's
// "benchmark" result, plus the request options the worker reads. The worker measures (CUDA events
// around the kernel and around the whole trusted-wrapper call, cold and warm, A-B-B-A interleaving
// of candidate, in-tree baseline, trusted reference and an A/A partner (the baseline's cubin
// loaded a second time as its own library), noise-based stopping,
// sampled output checks, NVML telemetry, the copy ceiling); everything that decides is here, on
// the CPU, unit-tested on canned worker results:
//   benchmark: fails when a sampled timed output differed from the reference or a time was not
//     positive; otherwise passes with per-shape paired ratios, bootstrap intervals, the A/A noise
//     floor and a speed decision ("faster" only when the interval clears the floor).
//   roofline: logical bytes, effective TB/s and fraction of the copy ceiling per shape and per
//     shape class; fails when a time is below the physical floor set by the copy ceiling.
// The JSON layouts are documented in /work/notes/h7-api.md and in bench_request() below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"
#include "kernels/operator.h"

namespace kloop::evaluator::perf {

// Measurement protocol knobs (part of the benchmark request; hashed into the evidence).
struct BenchProtocol {
  double target_rel_half_width = 0.01; // stop when the median's 95% CI half-width < 1%
  int min_rounds = 10;                 // A-B-B-A rounds before the noise test applies
  int max_rounds = 400;
  double time_cap_s = 10.0;       // per shape and cache state
  int output_checks = 3;          // timed iterations whose y is compared with the reference
  int telemetry_every_rounds = 8; // one NVML reading per batch of rounds
  std::uint64_t seed = 1;         // input values and the choice of checked iterations
  bool warm = true;
  bool cold = true;
  // "noise" (both medians known to target_rel_half_width, or a cap), or "decision": also stop a
  // state, after whole cycles of at least two cycles' rounds, once bench::decision_settled says
  // its speed decision is settled (issue 26; evaluator/throughput.h bench_stop). to_json names it
  // only when it is not "noise", so the noise protocol hashes as before.
  std::string stop_rule = "noise";
  nlohmann::json to_json() const;
};

// The "benchmark" member of a worker request: {"protocol":{...},"shapes":[BenchShape JSON plus
// shape_class ({rows,h,dtype,shape_class} for weighted_rmsnorm/1)],"copy_ceiling_bytes":
// 1073741824,"raw_samples_path":PATH}. The caller adds the mode, operator, candidate and baseline
// fields of the worker's request format.
nlohmann::json bench_request(const op::Declaration& decl, const std::vector<op::BenchShape>& shapes,
                             const BenchProtocol& protocol, const std::string& raw_samples_path);

// Benchmark gate from the worker result's "benchmark" member (layout in h7-api.md). A missing or
// malformed member (a missing key, a wrong JSON type, a shape of no rows) is an InfraError naming
// it (the worker is ours), never another exception.
GateResult benchmark_gate(const op::Declaration& decl, const nlohmann::json& bench_result);

// Roofline gate from the same member: needs "copy_ceiling" and the cold (else warm) candidate
// kernel samples of each shape. `margin`: declared plausibility margin (roofline.h). Malformed
// input: InfraError, as for benchmark_gate.
GateResult roofline_gate(const op::Declaration& decl, const nlohmann::json& bench_result,
                         double margin = 0.05);

// Both gates as not_run with `reason` (no device, worker missing, earlier gate failed).
std::vector<GateResult> not_run(const std::string& reason);

} // namespace kloop::evaluator::perf
