// The random input pool searched for a killing input of a mutant that every gate passed (seed,
// closing section): each operator's own pool (kernels/<op>, Operator::search_pool), wider than
// its public suite and its holdout on purpose. For weighted_rmsnorm/1: random widths, outer
// shapes from one row to a few thousand (so persistent grids loop and double buffers alternate),
// sliced rows, storage offsets, every value family and several eps, a 16-byte aligned vector-path
// stratum, and holdout-style cases. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/operator.h"

namespace kloop::mutation {

struct PoolOptions {
  int cases = 96;                             // own random cases
  int holdout_style_cases = 24;               // plus holdout::generate_suite(seed') cases
  std::int64_t max_case_elements = 2'000'000; // per case (rows * H); x4 in the vector stratum
};

// The pool of `op` for `seed` (op.search_pool). Every spec is valid (no invalid calls).
std::vector<nlohmann::json> search_pool(const op::Operator& op, std::uint64_t seed,
                                        const PoolOptions& options = {});

} // namespace kloop::mutation
