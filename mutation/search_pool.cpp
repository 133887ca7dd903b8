// The killing-input search pool (see search_pool.h).
#include "mutation/search_pool.h"

namespace kloop::mutation {

std::vector<nlohmann::json> search_pool(const op::Operator& op, std::uint64_t seed,
                                        const PoolOptions& options) {
  return op.search_pool(seed, options.cases, options.holdout_style_cases,
                        options.max_case_elements);
}

} // namespace kloop::mutation
