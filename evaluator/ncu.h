// Optional measured DRAM traffic through Nsight Compute (issue 5, roofline gate; DEVICE.md: `ncu
// --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,
// gpu__time_duration.sum` works on the H200). One extra GPU worker batch (`bench` mode, a few
// launches of the candidate on one representative streaming shape) runs under ncu with a kernel
// name filter and a launch-count cap; its CSV is parsed into measured read/write bytes and the
// kernel duration, reported in the roofline evidence as "measured_dram" BESIDE the logical bytes
// (never replacing them), with the ratio measured/logical. The figure is evidence only: no ncu,
// an ncu failure or an unparsable report never fails the gate, it is reported with the reason.
// Everything here but run_measured_dram() is pure text processing, unit-tested on fixtures.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/subprocess.h"

namespace kloop::evaluator::ncu {

// The metrics DEVICE.md verified on the H200.
inline constexpr std::string_view kMetrics =
    "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum";
// Kernel launches profiled at most (bench mode: one warm-up plus `iters` timed launches).
inline constexpr int kLaunchCount = 5;

// Path of ncu: the first executable `ncu` in the colon-separated `path_env` (may be null), else
// /usr/local/cuda/bin/ncu when executable, else "" (absent).
std::string find_ncu(const char* path_env);

// `value` in `unit` converted to base units: bytes for byte, Kbyte, Mbyte, Gbyte, Tbyte (SI,
// powers of 1000, as ncu prints them), KB/MB/GB, KiB/MiB/GiB and Kibyte/Mibyte/Gibyte (powers
// of 1024); nanoseconds for nsecond, usecond, msecond, second (and ns/us/ms/s). nullopt for a unit
// it does not know (the caller reports it, never guesses).
std::optional<double> to_base_units(double value, std::string_view unit);

// Per-launch figures of the profiled kernel, in base units.
struct Measured {
  double read_bytes = 0;  // mean dram__bytes_read.sum over the profiled launches
  double write_bytes = 0; // mean dram__bytes_write.sum
  double duration_ns = 0; // mean gpu__time_duration.sum
  int launches = 0;       // launches (CSV "ID"s) that reported all three metrics
  std::string kernel;     // "Kernel Name" of the first launch
};

// Parses `ncu --csv` output: "==PROF==" / "==WARNING==" lines and the worker's own lines are
// skipped; the header row names the columns ("ID", ..., "Kernel Name", ..., "Metric Name",
// "Metric Unit", "Metric Value"); values may carry thousands separators ("1,073,741,824").
// Returns the figures, or an error naming what is missing ("no kernel was profiled", an unknown
// unit, a metric absent for a launch, ...). Never throws on odd text.
struct ParseResult {
  std::optional<Measured> measured;
  std::string error; // empty when measured is set
};
ParseResult parse_csv(std::string_view text);

// Exact argv: ncu --clock-control none --metrics kMetrics --csv --kernel-name KERNEL
// --launch-count kLaunchCount --log-file LOG worker_argv...
std::vector<std::string> command(const std::string& ncu_path, const std::string& kernel_name,
                                 const std::string& log_path,
                                 const std::vector<std::string>& worker_argv);

// "measured_dram" evidence of a finished ncu run: on success {"status": "ok", "read_bytes",
// "write_bytes", "duration_ns", "launches", "kernel", "ratio_measured_over_logical" (read+write
// over `logical_unique_bytes`), "read_ratio", "write_ratio", plus the common fields}; otherwise
// {"status": "failed", "reason"} plus the common fields. Common: "tool_version", "command",
// "exit_code", "timed_out", "wall_ms", "report_sha256" (of `report_text`), "logical_unique_bytes".
nlohmann::json evidence_from_run(const ToolCall& call, const std::string& report_text,
                                 const std::string& tool_version,
                                 std::int64_t logical_unique_bytes);

// {"status": "not_run", "reason": reason}.
nlohmann::json not_run(const std::string& reason);

// What run_measured_dram needs; the caller writes the worker's `bench` request into work_dir.
struct RunConfig {
  std::string ncu_path;                 // find_ncu(); "" -> not_run "ncu not found"
  std::string kernel_name;              // the candidate's entry point for the shape's dtype
  std::vector<std::string> worker_argv; // kloop-gpu-worker REQUEST_DIR
  std::string work_dir;                 // ncu.csv goes here; HOME and TMPDIR point here
  std::string worker_result_path;       // the worker's result.json (device memory, route)
  std::int64_t logical_unique_bytes = 0;
  std::chrono::milliseconds deadline{30000}; // the whole ncu run (issue brief: 30 s)
};
using ProcessRunner =
    std::function<ToolCall(const std::vector<std::string>& argv, const SubprocessOptions& options)>;

// Runs `ncu --version` and the profiled worker through `runner`, appends both ToolCalls to
// `calls` (detail: {"tool": "ncu", "mode", "status", "device_memory"}), and returns the
// "measured_dram" evidence (plus "route": the trusted wrapper's route for the shape, when the
// worker reported it). Never throws
// for ncu's or the candidate's behaviour; an InfraError from `runner` becomes status "failed".
nlohmann::json run_measured_dram(const RunConfig& config, const ProcessRunner& runner,
                                 std::vector<ToolCall>* calls);

} // namespace kloop::evaluator::ncu
