// Candidate format 2 on the device (issue 25): the in-tree baseline's cubin under a manifest of
// two variants (a persistent launch for H a multiple of 8, a per-rows launch of 128 threads for
// every other width) through the real GPU worker on the public suite. The worker must launch the
// variant the dispatch chooses for each case, record it per case, count launches per variant,
// and pass the device audit with either launch rule.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.h"

namespace kloop::gputest {
namespace {

using evaluator::GateStatus;

const char* kTwoVariants = R"({
  "contract": "weighted_rmsnorm/1", "format": 2, "target": "sm_90",
  "variants": [
    {"name": "wide", "when": {"h_multiple_of": 8, "alignment_bytes": 2},
     "entry_points": {"float32": "rms_f32", "float16": "rms_f16", "bfloat16": "rms_bf16"},
     "launch": {"block_threads": 256, "rows_per_block": 1, "grid": "persistent",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}},
    {"name": "narrow", "when": {"alignment_bytes": 2},
     "entry_points": {"float32": "rms_f32", "float16": "rms_f16", "bfloat16": "rms_bf16"},
     "launch": {"block_threads": 128, "rows_per_block": 1, "grid": "per_rows",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}}]})";

TEST(GpuVariantsTest, EachCaseRunsTheVariantTheDispatchChooses) {
  TreeCandidate c = load_candidate(tree("baseline"));
  c.manifest_text = kTwoVariants;
  const auto r = run_correctness(&c, {{"suite", "public"}, {"seed", 7}}, std::chrono::seconds(240));
  ASSERT_EQ(r.status, GateStatus::kPass) << describe(r);
  const auto& counts = r.result.at("evidence").at("path_counts");
  ASSERT_TRUE(counts.contains("per_variant")) << counts.dump();
  ASSERT_EQ(counts.at("per_variant").size(), 2u) << counts.dump();
  EXPECT_GT(counts.at("per_variant")[0].get<int>(), 0) << counts.dump();
  EXPECT_GT(counts.at("per_variant")[1].get<int>(), 0) << counts.dump();
  int checked = 0;
  for (const auto& one : r.result.at("suite").at("cases")) {
    if (one.value("route", std::string()) != "candidate") continue;
    const std::int64_t h = one.at("spec").at("h").get<std::int64_t>();
    EXPECT_EQ(one.at("variant").get<int>(), h % 8 == 0 ? 0 : 1) << one.dump();
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

} // namespace
} // namespace kloop::gputest
