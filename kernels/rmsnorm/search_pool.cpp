// The checker-coverage search pool of weighted_rmsnorm/1 (cases.h, search_pool_cases).
#include "kernels/rmsnorm/cases.h"

#include <algorithm>
#include <string>

#include "kernels/dtype.h"

namespace kloop::rmsnorm {
namespace {

std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi) { // [lo, hi]
  return lo + static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(hi - lo + 1));
}

constexpr std::int64_t kPrimes[] = {3,    7,    31,   127,  131,  251,  509,  521,   1009,
                                    1021, 2039, 2053, 3581, 4093, 4099, 8191, 12289, 16381};

std::int64_t draw_width(Rng& rng) {
  switch (pick(rng, 0, 3)) {
  case 0:
    return pick(rng, 1, 24); // narrower than one group of lanes or one vector
  case 1:
    return kPrimes[pick(rng, 0, std::size(kPrimes) - 1)];
  case 2:
    return std::max<std::int64_t>(1, (std::int64_t{1} << pick(rng, 3, 14)) + pick(rng, -1, 1));
  default:
    return pick(rng, 1, 16384);
  }
}

constexpr ValueFamily kValues[] = {
    ValueFamily::kNormal,          ValueFamily::kZeros,           ValueFamily::kSubnormals,
    ValueFamily::kMixedMagnitudes, ValueFamily::kBig1e19,         ValueFamily::kBig2e19,
    ValueFamily::kNanInf,          ValueFamily::kConstantRows,    ValueFamily::kHeavyTailed,
    ValueFamily::kTinyRow,         ValueFamily::kConstant300,     ValueFamily::kZeroAndSmallRow,
    ValueFamily::kArange,          ValueFamily::kOutlierChannels, ValueFamily::kRowScales,
    ValueFamily::kNormal,
};
constexpr LayoutKind kLayouts[] = {LayoutKind::kContiguous, LayoutKind::kContiguous,
                                   LayoutKind::kSlicedGaps, LayoutKind::kStorageOffset,
                                   LayoutKind::kExpanded,   LayoutKind::k3d};
constexpr double kEps[] = {1e-5, 1e-6, 1e-12, 1e-3, 0.1, 1.0};

} // namespace

std::vector<CaseSpec> search_pool_cases(std::uint64_t seed, int cases, int holdout_style_cases,
                                        std::int64_t max_case_elements) {
  Rng rng(seed ^ 0x6d7574616e74735fULL); // "mutants_": separate from other draws
  std::vector<CaseSpec> pool;
  for (int i = 0; i < cases; ++i) {
    CaseSpec s;
    s.name = "pool-" + std::to_string(i);
    s.family = "mutation-search";
    s.dtype = kAllDTypes[static_cast<std::size_t>(i % 3)];
    s.h = draw_width(rng);
    s.layout = kLayouts[pick(rng, 0, std::size(kLayouts) - 1)];
    // Rows: one in four cases many rows (past one persistent grid), else a handful to hundreds.
    const std::int64_t cap = std::max<std::int64_t>(1, max_case_elements / s.h);
    const std::int64_t want = pick(rng, 0, 3) == 0 ? pick(rng, 600, 4000) : pick(rng, 1, 300);
    const std::int64_t rows = std::min(cap, want);
    if (s.layout == LayoutKind::k3d && rows >= 4)
      s.outer = {2, rows / 2};
    else
      s.outer = {rows};
    if (s.layout == LayoutKind::kExpanded && s.outer[0] < 2) s.layout = LayoutKind::kContiguous;
    if (s.layout == LayoutKind::kSlicedGaps) s.gap = pick(rng, 1, 64);
    if (s.layout == LayoutKind::kStorageOffset) s.offset = pick(rng, 1, 7);
    s.weight_offset = pick(rng, 0, 3);
    s.values = kValues[pick(rng, 0, std::size(kValues) - 1)];
    s.eps = EpsScalar::of(kEps[pick(rng, 0, std::size(kEps) - 1)]);
    if (i % 4 == 3) {
      // Vector-path stratum: the random offsets and gaps above leave x, weight or the row stride
      // off 16-byte alignment in most cases, so kernels fall back to scalar code; here x and the
      // weight are aligned and the gap keeps the row stride a multiple of 16 bytes, with widths of
      // 513-4096 and many rows, so vectorised multi-row paths (a second row per block, per-rows
      // loops of persistent grids) see strided rows and a random eps. (The 2026-11-30 record's
      // three survivors in the baseline's second row of a pair needed exactly this.)
      const std::int64_t per16 = 16 / static_cast<std::int64_t>(dtype_bytes(s.dtype));
      s.h = pick(rng, 513, 4096);
      s.layout = LayoutKind::kSlicedGaps;
      s.offset = 0;
      s.weight_offset = 0;
      const std::int64_t gap = pick(rng, 1, 64);
      s.gap = gap + (per16 - (s.h + gap) % per16) % per16;
      // Up to four times the per-case cap, so that every width keeps more than 600 rows (past
      // the 528 blocks of the baseline's persistent grid on an H200).
      const std::int64_t cap16 = std::max<std::int64_t>(1, 4 * max_case_elements / s.h);
      s.outer = {std::min(cap16, pick(rng, 600, 5000))};
    }
    s.seed = rng.next();
    pool.push_back(std::move(s));
  }
  if (holdout_style_cases > 0) {
    int i = 0;
    for (CaseSpec s : holdout_cases(seed ^ 0x706f6f6cULL /* "pool" */, holdout_style_cases,
                                    max_case_elements * std::max(1, holdout_style_cases) / 2)) {
      s.name = "pool-h" + std::to_string(i++);
      s.family = "mutation-search";
      pool.push_back(std::move(s));
    }
  }
  return pool;
}

} // namespace kloop::rmsnorm
