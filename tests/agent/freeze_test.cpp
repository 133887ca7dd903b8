// The freeze order (loop.h, FreezeKey): a candidate whose public benchmark already meets the
// promotion rule is frozen before a faster-on-average one that is slower somewhere; ties go to the
// higher speed-up, the simpler dispatch domain, the earlier iteration.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "agent/loop.h"
#include "agent/loop_record.h"

namespace kloop::agent {
namespace {

TEST(FreezeOrder, ACandidateThatClearsTheFloorIsFrozenBeforeAFasterOneWithRegressions) {
  // H200 run of 2026-11-29 (docs/RESULTS.md): iteration 4 had geomean 1.111x but three states
  // slower than the baseline beyond the A/A floor; iteration 5 had 1.102x and none slower.
  const FreezeKey regresses{false, 1.111, 0, 3};
  const FreezeKey clean{true, 1.102, 0, 4};
  EXPECT_TRUE(freezes_before(clean, regresses));
  EXPECT_FALSE(freezes_before(regresses, clean));
}

TEST(FreezeOrder, AmongEquallyEligibleCandidatesSpeedThenDomainThenIterationDecide) {
  std::vector<FreezeKey> keys = {{true, 1.05, 0, 0},
                                 {true, 1.20, 2, 1},
                                 {true, 1.20, 0, 2},
                                 {true, 1.20, 0, 3},
                                 {false, 2.00, 0, 4}};
  std::sort(keys.begin(), keys.end(), freezes_before);
  EXPECT_EQ(keys[0].iteration, 2); // 1.20x, unrestricted domain, earliest
  EXPECT_EQ(keys[1].iteration, 3);
  EXPECT_EQ(keys[2].iteration, 1); // 1.20x but a restricted domain
  EXPECT_EQ(keys[3].iteration, 0);
  EXPECT_EQ(keys[4].iteration, 4); // fastest, but slower than the baseline somewhere
}

TEST(FreezeOrder, ClearsNoiseFloorReadsTheBenchmarkSummary) {
  evaluator::PublicReport r;
  EXPECT_FALSE(clears_noise_floor(r)); // no benchmark gate
  evaluator::GateResult g{"benchmark", evaluator::GateStatus::kPass, "", nlohmann::json::object()};
  g.evidence["summary"] = {{"geomean_speedup_vs_baseline", 1.1}, {"clears_noise_floor", false}};
  r.gates.push_back(g);
  EXPECT_FALSE(clears_noise_floor(r));
  r.gates.back().evidence["summary"]["clears_noise_floor"] = true;
  EXPECT_TRUE(clears_noise_floor(r));
  r.gates.back().evidence["summary"]["clears_noise_floor"] = "yes"; // wrong type: not clearing
  EXPECT_FALSE(clears_noise_floor(r));
}

} // namespace
} // namespace kloop::agent
