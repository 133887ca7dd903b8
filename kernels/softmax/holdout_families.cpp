// The holdout families of row_softmax/1 (cases.h, holdout_cases): random widths (a third of them
// primes, one in eight past 32768), outer shapes, gaps, offsets and value families, drawn from a
// seed that never feeds the public suite. The sealing and commitment around them are holdout/'s.
#include <algorithm>
#include <string>

#include "kernels/softmax/cases.h"

namespace kloop::softmax {

namespace {

bool is_prime(std::int64_t n) {
  if (n < 2) return false;
  for (std::int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

std::int64_t draw_width(op::Rng& rng, int index) {
  if (index % 8 == 7) return rng.between(32769, 65536); // block-per-row widths past the target
  std::int64_t n = rng.between(1, 20000);
  if (index % 3 == 0) // a prime at or after n (<= 20011, the first prime past 20000)
    while (!is_prime(n))
      ++n;
  return n;
}

// Outer shape with 1..3 dimensions whose product stays at most `max_rows`.
std::vector<std::int64_t> draw_outer(op::Rng& rng, std::int64_t max_rows) {
  const int dims = static_cast<int>(rng.between(1, 3));
  std::vector<std::int64_t> outer;
  std::int64_t rows = 1;
  for (int d = 0; d < dims; ++d) {
    const std::int64_t cap = std::max<std::int64_t>(1, max_rows / rows);
    const std::int64_t n = rng.between(1, std::min<std::int64_t>(cap, d == 0 ? 4096 : 64));
    outer.push_back(n);
    rows *= n;
  }
  return outer;
}

// Families the holdout weighs toward: per-row scales (holdout only), peaked and masked rows,
// non-finite placements, large magnitudes, monotone rows and heavy tails.
constexpr ValueFamily kValueFamilies[] = {
    ValueFamily::kRowScales,      ValueFamily::kLogits,          ValueFamily::kCausalMask,
    ValueFamily::kNegInfElements, ValueFamily::kNanInf,          ValueFamily::kLargePositive,
    ValueFamily::kLargeNegative,  ValueFamily::kAscending,       ValueFamily::kHeavyTailed,
    ValueFamily::kRowScales,      ValueFamily::kMixedMagnitudes, ValueFamily::kNormal,
};

constexpr LayoutKind kLayouts[] = {LayoutKind::kContiguous,    LayoutKind::kSlicedGaps,
                                   LayoutKind::kStorageOffset, LayoutKind::kContiguous,
                                   LayoutKind::kTransposed,    LayoutKind::kExpanded};

} // namespace

std::vector<CaseSpec> holdout_cases(std::uint64_t seed, int cases, std::int64_t max_elements) {
  op::Rng rng(seed ^ 0x686f6c646f75745fULL); // "holdout_": separates it from public draws
  std::vector<CaseSpec> suite;
  const std::int64_t per_case = std::max<std::int64_t>(1, max_elements / std::max(cases, 1));
  for (int i = 0; i < cases; ++i) {
    CaseSpec s;
    s.name = "holdout-" + std::to_string(i);
    s.family = "holdout";
    s.dtype = kAllDTypes[i % 3];
    s.n = draw_width(rng, i);
    s.layout = kLayouts[rng.between(0, std::size(kLayouts) - 1)];
    // Transposed views materialise an [N, rows] buffer; keep them small.
    const std::int64_t row_budget = s.layout == LayoutKind::kTransposed
                                        ? std::max<std::int64_t>(1, 200'000 / s.n)
                                        : std::max<std::int64_t>(1, per_case / s.n);
    s.outer = draw_outer(rng, row_budget);
    if (s.layout == LayoutKind::kSlicedGaps) s.gap = rng.between(1, 64);
    s.offset = s.layout == LayoutKind::kStorageOffset ? rng.between(1, 7) : 0;
    s.values = kValueFamilies[rng.between(0, std::size(kValueFamilies) - 1)];
    s.seed = rng.next();
    suite.push_back(std::move(s));
  }
  return suite;
}

} // namespace kloop::softmax
