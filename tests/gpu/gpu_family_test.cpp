// Offline-family variants whose options change the emitted row loop pass the full device
// correctness gate: the public suite (all dtypes, views, values, with the device audit: poison,
// guards, input bytes, repeats, concurrent streams) plus four larger calls: two over the 64 MiB
// store-hint threshold (-ps writes back there; a peeled bf16 one with an odd width and an aligned
// float32 one) and two with rows of 126-127 full vectors and enough rows that warp rows (-wr) give
// each row one warp (bf16 32768 x 1009, float32 8192 x 509; the public suite's rows at those widths
// are too few: the run-time rule widens them again). The variants (tests/gpu/CMakeLists.txt) cover
// software prefetch (-pf), the store hint, warp rows, evict-first loads and composites (-bl), alone
// and combined; their cubins are built by nvcc from family_emit's output.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/cases.h"
#include "tests/gpu/family_cases.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/offline/variant_param_name.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

class GpuFamilyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuFamilyTest, PassesThePublicSuiteAndCallsLargerThanL2) {
  const char* env = std::getenv("KLOOP_CORPUS_BIN");
  const TreeCandidate c =
      load_candidate(std::filesystem::path(env ? env : KLOOP_CORPUS_BIN) / GetParam());
  ASSERT_FALSE(c.cubin.empty()) << "no cubin for " << GetParam();
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 7}}, std::chrono::seconds(300));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_GT(r.result.at("evidence").at("path_counts").at("candidate").get<int>(), 0);

  // Their sizes and routes are checked on the CPU (gpu_artifacts_cpu_test).
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& s : family_large_calls())
    cases.push_back(s.to_json());
  const auto big = run_correctness(&c, cases, std::chrono::seconds(240), {{"concurrency", false}});
  ASSERT_EQ(big.status, GateStatus::kPass) << describe(big);
  EXPECT_EQ(big.result.at("suite").at("passed").get<std::size_t>(), 4u);
  // Every call ran the candidate (the gate counts its repeat calls too), none went to the
  // reference.
  EXPECT_GE(big.result.at("path_counts").at("candidate").get<int>(), 4);
  EXPECT_EQ(big.result.at("path_counts").value("reference", 0), 0) << big.result.dump();
}

INSTANTIATE_TEST_SUITE_P(Options, GpuFamilyTest, ::testing::ValuesIn(family_variants()),
                         kloop::test_support::variant_param_name);

} // namespace
} // namespace kloop::gputest
