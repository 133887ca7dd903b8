// The kloop side of the GPU worker boundary (ARCHITECTURE.md, DESIGN.md "Isolation"): writes a
// request folder (request.json plus the candidate cubin), starts a fresh `kloop-gpu-worker` per
// batch in its own process group with an allow-listed environment, no network (`unshare -n` when
// it works) and a watchdog deadline (SIGTERM then SIGKILL to the group, evaluator/subprocess.h),
// then reads result.json and the progress file and classifies the outcome: pass/fail from the
// worker's result, `crashed` (sticky CUDA fault or a signal, fault class named), `timeout` (the
// watchdog fired; the case in progress is named), `not_run` (no CUDA device), `infra_error`
// (ours). kloop never links the CUDA runtime; a faulted worker is never reused.
//
// Worker protocol (files in the request folder):
//   request.json  {"mode": "probe"|"correctness"|..., "operator": contract id (kernels/registry.h;
//                  absent: the manifest's "contract"), "cubin": "kernel.cubin" | absent (every call
//                  then goes to the trusted reference kernel), "source": "kernel.cu", "manifest":
//                  {...} | absent, "cases": [case spec JSON...] | {"suite": one of the operator's
//                  suite names
//                  ("public", "large", "cases_md", "invalid"), "seed": N}, "options":
//                  {"guard_bytes": 256, "repeats": 2, "small_repeats": 20, "concurrency": true,
//                  "stop_at_first_failure": false}}
//   progress.json written by the worker before each case: {"index": i, "name": "...", "total": n}
//   result.json   {"status": "pass"|"fail"|"crashed"|"not_run"|"infra_error", "reason": "...",
//                  "device_query": {"call": "cudaGetDeviceCount", "error": "cudaErrorNoDevice"|...,
//                  "device_count": n} (not_run only: the CUDA answer behind it),
//                  "device": {...}, "path_counts": {...}, "suite": {...}, "fault": {...}|null,
//                  "device_memory": {"peak_allocated_bytes", "allocations", "total_bytes",
//                  "used_before_bytes", "used_after_bytes", "min_free_bytes", "peak_used_bytes"}
//                  (every mode; evaluator/gpu_worker/cuda_rt.h), "timings": {"context_ms",
//                  "load_ms", benchmark mode: "bench_setup_ms", "copy_ceiling_ms", "bench_states":
//                  [{"shape_class","state","ms","rounds","stop"}]} (evaluator/phases.h), ...}
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/device_access.h"
#include "evaluator/gate.h"
#include "evaluator/subprocess.h"

