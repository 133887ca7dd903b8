// The checker-coverage search pool of row_softmax/1 (cases.h, search_pool_cases).
#include <algorithm>
#include <string>

#include "kernels/dtype.h"
#include "kernels/softmax/cases.h"

namespace kloop::softmax {
namespace {

constexpr std::int64_t kPrimes[] = {3,    7,    31,   127,  131,  251,  509,  521,   1009,
                                    1021, 2039, 2053, 3581, 4093, 4099, 8191, 12289, 16381};

std::int64_t draw_width(op::Rng& rng) {
  switch (rng.between(0, 3)) {
  case 0:
    return rng.between(1, 24); // narrower than one group of lanes or one vector
  case 1:
    return kPrimes[rng.between(0, std::size(kPrimes) - 1)];
  case 2:
    return std::max<std::int64_t>(1, (std::int64_t{1} << rng.between(3, 14)) + rng.between(-1, 1));
  default:
    return rng.between(1, 16384);
  }
}

constexpr ValueFamily kValues[] = {
    ValueFamily::kNormal,        ValueFamily::kLogits,         ValueFamily::kLargePositive,
    ValueFamily::kLargeNegative, ValueFamily::kNearMax,        ValueFamily::kConstantRows,
    ValueFamily::kCausalMask,    ValueFamily::kNegInfElements, ValueFamily::kAllNegInf,
    ValueFamily::kNanInf,        ValueFamily::kAscending,      ValueFamily::kDescending,
    ValueFamily::kOneHot,        ValueFamily::kSubnormals,     ValueFamily::kMixedMagnitudes,
    ValueFamily::kHeavyTailed,   ValueFamily::kRowScales,      ValueFamily::kNormal,
};
constexpr LayoutKind kLayouts[] = {LayoutKind::kContiguous, LayoutKind::kContiguous,
                                   LayoutKind::kSlicedGaps, LayoutKind::kStorageOffset,
                                   LayoutKind::kExpanded,   LayoutKind::k3d};

// The vector-path stratum (one own case in four): x aligned, a gap that keeps the row stride a
// multiple of 16 bytes, 513-4096 wide, 600-5000 rows (up to four times the per-case cap).
void vector_stratum(op::Rng& rng, CaseSpec& s, std::int64_t max_case_elements) {
  const std::int64_t per16 = 16 / static_cast<std::int64_t>(dtype_bytes(s.dtype));
  s.n = rng.between(513, 4096);
  s.layout = LayoutKind::kSlicedGaps;
  s.offset = 0;
  const std::int64_t gap = rng.between(1, 64);
  s.gap = gap + (per16 - (s.n + gap) % per16) % per16;
  const std::int64_t cap16 = std::max<std::int64_t>(1, 4 * max_case_elements / s.n);
  s.outer = {std::min(cap16, rng.between(600, 5000))};
}

} // namespace

std::vector<CaseSpec> search_pool_cases(std::uint64_t seed, int cases, int holdout_style_cases,
                                        std::int64_t max_case_elements) {
  op::Rng rng(seed ^ 0x6d7574616e74735fULL); // "mutants_": separate from other draws
  std::vector<CaseSpec> pool;
  for (int i = 0; i < cases; ++i) {
    CaseSpec s;
    s.name = "pool-" + std::to_string(i);
    s.family = "mutation-search";
    s.dtype = kAllDTypes[static_cast<std::size_t>(i % 3)];
    s.n = draw_width(rng);
    s.layout = kLayouts[rng.between(0, std::size(kLayouts) - 1)];
    // Rows: one in four cases many rows (past one persistent grid), else a handful to hundreds.
    const std::int64_t cap = std::max<std::int64_t>(1, max_case_elements / s.n);
    const std::int64_t want = rng.between(0, 3) == 0 ? rng.between(600, 4000) : rng.between(1, 300);
    const std::int64_t rows = std::min(cap, want);
    s.outer = s.layout == LayoutKind::k3d && rows >= 4 ? std::vector<std::int64_t>{2, rows / 2}
                                                       : std::vector<std::int64_t>{rows};
    if (s.layout == LayoutKind::kExpanded && s.outer[0] < 2) s.layout = LayoutKind::kContiguous;
    if (s.layout == LayoutKind::kSlicedGaps) s.gap = rng.between(1, 64);
    if (s.layout == LayoutKind::kStorageOffset) s.offset = rng.between(1, 7);
    s.values = kValues[rng.between(0, std::size(kValues) - 1)];
    if (i % 4 == 3) vector_stratum(rng, s, max_case_elements);
    s.seed = rng.next();
    pool.push_back(std::move(s));
  }
  int h = 0;
  for (CaseSpec s : holdout_cases(seed ^ 0x706f6f6cULL /* "pool" */, holdout_style_cases,
                                  max_case_elements * std::max(1, holdout_style_cases) / 2)) {
    s.name = "pool-h" + std::to_string(h++);
    s.family = "mutation-search";
    pool.push_back(std::move(s));
  }
  return pool;
}

} // namespace kloop::softmax
