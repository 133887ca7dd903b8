// The real DeviceGates (evaluator/pipeline.h): runs the correctness gate in a fresh
// kloop-gpu-worker per batch through the runner (evaluator/gpu_runner.h) on the public suite, with
// the device audit, and maps the worker's outcome onto the gate: pass / fail (first failing case
// and rule) / crashed (fault class and case) / timeout (case in flight) / not_run (no device) /
// infra_error. After correctness passes: the sanitizer gate (compute-sanitizer memcheck,
// racecheck, initcheck, synccheck around a `sanitize` worker, plus shared-memory poisoning), then
// the benchmark and roofline gates from one `benchmark` worker batch (A-B-B-A against the in-tree
// baseline, warm and cold L2), CUPTI stall sampling attached to the benchmark evidence, and the
// optional measured DRAM traffic of one `bench` batch under ncu in the roofline evidence
// (evaluator/ncu.h). Every process started is kept as a ToolCall (tool_calls()) with the GPU
// worker's device-memory report in its detail, for the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "evaluator/gpu_runner.h"
#include "evaluator/pipeline.h"
#include "kernels/operator.h"

namespace kloop::evaluator {

struct GpuGatesOptions {
  // The operator the baseline fields below belong to; a candidate of another operator is an
  // InfraError (nullptr: only with no baseline configured).
  const op::Operator* op = nullptr;
  std::uint64_t public_seed = 1; // the operator's public suite for this seed
  bool large_cases = false; // also run the "large" suite (when the operator has one) in a batch
  std::chrono::milliseconds deadline{30000};        // watchdog of the public batch
  std::chrono::milliseconds large_deadline{300000}; // watchdog of the large batch
  // Both batches are watched by progress (GpuRunOptions::deadline_cap): a case may take at most
  // its batch's deadline, the batch at most this many times it.
  int deadline_cap_factor = 4;
  // Cases each correctness batch prepares ahead on other host threads (worker option
  // prepare_ahead; ThroughputOptions::prepare_ahead). 0: each case when it runs.
  int prepare_ahead = 0;
  GpuRunOptions runner; // worker path, isolation (deadline is overridden)
  // Benchmark baseline: the in-tree baseline candidate, built once by the caller (empty cubin:
  // the worker times the trusted reference kernel as the baseline instead).
  std::string baseline_cubin, baseline_source, baseline_manifest;
  // Per shape and cache state: stop at a 1% relative half-width of the median or this cap.
  double bench_time_cap_s = 0.25;
  std::string bench_stop_rule = "noise"; // perf::BenchProtocol::stop_rule ("noise", "decision")
  // The copy ceiling once per session and device (issue 26): the first benchmark batch's
  // measurement is kept here and passed to the later batches (worker option copy_ceiling_given)
  // instead of timing 1 GiB copies again. Shared by the gates of one device; null: every batch
  // measures its own.
  struct CopyCeiling {
    std::mutex mu;
    nlohmann::json measured; // the worker's "copy_ceiling" object; null until measured
  };
  std::shared_ptr<CopyCeiling> copy_ceiling;
  std::chrono::milliseconds bench_deadline{240000};     // watchdog of the benchmark batch
  std::chrono::milliseconds sanitizer_deadline{120000}; // per compute-sanitizer tool
  // sanitizer::GateConfig's fail_fast and concurrent (issue 26, evaluator/throughput.h).
  bool sanitizer_fail_fast = false, sanitizer_concurrent = false;
  // The shared-memory scrub before each launch of the racecheck run (ThroughputOptions::
  // racecheck_scrub; false: only memcheck, initcheck and synccheck runs scrub).
  bool racecheck_scrub = false;
  bool pc_sampling = true; // CUPTI stall sampling (feedback data, not a gate)
  // When pc_sampling / measured_dram are off and this is set, a passing benchmark gate's
  // evidence "stalls" (resp. the roofline gate's "measured_dram") says {"status": "not_run",
  // "reason": ...} (issue 26: profiling only where feedback needs it).
  std::string profile_skip_reason, ncu_skip_reason;
  // Optional measured DRAM traffic (evaluator/ncu.h): one `bench` batch under ncu after a
  // passing benchmark, on the representative streaming shape; evidence only, never decides.
  bool measured_dram = true;
  std::chrono::milliseconds ncu_deadline{30000};
  std::string ncu_path = "-"; // "-": find_ncu($PATH); "": treat ncu as absent
};

class GpuWorkerGates : public DeviceGates {
public:
  explicit GpuWorkerGates(GpuGatesOptions options = {}) : options_(std::move(options)) {}
  // One GateResult each for correctness, sanitizer, benchmark, roofline (in that order).
  std::vector<GateResult> run(const BuiltCandidate& built) override;
  // The raw worker outcomes of the last run (correctness and benchmark batches).
  const std::vector<GpuRunResult>& last_runs() const { return runs_; }
  // Every process of the last run: worker batches (correctness, benchmark, pcsample), each
  // compute-sanitizer tool run, ncu; ToolCall::detail holds mode and device memory.
  std::vector<ToolCall> tool_calls() const override { return calls_; }

private:
  std::vector<GateResult> run_perf_gates(const BuiltCandidate& built);
  // Adds "measured_dram" (evaluator/ncu.h) to the roofline gate's evidence; never changes its
  // status.
  void attach_measured_dram(const BuiltCandidate& built, GateResult& roofline_gate);
  GpuGatesOptions options_;
  std::vector<GpuRunResult> runs_;
  std::vector<ToolCall> calls_;
  std::map<std::string, std::string> sanitizer_reports_;
};

// The sanitizer gate alone, exactly as GpuWorkerGates runs it after correctness passed: a
// `sanitize` worker request wrapped by compute-sanitizer once per tool (memcheck, racecheck,
// initcheck, synccheck, each with o.sanitizer_deadline) plus shared-memory poisoning, under
// `unshare -n` when o.runner.isolate_network and it works. Raw reports go to `reports` and every
// process started to `calls` (either may be null). Throws InfraError when the request folder
// cannot be written.
GateResult sanitizer_gate(const BuiltCandidate& built, const GpuGatesOptions& o,
                          std::map<std::string, std::string>* reports = nullptr,
                          std::vector<ToolCall>* calls = nullptr);

// The correctness GateResult of one worker outcome (exposed for unit tests).
GateResult correctness_gate_from(const GpuRunResult& run);

// Candidate format 2 (issue 25): the variants of `manifest_text` (parsed against `op`'s
// declaration; a format-1 manifest is one variant) that no case of the public batches `runs`
// launched, read from each worker result's path_counts.per_variant, as "variant 1 (scalar)". A
// variant only the holdout would reach is untested code, so the correctness gate fails on any.
// Empty when every variant served a case, or when the manifest does not parse.
std::vector<std::string> unlaunched_variants(const op::Operator& op, std::string_view manifest_text,
                                             const std::vector<GpuRunResult>& runs);

// CUPTI PC-sampling result (worker mode "pcsample") as the feedback layout
// {"histogram": {stall reason: samples}, "top_lines": [{"line","reason","samples"}], ...}.
nlohmann::json stalls_from_pcsample(const nlohmann::json& pcsample);

// The shape ncu profiles: the operator's largest bfloat16 shape of the benchmark sweep (bf16 65536
// x 4096 for weighted_rmsnorm/1), else its first "streaming" shape, else its first shape.
op::BenchShape measured_dram_shape(const op::Operator& op);

} // namespace kloop::evaluator
