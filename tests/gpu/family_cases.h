// The offline-family variants the GPU tier runs (tests/gpu/CMakeLists.txt builds their cubins into
// KLOOP_CORPUS_BIN) and the four larger calls gpu_family_test gives each one beyond the public
// suite. gpu_artifacts_cpu_test checks on the CPU that these calls run the candidate under each
// variant's dispatch predicate (the device test asserts that none went to the reference).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "kernels/rmsnorm/cases.h"

namespace kloop::gputest {

inline std::vector<std::string> family_variants() {
  std::vector<std::string> out;
  std::stringstream in(KLOOP_GPU_FAMILY_LIST);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

// A contiguous call of rows x h with normal values.
inline rmsnorm::CaseSpec family_large_call(DType dtype, std::int64_t rows, std::int64_t h) {
  rmsnorm::CaseSpec s;
  s.name = "family-large-" + std::to_string(rows) + "x" + std::to_string(h);
  s.family = "family";
  s.dtype = dtype;
  s.outer = {rows};
  s.h = h;
  s.seed = 11;
  return s;
}

// Two calls over the 64 MiB store-hint threshold (a peeled bf16 one with an odd width, an aligned
// float32 one), then two with rows of 126-127 full vectors and enough rows that warp rows (-wr)
// give each row one warp.
inline std::vector<rmsnorm::CaseSpec> family_large_calls() {
  return {family_large_call(DType::kBFloat16, 8200, 4100),
          family_large_call(DType::kFloat32, 4200, 4096),
          family_large_call(DType::kBFloat16, 32768, 1009),
          family_large_call(DType::kFloat32, 8192, 509)};
}

} // namespace kloop::gputest
