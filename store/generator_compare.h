// `kloop compare --by generator [--operator OP]`: generators compared over every optimize session
// of a (merged) store, per operator and overall, with the statistics a researcher needs to tell a
// difference from noise:
//   - success rate = promoted sessions / sessions, with a 95 % Wilson score interval (Wilson 1927;
//     Agresti & Coull 1998 for why not the Wald interval at small n);
//   - speed-up of promoted kernels: geometric mean of the promoted candidates' recorded speed-ups
//     (kernel vs the in-tree baseline) with a 95 % percentile-bootstrap interval (Efron &
//     Tibshirani 1993; 2000 resamples, fixed seed, so a report is reproducible), and between two
//     generators the geometric mean of the paired ratio over the (operator, seed) pairs where both
//     promoted, with its bootstrap interval;
//   - iterations to the first passing candidate (median, mean, and how many sessions had none);
//   - false starts: for each rejected candidate, the first gate (by evaluation order) that did not
//     pass and how (e.g. "build:fail", "correctness:fail"), and iterations that got no candidate
//     from the provider ("provider:<error class>");
//   - cost: tokens (prompt + completion), and dollars where the sweep recorded a price.
// A generator is the sweep's generator name when the session was run by `kloop sweep` (params
// "sweep"), else provider/model. Sessions pending device validation (no GPU) count as not
// promoted and are counted separately, so a CPU-only comparison says why every rate is zero.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::store {

class Store;

// 95 % Wilson score interval of k successes in n trials: {lo, hi}; nullopt when n == 0.
std::optional<std::pair<double, double>> wilson_interval(int k, int n);

// Geometric mean of `values` (all > 0) and its 95 % percentile-bootstrap interval from
// `resamples` resamples drawn with a fixed seed; interval nullopt when fewer than 2 values.
struct GeomeanEstimate {
  double geomean = 0;
  std::optional<std::pair<double, double>> interval;
};
std::optional<GeomeanEstimate> geomean_bootstrap(const std::vector<double>& values,
                                                 int resamples = 2000);

// The comparison as JSON: {"by": "generator", "operator": OP|null, "confidence": 0.95,
// "overall": [generator stats], "per_operator": [{"operator", "generators": [stats]}],
// "paired_speedup": [{"operator" ("all" or a name), "a", "b", "pairs", "geomean_ratio",
// "interval"}], "sessions": n}. A generator's stats: {"generator", "sessions", "promoted",
// "rejected", "pending_device_validation", "no_decision", "success_rate", "success_interval",
// "speedup_geomean", "speedup_interval", "promoted_with_speedup", "iterations_to_first_pass":
// {"median", "mean", "sessions_with_pass", "sessions_without"}, "false_starts": {class: count},
// "tokens", "cost_usd" (null when no price is known for any of its sessions),
// "cost_usd_sessions_priced"}. `operator_filter` keeps sessions whose operator is OP (the
// contract's name, e.g. weighted_rmsnorm, or the name the sweep ran it under, e.g. rmsnorm).
// Throws StoreError when no optimize session matches.
nlohmann::json compare_generators(Store& store, const std::optional<std::string>& operator_filter);

// Plain-text tables of compare_generators' result.
std::string format_generator_comparison(const nlohmann::json& cmp);

// A self-contained HTML page whose <section id="generator-comparison"> holds the tables and
// inline SVG plots: "success-rate" (rate with Wilson whiskers), "speedup-geomean" (geomean with
// bootstrap whiskers, or a <p id="speedup-geomean-missing"> when nothing was promoted) and
// "false-starts" (stacked bars of rejecting gates).
std::string render_generator_comparison_html(const nlohmann::json& cmp);

} // namespace kloop::store
