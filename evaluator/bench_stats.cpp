// Benchmark statistics (bench_stats.h).
#include "evaluator/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace kloop::evaluator::bench {

namespace {

std::vector<double> sorted_copy(std::span<const double> samples, const char* what) {
  if (samples.empty()) {
    throw std::invalid_argument(std::string(what) + ": no samples; pass at least one time");
  }
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  return v;
}

double median_of_sorted(const std::vector<double>& v) {
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

nlohmann::json Interval::to_json() const {
  return {{"lo", lo}, {"hi", hi}};
}

double median(std::span<const double> samples) {
  return median_of_sorted(sorted_copy(samples, "median"));
}

double quantile(std::span<const double> samples, double q) {
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("quantile: q must be in [0, 1]");
  const auto v = sorted_copy(samples, "quantile");
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

Interval median_ci95(std::span<const double> samples) {
  const auto v = sorted_copy(samples, "median_ci95");
  const double n = static_cast<double>(v.size());
  const double half = 1.96 * std::sqrt(n) / 2.0;
  // 1-based ranks j = floor(n/2 - half), k = ceil(n/2 + half) + 1 (Conover), clamped.
  const double j = std::floor(n / 2.0 - half);
  const double k = std::ceil(n / 2.0 + half) + 1.0;
  const auto lo_idx = static_cast<std::size_t>(std::clamp(j, 1.0, n)) - 1;
  const auto hi_idx = static_cast<std::size_t>(std::clamp(k, 1.0, n)) - 1;
  return {v[lo_idx], v[hi_idx]};
}

double relative_half_width(std::span<const double> samples, std::size_t min_samples) {
  if (samples.size() < std::max<std::size_t>(min_samples, 1)) {
    return std::numeric_limits<double>::infinity();
  }
  const double m = median(samples);
  if (!(m > 0)) return std::numeric_limits<double>::infinity();
  const Interval ci = median_ci95(samples);
  return (ci.hi - ci.lo) / 2.0 / m;
}

bool noise_converged(std::span<const double> samples, double target, std::size_t min_samples) {
  return relative_half_width(samples, min_samples) < target;
}

Interval bootstrap_median_ci(std::span<const double> values, double level, int resamples,
                             std::uint64_t seed) {
  if (values.empty()) throw std::invalid_argument("bootstrap_median_ci: no values");
  if (!(level > 0 && level < 1)) {
    throw std::invalid_argument("bootstrap_median_ci: level must be in (0, 1), e.g. 0.95");
  }
  if (resamples < 1) throw std::invalid_argument("bootstrap_median_ci: resamples must be >= 1");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  std::vector<double> medians;
  medians.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> draw(values.size());
  for (int r = 0; r < resamples; ++r) {
    for (auto& d : draw)
      d = values[pick(rng)];
    std::sort(draw.begin(), draw.end());
    medians.push_back(median_of_sorted(draw));
  }
  const double tail = (1.0 - level) / 2.0;
  return {quantile(medians, tail), quantile(medians, 1.0 - tail)};
}

std::vector<double> abba_round_ratios(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size() || a.empty() || a.size() % 2 != 0) {
    throw std::invalid_argument(
        "abba_round_ratios: need equal, even, non-zero sample counts (two of each path per "
        "A-B-B-A round)");
  }
  std::vector<double> ratios;
  ratios.reserve(a.size() / 2);
  for (std::size_t i = 0; i < a.size(); i += 2) {
    if (!(a[i] > 0 && a[i + 1] > 0 && b[i] > 0 && b[i + 1] > 0)) {
      throw std::invalid_argument("abba_round_ratios: a time is not positive (event defect)");
    }
    ratios.push_back((a[i] + a[i + 1]) / (b[i] + b[i + 1]));
  }
  return ratios;
}

nlohmann::json PairedRatio::to_json() const {
  return {{"ratio", ratio}, {"ci", ci.to_json()}, {"rounds", rounds}, {"speedup", 1.0 / ratio}};
}

PairedRatio paired_ratio(std::span<const double> candidate, std::span<const double> baseline,
                         std::uint64_t seed) {
  const auto ratios = abba_round_ratios(candidate, baseline);
  PairedRatio out;
  out.ratio = median(ratios);
  out.ci = bootstrap_median_ci(ratios, 0.95, kBootstrapResamples, seed);
  out.rounds = ratios.size();
  return out;
}

double noise_floor(const PairedRatio& aa) {
  return std::max({0.0, 1.0 - aa.ci.lo, aa.ci.hi - 1.0, std::abs(aa.ratio - 1.0)});
}

std::string_view speed_decision_name(SpeedDecision d) {
  switch (d) {
  case SpeedDecision::kFaster:
    return "faster";
  case SpeedDecision::kSlower:
    return "slower";
  case SpeedDecision::kIndistinguishable:
    return "indistinguishable";
  }
  return "indistinguishable";
}

GeomeanSpeedup geomean_speedup(std::span<const PairedRatio> ratios) {
  if (ratios.empty()) throw std::invalid_argument("geomean_speedup: no paired ratios");
  constexpr double kZ95 = 1.959963984540054; // two-sided 95 % normal quantile
  double log_sum = 0, var_sum = 0;
  for (const PairedRatio& r : ratios) {
    if (!(r.ratio > 0 && r.ci.lo > 0 && r.ci.hi >= r.ci.lo)) {
      throw std::invalid_argument(
          "geomean_speedup: a ratio or its interval is not positive (a measurement defect)");
    }
    log_sum -= std::log(r.ratio);
    const double sigma = std::log(r.ci.hi / r.ci.lo) / (2.0 * kZ95);
    var_sum += sigma * sigma;
  }
  const double n = static_cast<double>(ratios.size());
  const double mean = log_sum / n;
  const double half = kZ95 * std::sqrt(var_sum) / n;
  return {std::exp(mean), {std::exp(mean - half), std::exp(mean + half)}};
}

SpeedDecision decide_speed(const PairedRatio& r, double floor) {
  if (r.ci.hi < 1.0 - floor) return SpeedDecision::kFaster;
  if (r.ci.lo > 1.0 + floor) return SpeedDecision::kSlower;
  return SpeedDecision::kIndistinguishable;
}

std::string_view slot_path_key(SlotPath p) {
  switch (p) {
  case SlotPath::kCandidate:
    return "candidate_kernel";
  case SlotPath::kBaseline:
    return "baseline_kernel";
  case SlotPath::kReference:
    return "reference_kernel";
  case SlotPath::kAaPartner:
    return "aa_kernel";
  }
  return "reference_kernel";
}

std::array<SlotPath, 8> kernel_slot_order(int round) {
  if (round < 0) throw std::invalid_argument("kernel_slot_order: negative round");
  std::array<SlotPath, 3> xyz{SlotPath::kCandidate, SlotPath::kBaseline, SlotPath::kAaPartner};
  for (int i = 0; i < round % kSlotOrders; ++i)
    std::next_permutation(xyz.begin(), xyz.end());
  const SlotPath r = SlotPath::kReference;
  return {xyz[0], xyz[1], r, xyz[2], xyz[2], r, xyz[1], xyz[0]};
}

bool decision_settled(std::span<const double> candidate, std::span<const double> baseline,
                      std::span<const double> aa, std::size_t min_rounds) {
  const std::size_t rounds = std::min({candidate.size(), baseline.size(), aa.size()}) / 2;
  if (rounds == 0 || rounds < min_rounds) return false;
  std::vector<double> vs, floor_ratios;
  try {
    vs = abba_round_ratios(candidate.first(2 * rounds), baseline.first(2 * rounds));
    floor_ratios = abba_round_ratios(aa.first(2 * rounds), baseline.first(2 * rounds));
  } catch (const std::invalid_argument&) {
    return false;
  }
  const Interval ci = median_ci95(vs), aci = median_ci95(floor_ratios);
  const double floor =
      std::max({1.0 - aci.lo, aci.hi - 1.0, std::fabs(median(floor_ratios) - 1.0), 0.0});
  if (ci.hi < 1.0 - 1.5 * floor || ci.lo > 1.0 + 1.5 * floor) return true;
  const double aa_half = (aci.hi - aci.lo) / 2;
  return ci.lo > 1.0 - floor / 2 && ci.hi < 1.0 + floor / 2 && aa_half < floor / 2;
}

} // namespace kloop::evaluator::bench
