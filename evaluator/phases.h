// Where a candidate's time goes (issue 26): the wall time of every phase of one evaluation, kept
// with the candidate in the store (telemetry kind "phases", store/phase_view.h reads it back) and
// shown by `kloop show`, the HTML report and `--json`. Host phases are timed where they run
// (pipeline.cpp, the scheduler); device phases come from the processes' ToolCalls (start time and
// wall time from run_subprocess, mode and device from their detail) and from the timings the GPU
// worker writes into its result.json ("timings": context creation, cubin load, and in benchmark
// mode every shape-state's sampling time, rounds and stop reason).
//
// Phase names (stored; never renamed):
//   host:   "contract", "build", "static", "host_wait" (waiting for a host slot)
//   device: "device_wait" (waiting for the device: detail {"work": "shared"|"timed", "for": mode}),
//           "correctness:public", "correctness:large", "sanitizer:version", "sanitizer:<tool>",
//           "benchmark", "pcsample", "ncu:version", "ncu", and the worker's other modes by name
//   nested (part of the phase above them, `nested` true): "worker_start" (CUDA context + cubin
//           load of one worker; detail {"mode", "context_ms", "load_ms"}), "benchmark:setup"
//           (buffers, inputs, warm-up of every shape), "benchmark:copy_ceiling",
//           "benchmark:<shape_class>:<state>" (detail {"states", "rounds", "max_rounds",
//           "stop": {reason: count}}).
// Nested phases carry their parent's start; the others start where they started (ms from the
// start of the candidate's evaluation), so overlapping work shows as overlapping intervals.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/subprocess.h"

namespace kloop::evaluator {

struct Phase {
  std::string name;
  double start_ms = 0; // from the start of the evaluation (steady clock)
  double wall_ms = 0;
  std::string device;  // the device it ran on (CUDA_VISIBLE_DEVICES value); "" on the host
  bool nested = false; // part of another phase's time (not added to totals)
  nlohmann::json detail = nlohmann::json::object();
  nlohmann::json to_json() const; // {"name","start_ms","wall_ms","device","nested","detail"}
  // Inverse of to_json; missing keys take the defaults, a non-object gives a nameless phase.
  static Phase from_json(const nlohmann::json& j);
};

// Milliseconds of the steady clock (the clock ToolCall::started_ms uses).
double steady_now_ms();

// The phases of one evaluation, appended from any thread.
class PhaseLog {
public:
  PhaseLog() : origin_ms_(steady_now_ms()) {}
  explicit PhaseLog(double origin_ms) : origin_ms_(origin_ms) {}
  double origin_ms() const { return origin_ms_; }
  double elapsed_ms() const { return steady_now_ms() - origin_ms_; }
  void add(Phase phase);
  // Adds a host phase `name` that started at steady time `started_ms` and ends now.
  void add_since(const std::string& name, double started_ms,
                 nlohmann::json detail = nlohmann::json::object());
  std::vector<Phase> phases() const;

private:
  double origin_ms_;
  mutable std::mutex mu_;
  std::vector<Phase> phases_;
};

// The device phases of `calls` (GPU worker batches, compute-sanitizer and ncu runs; other tools
// are skipped: their host phases are timed where they run), with starts relative to `origin_ms`
// (steady_now_ms() at the start of the evaluation). A call that waited for its device adds a
// "device_wait" phase before it.
std::vector<Phase> phases_from_tool_calls(const std::vector<ToolCall>& calls, double origin_ms);

// The telemetry record of one evaluation: {"wall_ms", "phases": [...]}.
nlohmann::json phases_telemetry(const std::vector<Phase>& phases, double wall_ms);

} // namespace kloop::evaluator
