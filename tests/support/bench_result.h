// A GPU worker "benchmark" result with synthetic samples (the layout evaluator/perf_gates.h reads;
// /work/notes/h7-api.md), for tests that need the benchmark and roofline gates' own output: feed
// it to perf::benchmark_gate / perf::roofline_gate instead of writing their evidence by hand.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::test_support {

// `n` per-call times around `center` ms with a 1 % standard deviation (fixed seed).
inline std::vector<double> noisy_samples(double center, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(center, center * 0.01);
  std::vector<double> v;
  for (int i = 0; i < n; ++i)
    v.push_back(d(rng));
  return v;
}

// One shape with a cold state: the candidate takes cand_ms, the baseline and its A/A partner
// base_ms, the reference 3 x base_ms (40 rounds, 80 samples per path, one throttled batch, one
// passed output check).
inline nlohmann::json synthetic_bench_shape(std::int64_t rows, std::int64_t h, const char* dtype,
                                            double cand_ms, double base_ms) {
  return {{"rows", rows},
          {"h", h},
          {"dtype", dtype},
          {"shape_class", "streaming"},
          {"states",
           {{{"state", "cold"},
             {"rounds", 40},
             {"stop", "noise"},
             {"input_sets", 1},
             {"samples",
              {{"candidate_kernel", noisy_samples(cand_ms, 80, 1)},
               {"baseline_kernel", noisy_samples(base_ms, 80, 2)},
               {"aa_kernel", noisy_samples(base_ms, 80, 3)},
               {"reference_kernel", noisy_samples(base_ms * 3, 80, 4)},
               {"candidate_wrapper", noisy_samples(cand_ms + 0.004, 80, 5)}}},
             {"batches", {{{"first_round", 0}, {"last_round", 7}, {"throttled", true}}}},
             {"output_checks", {{{"round", 3}, {"pass", true}}}}}}}};
}

// The whole "benchmark" member: an H200 (60 MiB L2) with its measured copy ceiling (1 GiB in
// 0.510 ms, DEVICE.md) and `shapes`.
inline nlohmann::json synthetic_bench_result(nlohmann::json shapes) {
  return {{"device", {{"name", "NVIDIA H200"}, {"l2_bytes", 60LL << 20}}},
          {"copy_ceiling", {{"bytes", 1LL << 30}, {"time_ms", 0.510}}},
          {"shapes", std::move(shapes)}};
}

} // namespace kloop::test_support
