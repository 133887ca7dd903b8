// `kloop compare`: the researchers' table across sessions, grouped by provider/model: pass rate
// per gate (fraction of candidates whose gate passed), iterations to the first passing
// candidate, best speed-up with its interval, tokens and wall time spent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::store {

class Store;

// {"groups": [{"provider","model","sessions":[{id, candidates, gate_pass_rate:{gate: rate in [0,1]
//   over the runs of that gate that were not not_run; null when it never ran},
//   iterations_to_first_pass (null = none), best_speedup, best_speedup_interval:[lo,hi],
//   tokens, wall_ms}], "aggregate": {sessions, gate_pass_rate, sessions_with_pass,
//   best_speedup, tokens, wall_ms}}]}. Throws StoreError for an unknown id.
nlohmann::json compare_sessions(Store& store, const std::vector<std::int64_t>& ids);

// Plain-text table of compare_sessions' result, one line per session plus a group line.
std::string format_compare(const nlohmann::json& cmp);

} // namespace kloop::store
