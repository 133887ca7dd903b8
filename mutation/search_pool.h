// The random input pool searched for a killing input of a mutant that every gate passed (seed,
// closing section). Wider than the public suite and the holdout on purpose: random widths (tiny,
// primes, powers of two and their neighbours, uniform up to 16384), outer shapes from one row to
// a few thousand (so persistent grids loop and double buffers alternate), sliced rows with gaps,
// storage offsets on x and weight, every value family and several eps; all three dtypes. One own
// case in four is 16-byte aligned (x, weight, row stride) with a gap, 513-4096 wide, with 600-5000
// rows (up to 4 x max_case_elements), so vectorised multi-row paths see strided rows.
// Deterministic for a seed; cases are named "pool-<i>".
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/rmsnorm/cases.h"

namespace kloop::mutation {

struct PoolOptions {
  int cases = 96;                             // own random cases
  int holdout_style_cases = 24;               // plus holdout::generate_suite(seed') cases
  std::int64_t max_case_elements = 2'000'000; // per case (rows * H); x4 in the vector stratum
};

// The pool for `seed`. Throws nothing; every spec is valid (no invalid calls).
std::vector<rmsnorm::CaseSpec> search_pool(std::uint64_t seed, const PoolOptions& options = {});

} // namespace kloop::mutation
