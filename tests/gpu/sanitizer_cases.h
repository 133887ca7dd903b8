// The defect corpus's sanitizer cases: each entry the sanitizer gate must reject, with the tool
// (or the shared-memory poisoning method) that must name it, and the small calls they run on.
// gpu_sanitizer_test runs them on the device; gpu_artifacts_test checks on the CPU that every
// corpus entry whose expect.json names the sanitizer gate is listed here and that these calls run
// each listed RMSNorm candidate (not the reference), so no case can pass by sanitizing the wrong
// kernel. Another operator's entries run on the sanitizer gate's own representative cases (the
// worker's default, as `kloop evaluate` runs them).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kloop::gputest {

struct SanitizerCase {
  std::string_view op; // the operator's folder: kernels/<op>/corpus/<entry>
  std::string_view entry;
  std::string_view tool; // "memcheck", "racecheck", "initcheck", "synccheck" or "poison"
};

inline constexpr SanitizerCase kSanitizerCases[] = {
    {"rmsnorm", "seed_missing_barrier", "racecheck"},    // warps read red[] before others wrote it
    {"rmsnorm", "p15_race_rows_per_block", "racecheck"}, // rows of a block reuse red[], no barrier
    {"rmsnorm", "seed_smem_index_oob", "memcheck"},      // shared index past its allocation
    {"rmsnorm", "uninit_global_read", "initcheck"},      // y read before the kernel writes it
    {"rmsnorm", "divergent_barrier", "synccheck"},       // a barrier reached by half of each warp
    {"rmsnorm", "uninit_shared_read", "poison"},         // result depends on stale shared memory
    {"softmax", "p15_race_rows_per_block", "racecheck"}, // 4 rows of a block reuse the buffers
};

// Small representative RMSNorm calls (the worker's sanitize-mode cases): tails around a 256-thread
// tile, all dtypes, a strided view, and up to four rows, so a kernel with several rows per block
// reuses its shared buffer within one block.
inline nlohmann::json sanitizer_small_cases() {
  using nlohmann::json;
  return json::array({{{"dtype", "float32"}, {"rows", 3}, {"h", 257}, {"x_row_stride", 257}},
                      {{"dtype", "float16"}, {"rows", 2}, {"h", 1009}, {"x_row_stride", 1009}},
                      {{"dtype", "bfloat16"}, {"rows", 3}, {"h", 129}, {"x_row_stride", 129}},
                      {{"dtype", "bfloat16"}, {"rows", 4}, {"h", 1000}, {"x_row_stride", 1032}}});
}

} // namespace kloop::gputest
