// The correctness gate's variant coverage (issue 25, candidate format 2): every manifest variant
// must have served at least one public case; the worker reports the launches per variant in
// path_counts.per_variant, which these fixtures build with the worker's own op::PathCounts.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "evaluator/device_gates.h"
#include "kernels/dispatch.h"
#include "kernels/registry.h"

namespace kloop::evaluator {
namespace {

const char* kTwoVariants = R"({
  "contract": "weighted_rmsnorm/1", "format": 2, "target": "sm_90",
  "variants": [
    {"name": "wide", "when": {"h_multiple_of": 8, "alignment_bytes": 16},
     "entry_points": {"bfloat16": "wide_bf16"},
     "launch": {"block_threads": 512, "rows_per_block": 1, "grid": "per_rows",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}},
    {"name": "scalar", "when": {"alignment_bytes": 2},
     "entry_points": {"bfloat16": "s_bf16"},
     "launch": {"block_threads": 128, "rows_per_block": 1, "grid": "per_rows",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}}]})";

// A worker result whose suite launched `launches` (route, variant) pairs.
GpuRunResult batch(const std::vector<std::pair<op::Route, int>>& launches) {
  op::PathCounts counts;
  for (const auto& [route, variant] : launches)
    counts.add(route, variant);
  GpuRunResult r;
  r.status = GateStatus::kPass;
  r.result = {{"status", "pass"}, {"path_counts", counts.to_json()}};
  return r;
}

const op::Operator& rmsnorm() {
  return *op::find_operator("rmsnorm");
}

TEST(VariantCoverageTest, EveryVariantLaunchedByAPublicCasePasses) {
  const auto both = batch({{op::Route::kCandidate, 0}, {op::Route::kCandidate, 1}});
  EXPECT_TRUE(unlaunched_variants(rmsnorm(), kTwoVariants, {both}).empty());
  // Launches add up over the public and large batches.
  const auto first = batch({{op::Route::kCandidate, 0}, {op::Route::kReference, -1}});
  const auto second = batch({{op::Route::kCandidate, 1}});
  EXPECT_TRUE(unlaunched_variants(rmsnorm(), kTwoVariants, {first, second}).empty());
}

TEST(VariantCoverageTest, AVariantNoPublicCaseLaunchedIsNamed) {
  const auto only_wide = batch({{op::Route::kCandidate, 0}, {op::Route::kReference, -1}});
  EXPECT_EQ(unlaunched_variants(rmsnorm(), kTwoVariants, {only_wide}),
            std::vector<std::string>{"variant 1 (scalar)"});
  const auto reference_only = batch({{op::Route::kReference, -1}, {op::Route::kNoLaunch, -1}});
  EXPECT_EQ(unlaunched_variants(rmsnorm(), kTwoVariants, {reference_only}),
            (std::vector<std::string>{"variant 0 (wide)", "variant 1 (scalar)"}));
}

TEST(VariantCoverageTest, AFormatOneManifestIsOneVariant) {
  const std::string f1 = R"({"contract": "weighted_rmsnorm/1", "target": "sm_90",
    "entry_points": {"bfloat16": "k"},
    "launch": {"block_threads": 256, "rows_per_block": 1, "grid": "per_rows",
               "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}},
    "dispatch": {"h_min": 1, "h_max": 65536, "h_multiple_of": 1, "x_rows": "any_stride",
                 "alignment_bytes": 2}})";
  EXPECT_TRUE(unlaunched_variants(rmsnorm(), f1, {batch({{op::Route::kCandidate, 0}})}).empty());
  EXPECT_EQ(unlaunched_variants(rmsnorm(), f1, {batch({{op::Route::kReference, -1}})}),
            std::vector<std::string>{"variant 0 (default)"});
  // A result without path counts (a crashed batch) launched nothing that can be counted.
  GpuRunResult crashed;
  crashed.result = {{"status", "crashed"}};
  EXPECT_EQ(unlaunched_variants(rmsnorm(), f1, {crashed}).size(), 1u);
  EXPECT_TRUE(unlaunched_variants(rmsnorm(), "not json", {crashed}).empty());
}

} // namespace
} // namespace kloop::evaluator
