// row_softmax/1 on the device, through the real GPU worker and the correctness core: the trusted
// GPU reference kernel against the float64 CPU reference on the public and invalid suites; the
// in-tree baseline on the public suite with the device audit (poison, guards, input bytes,
// repeats, concurrent streams) and on the large calls (more than 65535 rows, the target shape
// 16384 x 32768 bfloat16, and a bfloat16 call past 2^31 elements); every offline-family member
// the build compiles (tests/gpu/CMakeLists.txt, KLOOP_SOFTMAX_GPU_LIST) on the public suite.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/softmax/cases.h"
#include "kernels/softmax/contract.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/offline/variant_param_name.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;
namespace fs = std::filesystem;

fs::path corpus_bin() {
  const char* env = std::getenv("KLOOP_CORPUS_BIN");
  return env ? env : KLOOP_CORPUS_BIN;
}

const std::string kSoftmax = softmax::contract_id();

TreeCandidate baseline() {
  return load_candidate(fs::path(KLOOP_SOURCE_DIR) / "kernels/softmax/baseline", "softmax/");
}

TEST(GpuSoftmaxTest, ReferenceKernelMatchesTheCpuReferenceOnThePublicSuite) {
  const auto r = run_correctness(nullptr, {{"suite", "public"}, {"seed", 1}},
                                 std::chrono::seconds(240), nlohmann::json::object(), kSoftmax);
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  const auto& counts = r.result.at("path_counts");
  EXPECT_EQ(counts.at("candidate"), 0);
  EXPECT_GT(counts.at("reference").get<int>(), 0);
  EXPECT_GT(counts.at("no_launch").get<int>(), 0); // empty batches and N = 0
  EXPECT_GT(r.result.at("suite").at("passed").get<int>(), 300);
}

TEST(GpuSoftmaxTest, InvalidInputsRaiseTheDeclaredErrorBeforeAnyLaunch) {
  const auto r = run_correctness(nullptr, {{"suite", "invalid"}, {"seed", 1}},
                                 std::chrono::seconds(60), nlohmann::json::object(), kSoftmax);
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_EQ(r.result.at("path_counts").at("candidate"), 0);
  EXPECT_EQ(r.result.at("path_counts").at("reference"), 0);
}

TEST(GpuSoftmaxTest, BaselinePassesThePublicSuiteWithTheDeviceAudit) {
  const TreeCandidate c = baseline();
  ASSERT_FALSE(c.cubin.empty());
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 7}}, std::chrono::seconds(300));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  const auto& ev = r.result.at("evidence");
  EXPECT_GT(ev.at("path_counts").at("candidate").get<int>(), 300);
  EXPECT_GT(ev.at("path_counts").at("reference").get<int>(), 0); // transposed views
  bool transposed_routed = false;
  for (const auto& why : ev.at("reference_reasons")) {
    const std::string s = why.get<std::string>();
    transposed_routed = transposed_routed || s.find("last-dimension stride") != std::string::npos;
    EXPECT_EQ(s.find("alignment_bytes"), std::string::npos) << s; // 2: no view routed for it
  }
  EXPECT_TRUE(transposed_routed) << ev.dump();
}

// More than 65535 rows (narrow, N = 1 and transposed), float32 past 2^31 bytes and the target
// shape: every one the baseline's but the transposed, which go to the reference.
TEST(GpuSoftmaxTest, BaselinePassesTheLargeCalls) {
  nlohmann::json cases = nlohmann::json::array();
  for (const softmax::CaseSpec& s : softmax::large_cases(3))
    if (s.name.find("past-2e31") == std::string::npos) cases.push_back(s.to_json());
  ASSERT_GE(cases.size(), 10u);
  const TreeCandidate c = baseline();
  const auto r = run_correctness(&c, cases, std::chrono::seconds(420), {{"concurrency", false}});
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_GT(r.result.at("path_counts").at("candidate").get<int>(), 0);
  EXPECT_GT(r.result.at("path_counts").at("reference").get<int>(), 0); // transposed ones
  EXPECT_EQ(r.result.at("suite").at("passed").get<std::size_t>(), cases.size());
}

// A bfloat16 call of 65537 x 32768 (2^31 + 32768 elements, 4 GiB in and out): 64-bit row
// offsets. About two minutes of host work (materialising, the float64 reference, the audit).
TEST(GpuSoftmaxTest, BaselinePassesABfloat16CallPastTwoToTheThirtyOneElements) {
  nlohmann::json cases = nlohmann::json::array();
  for (const softmax::CaseSpec& s : softmax::large_cases(3))
    if (s.name.find("past-2e31") != std::string::npos && s.dtype == DType::kBFloat16)
      cases.push_back(s.to_json());
  ASSERT_EQ(cases.size(), 1u);
  const TreeCandidate c = baseline();
  const auto r = run_correctness(&c, cases, std::chrono::seconds(540),
                                 {{"concurrency", false}, {"repeats", 1}});
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_EQ(r.result.at("path_counts").value("reference", 0), 0) << r.result.dump();
}

std::vector<std::string> family_members() {
  std::vector<std::string> out;
  std::stringstream list(KLOOP_SOFTMAX_GPU_LIST);
  for (std::string name; std::getline(list, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

class GpuSoftmaxFamilyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuSoftmaxFamilyTest, PassesThePublicSuite) {
  const TreeCandidate c = load_candidate(corpus_bin() / "softmax" / GetParam(), "softmax/");
  ASSERT_FALSE(c.cubin.empty()) << "no cubin for " << GetParam();
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 7}}, std::chrono::seconds(300));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  EXPECT_GT(r.result.at("evidence").at("path_counts").at("candidate").get<int>(), 300);
}

INSTANTIATE_TEST_SUITE_P(Members, GpuSoftmaxFamilyTest, ::testing::ValuesIn(family_members()),
                         kloop::test_support::variant_param_name);

} // namespace
} // namespace kloop::gputest
