// Offline-family variants whose options change the emitted row loop pass the full device
// correctness gate: the public suite (all dtypes, views, values, with the device audit: poison,
// guards, input bytes, repeats, concurrent streams) plus two calls larger than L2, where the
// per-call store hint (-ps) switches to write-back stores (x over 64 MiB: a peeled bf16 one with
// an odd width and an aligned float32 one). The variants (tests/gpu/CMakeLists.txt) cover software
// prefetch (-pf), the store hint, warp rows (-wr), evict-first loads and composites (-bl), alone
// and combined; their cubins are built by nvcc from family_emit's output.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/cases.h"
#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

std::vector<std::string> family_variants() {
  std::vector<std::string> out;
  std::stringstream in(KLOOP_GPU_FAMILY_LIST);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

// A call whose x is larger than the store hint's 64 MiB threshold.
rmsnorm::CaseSpec large_call(DType dtype, std::int64_t rows, std::int64_t h) {
  rmsnorm::CaseSpec s;
  s.name = "family-large-" + std::to_string(rows) + "x" + std::to_string(h);
  s.family = "family";
  s.dtype = dtype;
  s.outer = {rows};
  s.h = h;
  s.seed = 11;
  return s;
}

class GpuFamilyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuFamilyTest, PassesThePublicSuiteAndCallsLargerThanL2) {
  const char* env = std::getenv("KLOOP_CORPUS_BIN");
  const TreeCandidate c =
      load_candidate(std::filesystem::path(env ? env : KLOOP_CORPUS_BIN) / GetParam());
  ASSERT_FALSE(c.cubin.empty()) << "no cubin for " << GetParam();
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 7}}, std::chrono::seconds(300));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_GT(r.result.at("evidence").at("path_counts").at("candidate").get<int>(), 0);

  const rmsnorm::CaseSpec bf16 = large_call(DType::kBFloat16, 8200, 4100);
  const rmsnorm::CaseSpec f32 = large_call(DType::kFloat32, 4200, 4096);
  for (const auto& s : {bf16, f32})
    ASSERT_GT(s.numel() * (s.dtype == DType::kFloat32 ? 4 : 2), 64LL << 20) << s.name;
  const nlohmann::json cases = nlohmann::json::array({bf16.to_json(), f32.to_json()});
  const auto big = run_correctness(&c, cases, std::chrono::seconds(200), {{"concurrency", false}});
  ASSERT_EQ(big.status, GateStatus::kPass) << describe(big);
  EXPECT_EQ(big.result.at("suite").at("passed").get<std::size_t>(), 2u);
  // Both calls ran the candidate (the gate counts its repeat calls too), none went to the
  // reference.
  EXPECT_GE(big.result.at("path_counts").at("candidate").get<int>(), 2);
  EXPECT_EQ(big.result.at("path_counts").value("reference", 0), 0) << big.result.dump();
}

INSTANTIATE_TEST_SUITE_P(Options, GpuFamilyTest, ::testing::ValuesIn(family_variants()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

} // namespace
} // namespace kloop::gputest
