// Unit tests of evaluator/bench_stats: medians, intervals, the stopping rule, paired A-B-B-A
// ratios with a deterministic bootstrap, the A/A noise floor and the speed decision.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "evaluator/bench_stats.h"

namespace kloop::evaluator::bench {
namespace {

std::vector<double> noisy(double center, double rel_sd, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(center, center * rel_sd);
  std::vector<double> v;
  for (int i = 0; i < n; ++i)
    v.push_back(d(rng));
  return v;
}

TEST(BenchStatsTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_THROW(median(std::vector<double>{}), std::invalid_argument);
}

TEST(BenchStatsTest, QuantileInterpolatesLikeNumpy) {
  const std::vector<double> v{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4);
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);
  EXPECT_THROW(quantile(v, 1.5), std::invalid_argument);
}

TEST(BenchStatsTest, MedianIntervalContainsMedianAndShrinksWithMoreSamples) {
  const auto few = noisy(1.0, 0.05, 20, 1);
  const auto many = noisy(1.0, 0.05, 2000, 1);
  const Interval a = median_ci95(few), b = median_ci95(many);
  EXPECT_LE(a.lo, median(few));
  EXPECT_GE(a.hi, median(few));
  EXPECT_LT(b.hi - b.lo, a.hi - a.lo);
}

TEST(BenchStatsTest, StoppingRuleNeedsMinimumSamplesAndLowNoise) {
  EXPECT_FALSE(noise_converged(std::vector<double>{1, 1, 1})); // below min_samples
  EXPECT_TRUE(std::isinf(relative_half_width(std::vector<double>{1, 1, 1})));
  EXPECT_TRUE(noise_converged(noisy(1.0, 0.01, 400, 2)));
  EXPECT_FALSE(noise_converged(noisy(1.0, 0.30, 40, 3)));
}

TEST(BenchStatsTest, BootstrapIsDeterministicForAFixedSeed) {
  const auto v = noisy(2.0, 0.1, 50, 4);
  const Interval a = bootstrap_median_ci(v, 0.95, 500, 7);
  const Interval b = bootstrap_median_ci(v, 0.95, 500, 7);
  const Interval c = bootstrap_median_ci(v, 0.95, 500, 8);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_TRUE(a.lo != c.lo || a.hi != c.hi);
  EXPECT_LE(a.lo, median(v));
  EXPECT_GE(a.hi, median(v));
  EXPECT_THROW(bootstrap_median_ci(v, 1.0), std::invalid_argument);
}

TEST(BenchStatsTest, AbbaRoundRatioPairsTwoSamplesOfEachPath) {
  // Round 0: a = 1 + 3, b = 2 + 6 -> 0.5; round 1: a = 2 + 2, b = 2 + 2 -> 1.
  const auto r =
      abba_round_ratios(std::vector<double>{1, 3, 2, 2}, std::vector<double>{2, 6, 2, 2});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 0.5);
  EXPECT_DOUBLE_EQ(r[1], 1.0);
  EXPECT_THROW(abba_round_ratios(std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 3}),
               std::invalid_argument);
  EXPECT_THROW(abba_round_ratios(std::vector<double>{1, 0}, std::vector<double>{1, 1}),
               std::invalid_argument);
}

TEST(BenchStatsTest, ClearSpeedupIsFasterAndAaRunIsIndistinguishable) {
  const auto base = noisy(1.0, 0.01, 200, 10);
  const auto cand = noisy(0.8, 0.01, 200, 11);
  const auto aa = noisy(1.0, 0.01, 200, 12);
  const PairedRatio faster = paired_ratio(cand, base);
  const PairedRatio same = paired_ratio(aa, base);
  EXPECT_NEAR(faster.ratio, 0.8, 0.02);
  EXPECT_NEAR(same.ratio, 1.0, 0.02);
  const double floor = noise_floor(same);
  EXPECT_GE(floor, 0.0);
  EXPECT_LT(floor, 0.05);
  EXPECT_EQ(decide_speed(faster, floor), SpeedDecision::kFaster);
  EXPECT_EQ(decide_speed(same, floor), SpeedDecision::kIndistinguishable);
  EXPECT_EQ(decide_speed(paired_ratio(base, cand), floor), SpeedDecision::kSlower);
}

TEST(BenchStatsTest, GeomeanSpeedupPropagatesTheStatesIntervalsOnTheLogScale) {
  // Exact ratios: speed-ups 2 and 0.5 have geometric mean 1 and a zero-width interval.
  const std::vector<PairedRatio> exact{{0.5, {0.5, 0.5}, 10}, {2.0, {2.0, 2.0}, 10}};
  const GeomeanSpeedup e = geomean_speedup(exact);
  EXPECT_DOUBLE_EQ(e.speedup, 1.0);
  EXPECT_DOUBLE_EQ(e.ci.lo, 1.0);
  EXPECT_DOUBLE_EQ(e.ci.hi, 1.0);
  // Two states at ratio 0.8 with the interval [0.78, 0.82]: sigma = ln(0.82/0.78) / 3.92 each,
  // half-width of the mean of logs = 1.96 * sqrt(2) * sigma / 2.
  const PairedRatio r{0.8, {0.78, 0.82}, 40};
  const std::vector<PairedRatio> two{r, r};
  const GeomeanSpeedup g2 = geomean_speedup(two);
  const double sigma = std::log(0.82 / 0.78) / (2 * 1.959963984540054);
  const double half2 = 1.959963984540054 * std::sqrt(2.0) * sigma / 2;
  EXPECT_NEAR(g2.speedup, 1.25, 1e-12);
  EXPECT_NEAR(g2.ci.lo, 1.25 * std::exp(-half2), 1e-12);
  EXPECT_NEAR(g2.ci.hi, 1.25 * std::exp(half2), 1e-12);
  // Eight such states: the interval narrows by sqrt(8 / 2) = 2 on the log scale.
  const std::vector<PairedRatio> eight(8, r);
  const GeomeanSpeedup g8 = geomean_speedup(eight);
  EXPECT_NEAR(std::log(g8.ci.hi / g8.speedup), half2 / 2, 1e-12);
  EXPECT_THROW(geomean_speedup(std::vector<PairedRatio>{}), std::invalid_argument);
  EXPECT_THROW(geomean_speedup(std::vector<PairedRatio>{{0.8, {0.0, 0.9}, 4}}),
               std::invalid_argument);
}

TEST(BenchStatsTest, SpeedupInsideTheNoiseFloorIsNotClaimed) {
  // A 1% gain measured with an A/A floor of 3% must not count as faster.
  PairedRatio r{0.99, {0.985, 0.995}, 50};
  EXPECT_EQ(decide_speed(r, 0.0), SpeedDecision::kFaster);
  EXPECT_EQ(decide_speed(r, 0.03), SpeedDecision::kIndistinguishable);
  PairedRatio aa{1.01, {0.97, 1.03}, 50};
  EXPECT_NEAR(noise_floor(aa), 0.03, 1e-12);
}

} // namespace
} // namespace kloop::evaluator::bench
