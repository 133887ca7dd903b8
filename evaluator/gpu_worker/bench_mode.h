// The worker's "bench" mode: a quick CUDA-event timing of one candidate launch shape through the
// trusted wrapper's dispatch and launch plan, next to a device-to-device copy of the same bytes
// (the copy ceiling). It is a smoke measurement for the device script, not the benchmark gate.
#pragma once

#include <nlohmann/json.hpp>

#include "evaluator/gpu_worker/device_candidate.h"

namespace kloop::gpu {

// options: {"shapes": [{"dtype": "bfloat16", "rows": 65536, "h": 4096}, ...], "iters": 20}.
// Returns {"shapes": [{dtype, rows, h, route, plan, median_ms, tbps, copy_tbps}]}.
nlohmann::json run_bench(const LoadedCandidate& cand, const rmsnorm::DeviceInfo& device,
                         const nlohmann::json& options);

} // namespace kloop::gpu
