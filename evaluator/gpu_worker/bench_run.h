// The worker's measurement modes (h7-api.md): "benchmark" (the benchmark and roofline gates'
// measurements), "sanitize" (the sanitizer gate's representative cases with exact-size
// allocations and shared-memory poisoning; run under compute-sanitizer by evaluator/sanitizer.h)
// and "pcsample" (CUPTI PC-sampling stall reasons, informational). main.cpp hands a request whose
// mode is_perf_mode() to run_perf_mode() after loading the candidate.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/gpu_worker/launch.h"
#include "kernels/operator.h"

namespace kloop::gpu {

// What main.cpp's finish() needs: exit code (evaluator/gpu_runner.h GpuWorkerExit), status
// ("pass"/"fail"), one-line reason, and the result members to merge.
struct ModeOutcome {
  int exit_code = 0;
  std::string status = "pass";
  std::string reason;
  nlohmann::json extra = nlohmann::json::object();
};

bool is_perf_mode(const std::string& mode); // "benchmark", "sanitize", "pcsample"

// Runs the mode. `extra` is main.cpp's result object so far (device, kernels); it is returned
// extended. Sticky CUDA faults propagate as StickyFault (main.cpp reports them).
ModeOutcome run_perf_mode(const nlohmann::json& request, const op::Operator& op,
                          const LoadedCandidate& candidate, const op::DeviceInfo& device,
                          const std::filesystem::path& dir, nlohmann::json extra);

// Mode bodies (bench_run.cpp, bench_sanitize.cpp, pcsampling.cpp).
ModeOutcome run_benchmark(const nlohmann::json& request, const op::Operator& op,
                          const LoadedCandidate& candidate, const op::DeviceInfo& device,
                          const std::filesystem::path& dir, nlohmann::json extra);
ModeOutcome run_sanitize(const nlohmann::json& request, const op::Operator& op,
                         const LoadedCandidate& candidate, const op::DeviceInfo& device,
                         nlohmann::json extra);
ModeOutcome run_pcsample(const nlohmann::json& request, const op::Operator& op,
                         const LoadedCandidate& candidate, const op::DeviceInfo& device,
                         const std::filesystem::path& dir, nlohmann::json extra);

// The request's "baseline" member {"cubin", "manifest"} (the cubin a file in `dir`; the manifest
// parsed against the operator's declaration) loaded as a candidate; returns false (reference kernel
// as baseline) when absent. With `aa_library` and `aa_out`, the same cubin bytes (read once) are
// loaded a second time into `aa_library` as the A/A partner. Throws std::runtime_error naming the
// problem when present but unusable (ours: the baseline is in-tree), or when the second load gives
// the baseline's own kernel handles.
bool load_baseline(const op::Operator& op, const nlohmann::json& request,
                   const std::filesystem::path& dir, Library& library, LoadedCandidate& out,
                   Library* aa_library = nullptr, LoadedCandidate* aa_out = nullptr);

} // namespace kloop::gpu