namespace kloop::evaluator {

struct SuiteResult; // evaluator/correctness.h

// Documented exit codes of kloop-gpu-worker.
enum GpuWorkerExit : int {
  kGpuWorkerOk = 0,          // result.json written; its status says pass or fail
  kGpuWorkerBadRequest = 2,  // request missing or malformed (ours: infra_error)
  kGpuWorkerNoDevice = 3,    // no usable CUDA device or driver; result.json status not_run
  kGpuWorkerStickyFault = 4, // a sticky CUDA error (illegal address, launch failure, ...) ended
                             // the worker; result.json status crashed, fault named
  kGpuWorkerInternal = 5,    // unexpected exception inside the worker (ours: infra_error)
};

struct GpuRunOptions {
  // Watchdog: the worker may go `deadline` without starting a new case (progress.json), and the
  // batch may take at most deadline_cap (at least `deadline`; the default keeps the batch at
  // `deadline`). A hung kernel is stopped `deadline` after its case began, as before; a correct
  // one that is slow because other processes share the device is not rejected as a timeout.
  std::chrono::milliseconds deadline{30000};
  std::chrono::milliseconds deadline_cap{0};
  std::string worker;          // path of kloop-gpu-worker; empty: worker_path("kloop-gpu-worker")
  bool isolate_network = true; // prefix `unshare -n` when it works here
  std::filesystem::path work_dir; // request folder; empty: a fresh folder under the temp dir
  bool keep_work_dir = false;     // keep a temp folder for inspection
  // The device the process runs on (issue 26, multi-device scheduler): `device` is the
  // CUDA_VISIBLE_DEVICES value its environment gets ("" keeps kloop's own), `access` the device's
  // lock (nullptr: none), held as `work` for the process's lifetime (evaluator/device_access.h).
  std::string device;
  DeviceAccess* access = nullptr;
  DeviceWork work = DeviceWork::kShared;
};

struct GpuRunRequest {
  std::string mode = "correctness"; // "probe" or "correctness"
  std::string operator_id;          // contract id of the operator; "": the manifest's contract
  std::optional<std::string> cubin; // candidate cubin bytes; nullopt: reference kernel only
  std::string source;               // kernel.cu text (kept beside the request for the record)
  nlohmann::json manifest;          // manifest.json text parsed as JSON (null when no cubin)
  nlohmann::json cases;             // [case spec JSON] or {"suite": ..., "seed": N}
  nlohmann::json options = nlohmann::json::object(); // worker options (see protocol above)
};

// Outcome of one worker batch.
struct GpuRunResult {
  GateStatus status = GateStatus::kInfraError;
  std::string reason;      // one line: the fault class and case, the failure, or why not run
  std::string fault_class; // "illegal_address", "misaligned_address", "launch_failure",
                           // "illegal_instruction", "timeout", "signal", ... (empty if none)
  nlohmann::json progress; // last progress.json (the case in flight), null if none
  nlohmann::json result;   // the worker's result.json, null if it wrote none
  int exit_code = -1;
  int term_signal = 0;
  bool timed_out = false;
  bool network_isolated = false; // whether `unshare -n` was applied
  double wall_ms = 0;
  std::string stderr_tail; // last bytes of the worker's stderr
  // The worker's device-memory report (result.json "device_memory"); null when it wrote none.
  nlohmann::json device_memory;
  // The process itself (argv, exit, wall time, rusage incl. max RSS), with detail
  // {"tool": "kloop-gpu-worker", "mode", "status", "device_memory"} for the store's tool_calls.
  // Empty argv when no process was started.
  ToolCall call;
  nlohmann::json to_json() const; // status, reason, exit, wall_ms, max_rss_kib, device_memory
};

// The store-facing description of one worker process: `call` with its detail filled from the
// run's mode, status and device-memory report (exposed for unit tests with fabricated results).
ToolCall worker_tool_call(ToolCall call, const std::string& mode, const GpuRunResult& run);

// The "device_memory" object of a worker result.json, checked: an object whose byte counts are
// non-negative integers. Returns null for a missing or malformed report (never throws).
nlohmann::json device_memory_of(const nlohmann::json& worker_result);

// Runs `argv` (a device process: compute-sanitizer or ncu around a worker) on the device of
// `device`: CUDA_VISIBLE_DEVICES pinned in `options.env` when device.device is set, device.access
// held as `work` while it runs; note_device() fills the call's detail. A shared call under a
// device lock that passes its deadline is run once more alone on the device (held as timed work,
// `before_retry` first, e.g. to remove the first attempt's result files) and that run decides: a
// correct kernel slowed by the work sharing its GPU is not a timeout verdict. The detail then says
// "retried_alone" and the first attempt's wall time. Throws what run_subprocess throws.
ToolCall run_on_device(const std::vector<std::string>& argv, SubprocessOptions options,
                       const GpuRunOptions& device, DeviceWork work,
                       const std::function<void()>& before_retry = {});
// Adds {"device", "device_work", "device_wait_ms"} to call.detail (phases_from_tool_calls reads
// them). Call it after the detail is otherwise complete.
void note_device(ToolCall& call, const GpuRunOptions& device, DeviceWork work, double wait_ms);
// The result.json of a correctness batch that ran to its end (the worker exits kGpuWorkerOk):
// `extra` (device, evidence, path_counts, ...) plus "suite" (SuiteResult::to_json), "status" "pass"
// or "fail" and "reason" ("case NAME failed: REASON" of the first failure, "" on pass). The GPU
// worker writes its batches with it, and so does the CPU emulation of the worker in the tests.
nlohmann::json correctness_batch_result(const SuiteResult& suite, nlohmann::json extra);

// Runs one batch in a fresh worker. Never throws for anything the candidate does; throws
// InfraError only when the request folder cannot be written.
GpuRunResult run_gpu_worker(const GpuRunRequest& request, const GpuRunOptions& options = {});

// Classifies a finished worker run from its exit status, timeout flag, result.json and
// progress.json (exposed for unit tests with fabricated outcomes).
GpuRunResult classify_gpu_run(int exit_code, int term_signal, bool timed_out,
                              const nlohmann::json& result, const nlohmann::json& progress);

// Whether `unshare -n` works for this user here (probed once per process).
bool network_isolation_available();

} // namespace kloop::evaluator
