// The sanitizer gate (DESIGN.md gate 4; seed, "Compute Sanitizer gating"): runs the GPU worker in
// its "sanitize" mode under compute-sanitizer once per tool (memcheck, racecheck, initcheck,
// synccheck), each with --error-exitcode and its own deadline, on representative small cases with
// exact-size allocations; parses every report into hazard counts and kinds with the kernel source
// line when -lineinfo allows; keeps the tool version, exact command, exit code and SHA-256 of the
// raw report (the raw report goes to the store). Unexplained reports fail the gate; a missing tool
// is not_run with the reason. Uninitialised shared memory, which this compute-sanitizer cannot see
// (no --initcheck-address-space on CUDA 13.0, DEVICE.md), is covered by the worker's shared-memory
// poisoning (two patterns, identical and correct results), whose result is judged here too.
// The parser is pure text processing, unit-tested on canned reports.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"
#include "evaluator/subprocess.h"

namespace kloop::evaluator::sanitizer {

// The exit code compute-sanitizer is told to use when it found errors. Distinct from the worker's
// own exit codes so that "the tool found hazards" is never confused with "the worker failed".
inline constexpr int kErrorExitCode = 86;

inline constexpr std::string_view kTools[] = {"memcheck", "racecheck", "initcheck", "synccheck"};

// One hazard in a report.
struct Hazard {
  std::string tool; // "memcheck", ...
  std::string kind; // e.g. "invalid_global_read", "race_write_read", "uninitialized_global_read",
                    // "barrier_divergent_block", "api_error", "misaligned_address", "leak"
  std::string message;  // the report's headline, '=' prefix stripped
  std::string function; // kernel symbol when printed ("rms_bf16"), else empty
  std::string file;     // source file name of the first located frame, else empty
  int line = 0;         // source line (needs -lineinfo), 0 when unknown
  std::string file2;    // racecheck: the second access's file/line
  int line2 = 0;
  int access_size = 0; // bytes, when the headline says "of size N bytes"
  nlohmann::json to_json() const;
};

// One parsed report.
struct Report {
  std::vector<Hazard> hazards;
  std::optional<int> error_summary;     // "ERROR SUMMARY: N errors"
  std::vector<std::string> tool_errors; // sanitizer's own errors (not hazards): "Error: ..." lines
                                        // that are not races, "Internal Sanitizer Error", ...
  nlohmann::json kind_counts() const;   // {"invalid_global_read": 2, ...}
};

// Parses compute-sanitizer output (the --log-file text, or stdout+stderr) of `tool`. Lines without
// the "=========" prefix are ignored (the worker's own output). Never throws on odd text.
Report parse_report(std::string_view tool, std::string_view text);

// "Version 2025.3.1.0 (build ...)" line of `compute-sanitizer --version` -> "2025.3.1.0"; empty
// when absent.
std::string parse_version(std::string_view version_output);

// Exact argv of one tool run: sanitizer --tool T --error-exitcode 86 --log-file LOG
// worker_argv... (racecheck keeps its default "analysis" report: "Race reported between ...")
std::vector<std::string> tool_command(const std::string& sanitizer_path, std::string_view tool,
                                      const std::string& log_path,
                                      const std::vector<std::string>& worker_argv);

// How one tool run ended.
enum class ToolOutcome { kClean, kHazards, kUnexplained, kTimeout, kInfraError, kNotRun };
std::string_view tool_outcome_name(ToolOutcome o); // "clean", "hazards", "unexplained", ...

// Judges one finished tool run from its ToolCall, report text and the worker's result JSON (the
// file the worker wrote; null when it wrote none). Clean needs exit 0, zero hazards, a summary of 0
// errors (when printed), no tool errors and a worker result with status "pass" (gpu_runner.h).
// Hazards: any parsed hazard. Timeout: the deadline fired. The worker's own exit codes
// (evaluator/gpu_runner.h) map: kGpuWorkerBadRequest/kGpuWorkerInternal -> kInfraError,
// kGpuWorkerNoDevice -> kNotRun. Unexplained: anything else that is not clean (non-zero exit,
// summary count without parsed hazards, tool errors, worker failure).
struct ToolRun {
  std::string tool;
  ToolOutcome outcome = ToolOutcome::kNotRun;
  std::string reason; // one line
  std::vector<std::string> command;
  int exit_code = -1;
  double wall_ms = 0;
  std::string report_sha256;
  std::string report_text; // raw report for the store (not in to_json())
  Report report;
  nlohmann::json to_json() const; // {"tool","outcome","reason","command","exit_code","wall_ms",
                                  //  "report_sha256","hazard_count","kinds","hazards":[<=20]}
};
ToolRun judge_tool_run(std::string_view tool, const ToolCall& call, std::string report_text,
                       const nlohmann::json& worker_result);

// The worker's poisoning result (result.json key "poison", h7-api.md): two runs of each case with
// shared memory scrubbed to two different patterns; the results must be identical and correct.
// Returns an empty string when the result is clean, otherwise the reason.
std::string judge_poison(const nlohmann::json& worker_result);

// Inputs of the whole gate.
struct GateConfig {
  std::string sanitizer_path;           // empty or non-executable -> not_run
  std::vector<std::string> worker_argv; // the worker with its "sanitize" request
  std::string work_dir;                 // logs go here (sanitizer-<tool>.log)
  std::string worker_result_path;       // the worker's result.json, re-read after each tool
  std::chrono::milliseconds deadline_per_tool{120000};
  std::map<std::string, std::string> env; // environment of the runs
  // Issue 26 (evaluator/throughput.h). memcheck always runs first. fail_fast: after a tool that
  // reports hazards the gate's status and reason are decided (gate_from_runs takes the first
  // such tool), so the tools after it are not run (recorded not_run, saying why). concurrent:
  // after memcheck, the other tools run at once, each in its own folder work_dir/<tool> holding
  // copies of `request_files` (every element of worker_argv equal to work_dir is replaced by it,
  // and the worker's result is read from there); the runner must then be thread-safe.
  bool fail_fast = false;
  bool concurrent = false;
  std::vector<std::string> request_files; // names in work_dir: request.json, kernel.cubin, ...
  // Called before each tool run with the folder it runs in (work_dir or its copy), to write the
  // request that tool's worker reads (e.g. no shared-memory scrub under racecheck); may be empty.
  std::function<void(std::string_view tool, const std::string& folder)> prepare_folder;
};
using ProcessRunner =
    std::function<ToolCall(const std::vector<std::string>& argv, const SubprocessOptions& options)>;

// Runs the four tools (memcheck first; see GateConfig for fail_fast and concurrent), reads the
// poison result from the memcheck run's worker result, and returns the gate. Evidence:
// {"tool_version","tools":[ToolRun...],"poison":{...},"exact_alloc":true}. `reports` receives tool
// -> raw report text for the store. Status: fail for hazards/unexplained/ poison mismatch, timeout
// when a tool ran past its deadline, not_run when the tool is missing, infra_error for worker
// infrastructure failures, else pass.
GateResult run_gate(const GateConfig& config, const ProcessRunner& runner,
                    std::map<std::string, std::string>* reports);

// Gate from already judged tool runs plus the poison verdict (what run_gate calls; unit-tested).
GateResult gate_from_runs(const std::vector<ToolRun>& runs, const std::string& tool_version,
                          const nlohmann::json& poison_result);

} // namespace kloop::evaluator::sanitizer
