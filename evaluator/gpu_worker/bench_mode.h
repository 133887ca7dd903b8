// The worker's "bench" mode: a quick CUDA-event timing of one candidate launch shape through the
// trusted wrapper's dispatch and launch plan, next to a device-to-device copy of the same bytes
// (the copy ceiling). It is a smoke measurement for the device script, not the benchmark gate.
#pragma once

#include <nlohmann/json.hpp>

#include "evaluator/gpu_worker/launch.h"
#include "kernels/operator.h"

namespace kloop::gpu {

// options: {"shapes": [op::BenchShape JSON, e.g. {"dtype": "bfloat16", "rows": 65536, "h": 4096}
// for RMSNorm], "iters": 20}; no shapes: the operator's benchmark shapes. Returns {"shapes":
// [{<shape keys>, route, variant, plan, median_ms, tbps (unique logical bytes), copy_tbps}]}.
nlohmann::json run_bench(const op::Operator& op, const LoadedCandidate& cand,
                         const op::DeviceInfo& device, const nlohmann::json& options);

} // namespace kloop::gpu
