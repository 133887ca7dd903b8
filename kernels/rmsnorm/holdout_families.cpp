// The holdout families of weighted_rmsnorm/1 (cases.h, holdout_cases): random widths (a third of
// them primes), outer shapes, gaps, offsets, value families and eps, drawn from a seed that never
// feeds the public suite. The sealing and commitment around them are holdout/'s.
#include <cmath>
#include <string>

#include "kernels/rmsnorm/cases.h"

namespace kloop::rmsnorm {

namespace {

bool is_prime(std::int64_t n) {
  if (n < 2) return false;
  for (std::int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

std::int64_t uniform_int(Rng& rng, std::int64_t lo, std::int64_t hi) { // [lo, hi]
  return lo + static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(hi - lo + 1));
}

std::int64_t draw_width(Rng& rng, int index) {
  std::int64_t h = uniform_int(rng, 1, 20000);
  if (index % 3 == 0) { // a prime at or after h (<= 20011, the first prime past 20000)
    while (!is_prime(h))
      ++h;
  }
  return h;
}

// Outer shape with 1..3 dimensions whose product stays under `max_rows`.
std::vector<std::int64_t> draw_outer(Rng& rng, std::int64_t max_rows) {
  const int dims = static_cast<int>(uniform_int(rng, 1, 3));
  std::vector<std::int64_t> outer;
  std::int64_t rows = 1;
  for (int d = 0; d < dims; ++d) {
    const std::int64_t cap = std::max<std::int64_t>(1, max_rows / rows);
    const std::int64_t n = uniform_int(rng, 1, std::min<std::int64_t>(cap, d == 0 ? 4096 : 64));
    outer.push_back(n);
    rows *= n;
  }
  return outer;
}

constexpr ValueFamily kValueFamilies[] = {
    ValueFamily::kHeavyTailed, ValueFamily::kOutlierChannels, ValueFamily::kRowScales,
    ValueFamily::kNanInf,      ValueFamily::kNormal,          ValueFamily::kMixedMagnitudes,
    ValueFamily::kRowScales,   ValueFamily::kOutlierChannels,
};

constexpr LayoutKind kLayouts[] = {LayoutKind::kContiguous,    LayoutKind::kSlicedGaps,
                                   LayoutKind::kStorageOffset, LayoutKind::kContiguous,
                                   LayoutKind::kTransposed,    LayoutKind::kExpanded};

} // namespace

std::vector<CaseSpec> holdout_cases(std::uint64_t seed, int cases, std::int64_t max_elements) {
  Rng rng(seed ^ 0x686f6c646f75745fULL); // "holdout_": separates it from public draws
  std::vector<CaseSpec> suite;
  const std::int64_t per_case = std::max<std::int64_t>(1, max_elements / cases);
  for (int i = 0; i < cases; ++i) {
    CaseSpec s;
    s.name = "holdout-" + std::to_string(i);
    s.family = "holdout";
    s.dtype = kAllDTypes[i % 3];
    s.h = draw_width(rng, i);
    s.layout = kLayouts[uniform_int(rng, 0, std::size(kLayouts) - 1)];
    // Transposed views materialise an [H, rows] buffer; keep them small.
    const std::int64_t row_budget = s.layout == LayoutKind::kTransposed
                                        ? std::max<std::int64_t>(1, 200'000 / s.h)
                                        : std::max<std::int64_t>(1, per_case / s.h);
    s.outer = draw_outer(rng, row_budget);
    if (s.layout == LayoutKind::kSlicedGaps) s.gap = uniform_int(rng, 1, 64);
    s.offset = s.layout == LayoutKind::kStorageOffset ? uniform_int(rng, 1, 7) : 0;
    s.weight_offset = uniform_int(rng, 0, 3);
    s.values = kValueFamilies[uniform_int(rng, 0, std::size(kValueFamilies) - 1)];
    // eps log-uniform in [1e-12, 1e-1]; one case in eight uses the integer 1.
    if (uniform_int(rng, 0, 7) == 0) {
      s.eps = EpsScalar::integer(1);
    } else {
      s.eps = EpsScalar::of(std::pow(10.0, -12.0 + 11.0 * rng.uniform()));
    }
    s.seed = rng.next();
    suite.push_back(std::move(s));
  }
  return suite;
}

} // namespace kloop::rmsnorm
