// The typed schema of gate evidence: one struct per gate for the parts that consumers read
// (feedback/, `kloop show`, the offline generator through the feedback), shared with the producers.
// Where a producer writes such a part inline, it writes it through the struct here (to_json /
// write_to); where it writes a struct of its own (CaseResult, Comparison, sanitizer::Hazard,
// PtxasResources), the reader here is that struct's inverse and evidence_test pins the pair with
// the producer's real output. Readers never throw and never guess: each key has one place, a part
// that is absent is left empty (the gate did not get that far), and a part that is present but
// malformed is named in `problems` ("suite.first_failure.spec: missing field 'h'") so consumers
// can say so instead of silently printing less.
//
// Producers: format agent/reply_parser.cpp; contract evaluator/pipeline.cpp; build
// evaluator/build.cpp; static evaluator/static_gate.cpp; correctness evaluator/device_gates.cpp
// (correctness_gate_from, on the GPU worker's result.json, whose "suite" is SuiteResult::to_json);
// sanitizer evaluator/sanitizer.cpp (gate_from_runs); benchmark and roofline
// evaluator/perf_gates.cpp; stalls evaluator/device_gates.cpp (stalls_from_pcsample).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/sanitizer.h"
#include "evaluator/static_inspection.h"

namespace kloop::evaluator::evidence {

// What a reader could not read, one "<path>: <what>" entry each.
using Problems = std::vector<std::string>;

// ---- format: the model's reply turned into candidate files ----
struct FormatEvidence {
  std::string outcome;          // reply outcome name (agent/reply_parser.h), "ok" when parsed
  std::string reason;           // why no candidate came out of the reply ("" when ok)
  int code_blocks = 0;          // fenced blocks taken as kernel.cu candidates
  int json_blocks = 0;          // fenced json blocks
  std::int64_t reply_bytes = 0; // the reply text's size
  std::string stop_reason;      // the provider's finish_reason / stop_reason ("" when unknown)
  nlohmann::json to_json() const;
  static FormatEvidence read(const nlohmann::json& evidence, Problems& problems);
};

// ---- contract: manifest.json checked against the contract ----
struct ContractEvidence {
  struct Error {
    std::string field;   // JSON path of the offending manifest key ("launch.block_threads")
    std::string message; // names the field, the value and what is allowed
  };
  std::vector<Error> errors;      // empty on pass
  nlohmann::json to_json() const; // {"errors":[{"field","message"}]}
  static ContractEvidence read(const nlohmann::json& evidence, Problems& problems);
};

// ---- build: include pre-scan and NVRTC ----
struct BuildEvidence {
  // Rejected #include lines, each "line N: #include ... rejected: why" (IncludeProblem::message).
  std::vector<std::string> include_problems;
  // First NVRTC errors, reduced and path-redacted: "kernel.cu(LINE): error: ..." plus context.
  std::string diagnostics;
  // Sets the non-empty members in `evidence` (an object holding the gate's other keys).
  void write_to(nlohmann::json& evidence) const;
  static BuildEvidence read(const nlohmann::json& evidence, Problems& problems);
};

// ---- static: ptxas resources, PTX rules, SASS summary ----
struct StaticFinding {
  int ptx_line = 0;     // 1-based PTX line (0: not tied to a line)
  std::string kind;     // the rule (PtxFinding::kind: "clock", "module_state", "trap", ...)
  std::string message;  // PtxFinding::message
  std::string ptx_text; // that PTX line, trimmed, whitespace runs as one space, at most 160
                        // bytes ("" when ptx_line is 0)
  nlohmann::json to_json() const;
};
struct SassFunction {
  int local_loads = 0, local_stores = 0; // LDL / STL instructions
  int widest_global_load_bits = 0, widest_global_store_bits = 0;
};
struct StaticEvidence {
  std::map<std::string, PtxasResources> resources; // entry point -> ptxas figures
  std::vector<StaticFinding> findings;
  std::string sass_status; // "ran", "not_run", "" when absent
  std::string sass_reason;
  std::map<std::string, SassFunction> sass_functions;
  static StaticEvidence read(const nlohmann::json& evidence, Problems& problems);
};
// The StaticFinding of `finding`, quoting its line of `ptx`.
StaticFinding static_finding(const PtxFinding& finding, std::string_view ptx);

// ---- correctness: the public suite in the GPU worker (or its CPU emulation) ----
// The element comparison of one case (Comparison::to_json, evaluator/correctness.h: the same
// fields; this header does not include correctness.h, whose Candidate would clash with
// candidate.h's in the producers that include both).
struct ComparisonEvidence {
  bool pass = true;
  std::string reason; // first failed rule
  double max_abs_err = 0, max_rel_err = 0;
  std::int64_t worst_index = -1; // flat row-major index of the worst tolerance violation
  std::int64_t worst_row = -1;
  double worst_expected = 0, worst_actual = 0;
  std::int64_t tolerance_violations = 0;
  std::int64_t nonfinite_mismatches = 0;
  std::int64_t first_nonfinite_index = -1;
  double worst_row_ratio = 0; // max over rows of ||a-e|| / max(||e||, row_floor)
  std::int64_t worst_ratio_row = -1;
};
// One case as the correctness core judged it (CaseResult::to_json, the worker's "suite" cases).
struct CaseEvidence {
  bool pass = false;
  std::string name;
  nlohmann::json spec; // the case spec JSON of the operator's suite; null for ad-hoc inputs
  std::string reason;
  std::optional<ComparisonEvidence> comparison; // when values were compared
};
// The worker's CUDA fault (result.json "fault", exit kGpuWorkerStickyFault).
struct FaultEvidence {
  std::string fault_class; // "illegal_address", ...
  std::string cuda_error, where, case_name;
  std::int64_t case_index = -1;
};
struct CorrectnessEvidence {
  std::optional<bool> pass;
  std::optional<std::int64_t> passed, failed; // cases run in the decisive batch
  std::optional<CaseEvidence> first_failure;
  std::optional<FaultEvidence> fault;
  std::string in_flight_case; // the case the worker was on when it timed out or died ("")
  static CorrectnessEvidence read(const nlohmann::json& evidence, Problems& problems);
};
// The decisive batch's suite summary as correctness_gate_from stores it under "suite":
// {"pass","passed","failed","first_failure": CaseResult JSON | null} (from the worker's full
// SuiteResult::to_json, whose "cases" go to "raw_case_results" instead).
nlohmann::json suite_summary_json(const nlohmann::json& worker_suite);
// Inverses of CaseResult::to_json and Comparison::to_json (evaluator/correctness*.cpp).
std::optional<CaseEvidence> read_case(const nlohmann::json& j, const std::string& path,
                                      Problems& problems);
std::optional<ComparisonEvidence> read_comparison(const nlohmann::json& j, const std::string& path,
                                                  Problems& problems);

// ---- sanitizer: compute-sanitizer tools and shared-memory poisoning ----
struct SanitizerTool {
  std::string tool, outcome, reason; // ToolRun: outcome is tool_outcome_name
  std::int64_t hazard_count = 0;     // all hazards parsed (hazards holds at most 20)
  std::vector<sanitizer::Hazard> hazards;
};
struct SanitizerEvidence {
  std::string tool_version;
  std::vector<SanitizerTool> tools;
  std::string poison_status; // "pass", "fail", "" when absent
  std::string poison_reason;
  static SanitizerEvidence read(const nlohmann::json& evidence, Problems& problems);
};

// ---- stalls: CUPTI PC sampling (feedback data, attached to the benchmark evidence) ----
struct StallLine {
  std::int64_t line = 0; // kernel.cu line (-lineinfo); 0 when unknown
  std::string reason;    // the PC's top stall reason (CUPTI name)
  std::int64_t samples = 0;
};
struct StallEvidence {
  std::string status; // "ok", "not_run", "failed", ...
  std::string reason;
  std::map<std::string, std::int64_t> histogram; // CUPTI stall reason -> samples
  std::vector<StallLine> top_lines;              // hottest PCs, hottest first
  std::int64_t total_samples = 0, dropped_samples = 0, sampling_period = 0;
  nlohmann::json to_json() const; // the layout read() reads
  static StallEvidence read(const nlohmann::json& stalls, Problems& problems);
  // The histogram's reason with the most samples ("" when empty).
  std::string dominant() const;
};
// "smsp__pcsamp_warps_issue_stalled_long_scoreboard" -> "long_scoreboard" (other names as given).
std::string stall_reason_name(std::string_view cupti_name);

// ---- benchmark: paired candidate/baseline timing ----
struct PairedRatioEvidence {
  double ratio = 0;      // candidate time / baseline time (median of per-round ratios); < 1 faster
  double lo = 0, hi = 0; // bootstrap 95 % interval of the ratio
  std::int64_t rounds = 0;
};
struct BenchState {
  std::string state;    // "cold", "warm"
  std::string decision; // bench::speed_decision_name: "faster", "slower", "indistinguishable"
  double candidate_ms = 0, baseline_ms = 0; // kernel medians
  PairedRatioEvidence vs_baseline;
  double noise_floor = 0; // A/A noise floor of the state (relative)
};
struct BenchShape {
  std::int64_t rows = 0, h = 0;
  std::string dtype, shape_class;
  std::vector<BenchState> states;
};
struct BenchSummary {
  std::int64_t faster = 0, slower = 0, indistinguishable = 0; // shape-states
  std::optional<double> geomean_speedup, ci_lo, ci_hi;
  std::optional<bool> clears_noise_floor;
};
struct BenchmarkEvidence {
  std::optional<BenchSummary> summary;
  std::vector<BenchShape> shapes;
  std::optional<StallEvidence> stalls; // "stalls", when sampling ran
  static BenchmarkEvidence read(const nlohmann::json& evidence, Problems& problems);
};

// ---- roofline: fraction of the measured copy ceiling ----
struct RooflineClass {
  double fraction_median = 0; // median over the class's shapes of the cold (else warm) fraction
  std::int64_t shapes = 0;
};
struct RooflineEvidence {
  std::optional<double> copy_ceiling_tbps;
  std::map<std::string, RooflineClass> by_class; // shape class -> figures
  static RooflineEvidence read(const nlohmann::json& evidence, Problems& problems);
};

} // namespace kloop::evaluator::evidence
