// CUPTI PC sampling of the candidate kernel (worker mode "pcsample"; h7-api.md). Behind a pimpl so
// that only pcsampling.cpp sees CUPTI. Enables sampling on the current context first, then
// queries the stall reasons and sets the configuration (DEVICE.md: that order works on the H200;
// a sampling period of 5 dropped most samples, so the default is 10), runs the launches in
// kernel-serialized mode, and returns the stall-reason histogram (smsp__pcsamp_warps_issue_
// stalled_* names), the top PCs mapped to kernel.cu lines through cuptiGetSassToSourceCorrelation
// on the cubin (needs -lineinfo), the dropped-sample count and the sampling period. Informational:
// profiler feedback, never a gate. It cannot run under ncu (one CUPTI subscriber).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace kloop::gpu {

struct PcSampleOptions {
  unsigned sampling_period = 10; // 2^period cycles between samples (CUPTI's unit), 5..31
  int top_pcs = 16;              // PCs reported with source lines
  std::size_t max_pcs = 20000;   // sampling data buffer capacity (PCs)
};

// Samples `launch` (called once per iteration, `iterations` times, synchronised afterwards).
// `cubin` is the loaded image for SASS-to-source correlation. Returns {"status": "ok"|"not_run",
// "reason", "sampling_period", "total_samples", "dropped_samples", "stall_reasons": {name: n},
// "top_pcs": [{"function","pc_offset","samples","file","line","stalls":{name:n}}]}. CUPTI errors
// give status "not_run" with the failing call named (never a crash of the worker).
nlohmann::json pc_sample(const std::function<void()>& launch, int iterations,
                         const std::string& cubin, const PcSampleOptions& options);

} // namespace kloop::gpu
