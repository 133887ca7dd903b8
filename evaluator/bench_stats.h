// Benchmark statistics: the numbers behind the benchmark gate's speed decision, kept free of CUDA
// so that they are unit-tested on the CPU. Samples are per-call times in milliseconds (one
// completed call each, never batch averages). The stopping rule is nvbench's idea (STYLE.md,
// "Measurement"): stop when the median is known precisely enough, not after a fixed count. The
// speed decision compares the candidate's paired ratio against the baseline (A-B-B-A rounds) with
// a bootstrap interval from a fixed-seed PRNG, and requires a claimed speed-up to clear the noise
// floor measured by an A/A run (the baseline against a second, separately loaded copy of its own
// cubin, so the floor includes what separately loaded code varies by).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::evaluator::bench {

// Default bootstrap seed: every decision is reproducible from the raw samples.
inline constexpr std::uint64_t kBootstrapSeed = 0x6b6c6f6f70ULL; // "kloop"
inline constexpr int kBootstrapResamples = 2000;

// Median of `samples` (mean of the two middle values for even counts). Throws
// std::invalid_argument when empty.
double median(std::span<const double> samples);

// Value at quantile q in [0, 1] with linear interpolation between order statistics (numpy's
// default). Throws std::invalid_argument when empty or q is out of range.
double quantile(std::span<const double> samples, double q);

struct Interval {
  double lo = 0;
  double hi = 0;
  nlohmann::json to_json() const; // {"lo","hi"}
};

// Distribution-free 95% confidence interval of the median from order statistics (normal
// approximation to the binomial: ranks n/2 -+ 1.96*sqrt(n)/2, clamped to the sample). Cheap enough
// to evaluate after every sample in the worker's loop. Throws std::invalid_argument when empty.
Interval median_ci95(std::span<const double> samples);

// Half-width of median_ci95 divided by the median; +infinity for fewer than `min_samples` samples
// or a non-positive median.
double relative_half_width(std::span<const double> samples, std::size_t min_samples = 10);

// The stopping rule: relative_half_width < target (default 1%), with at least `min_samples`.
bool noise_converged(std::span<const double> samples, double target = 0.01,
                     std::size_t min_samples = 10);

// Percentile bootstrap interval of the median of `values` at `level` (e.g. 0.95), `resamples`
// resamples drawn with std::mt19937_64 seeded with `seed`. Same inputs, same interval. Throws
// std::invalid_argument when `values` is empty or level is not in (0, 1).
Interval bootstrap_median_ci(std::span<const double> values, double level = 0.95,
                             int resamples = kBootstrapResamples,
                             std::uint64_t seed = kBootstrapSeed);

// Per-round ratios of an interleaved A-B-B-A run. Round i contributes
//   ratio_i = (b[2i] + b[2i+1]) / (a[2i] + a[2i+1])
// where `a` are the two samples of the measured path in round i and `b` the two of the baseline.
// ratio < 1 means `a` is faster. Throws std::invalid_argument when the sizes differ, are odd, are
// zero, or a time is not positive (a non-positive event time is a measurement defect).
std::vector<double> abba_round_ratios(std::span<const double> a, std::span<const double> b);

// Median time ratio (candidate / baseline) with its bootstrap interval.
struct PairedRatio {
  double ratio = 0; // median of per-round ratios; < 1: candidate faster
  Interval ci;      // bootstrap interval of the median
  std::size_t rounds = 0;
  nlohmann::json to_json() const; // {"ratio","ci":{lo,hi},"rounds","speedup"} speedup=1/ratio
};
PairedRatio paired_ratio(std::span<const double> candidate, std::span<const double> baseline,
                         std::uint64_t seed = kBootstrapSeed);

// Noise floor from an A/A run: how far the A/A ratio interval reaches from 1,
// max(1 - ci.lo, ci.hi - 1, |ratio - 1|), never negative.
double noise_floor(const PairedRatio& aa);

// Geometric mean of the speed-ups (1 / ratio) of several paired ratios, one per shape/state of a
// sweep, with an approximate 95 % interval: each state's bootstrap interval is read as a normal
// error on the log scale (sigma_i = ln(ci.hi / ci.lo) / (2 * 1.96)), the states' errors as
// independent, so the log of the geometric mean has standard error sqrt(sum sigma_i^2) / n (delta
// method). It describes measurement noise for this fixed set of states, not variation over
// shapes. Throws std::invalid_argument when `ratios` is empty or a ratio or bound is not positive.
struct GeomeanSpeedup {
  double speedup = 0; // exp(mean ln(1 / ratio_i)); > 1: the candidate is faster
  Interval ci;        // in speed-up units (lo <= speedup <= hi)
};
GeomeanSpeedup geomean_speedup(std::span<const PairedRatio> ratios);

// The four timed kernel paths of a benchmark round.
enum class SlotPath { kCandidate, kBaseline, kReference, kAaPartner };
std::string_view slot_path_key(SlotPath p); // "candidate_kernel", ..., "aa_kernel"

// Number of distinct kernel-slot orders; a balanced run has a multiple of this many rounds.
inline constexpr int kSlotOrders = 6;

// The eight kernel slots of round `round` (>= 0): X Y R Z Z R Y X, R the trusted reference and
// (X, Y, Z) permutation `round % 6` of (candidate, baseline, A/A partner) in lexicographic order.
// Each path sits in a mirrored pair of positions ({0,7}, {1,6} or {3,4}), and in any six
// consecutive rounds each of the three takes each pair in exactly two rounds, so a position's
// bias (up to 9 % warm on the H200, docs/RESULTS.md seventh session) weighs on the candidate, the
// baseline and the A/A partner alike. Throws std::invalid_argument for a negative round.
std::array<SlotPath, 8> kernel_slot_order(int round);

// Whether a state's speed decision is settled, for the benchmark's optional early stop (issue 26,
// protocol "stop_rule": "decision"): the gate's own decision (decide_speed of the paired ratio
// against the A/A floor) made from the cheap order-statistics interval (median_ci95) of the
// per-round ratios, and only where it holds with a margin: faster (slower) when the interval
// lies below 1 - 1.5 floor (above 1 + 1.5 floor); indistinguishable when it lies within
// 1 -+ floor / 2 and the A/A ratios' own interval is narrower than floor / 2 on each side (the
// floor then cannot shrink enough to change the decision). Samples are per-call times, two per
// round per path (abba_round_ratios); fewer than `min_rounds` whole rounds of each series, or a
// non-positive time, is never settled.
bool decision_settled(std::span<const double> candidate, std::span<const double> baseline,
                      std::span<const double> aa, std::size_t min_rounds);

enum class SpeedDecision { kFaster, kSlower, kIndistinguishable };
std::string_view speed_decision_name(SpeedDecision d); // "faster", "slower", "indistinguishable"

// Faster only when the whole candidate interval lies below 1 - floor; slower only when it lies
// above 1 + floor; otherwise indistinguishable. `floor` comes from noise_floor() of the A/A run.
SpeedDecision decide_speed(const PairedRatio& candidate_vs_baseline, double floor);

} // namespace kloop::evaluator::bench
