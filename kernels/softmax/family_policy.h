// The offline generator's policy for the softmax family: reads the previous public report (the
// JSON of evaluator::PublicReport, through kernels/report_digest.h) and picks the next member of
// the family (family.h). Deterministic for a seed: no
// clock, its own PRNG (splitmix64), history kept in the object. Rules, in order:
//   first:safe_default          no report yet: all_variants()[0] (scalar, two passes, a warp per
//                               row on a per-rows grid)
//   fail:safer_neighbour        a gate failed: one step toward safety (safer_neighbour)
//   fail:resubmit_best          ... or the last passing member
//   spills:fewer_cached         the build reported spills: fewer cached units
//   pass:flagship               a pass without benchmark figures (or the safe default passed): the
//                               flagship (the in-tree baseline's member)
//   stall:more_loads_in_flight  memory-latency stalls: more cached units or a wider block
//   stall:fewer_barriers        barrier stalls: online (one combine per row) or smaller groups
//   bandwidth:whole_row_cached  wide rows below 90 % of the copy ceiling or slower than the
//                               baseline: 1024-thread blocks caching 4 vectors each
//   small:more_blocks           launch-bound or narrow shapes below 75 %: 256-thread blocks
//   explore:random_untried      nothing new from the rules: an untried curated member
//   done:resubmit_best          every curated member tried: the last passing one
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/report_digest.h"
#include "kernels/softmax/family.h"

namespace kloop::softmax {

// The digest of a public report (verdict, first failed gate, spills, per-class fractions of the
// copy ceiling, speed-up against the baseline, dominant stall, slower dtypes).
using ReportDigest = op::ReportDigest;
using op::digest_report;

// One decision: the variant, the rules that fired and a rationale.
struct PolicyDecision {
  Variant variant;
  std::vector<std::string> rules; // e.g. {"first:safe_default"}
  std::string rationale;          // one paragraph for the record
};

// One step toward safety: two passes before online, a fixed warp per row on a 256-thread
// per-rows grid before per-call geometry, at most 4 cached vectors, then the safe default
// (scalar accesses), which maps to itself.
Variant safer_neighbour(const Variant& v);

class OfflinePolicy {
public:
  explicit OfflinePolicy(std::uint64_t seed) : rng_state_(seed) {}

  // Next variant. `report` is the public report of the variant the previous call returned
  // (nullptr on the first call or when none is available). The same seed and the same sequence
  // of reports give the same sequence of decisions.
  PolicyDecision next(const nlohmann::json* report);
  // The same from a report's digest (digest_report(report); an empty digest: no report).
  PolicyDecision decide(const ReportDigest& digest);
  // `count` members at once (`--candidates-per-iteration`). `reports` are the public reports of
  // the previous batch, in its order (empty on the first call). The moves start from the best
  // member of that batch (passing, highest geometric-mean speed-up, earliest), else its last; the
  // first `count` valid untried moves in rule order are taken, then untried curated members
  // (PRNG), then the last passing one. The first batch is the safe default followed by the moves
  // its pass leads to. With at most one report and count 1 it is next().
  std::vector<PolicyDecision> next_batch(const std::vector<const nlohmann::json*>& reports,
                                         int count);

  const std::vector<Variant>& history() const { return history_; }
  // Last variant whose report had no failed gate; nullopt before the first.
  const std::optional<Variant>& last_passing() const { return last_passing_; }

private:
  std::uint64_t random(); // splitmix64
  bool tried(const Variant& v) const;
  // The rules' moves after report `d` on variant `prev`, in rule order.
  std::vector<std::pair<std::string, Variant>> moves_after(const ReportDigest& d,
                                                           const Variant& prev) const;
  // The first `count` valid untried moves, then exploration, then the last passing member.
  std::vector<PolicyDecision> pick(const std::vector<std::pair<std::string, Variant>>& moves,
                                   int count);
  PolicyDecision finish(Variant v, std::vector<std::string> rules, const std::string& why);

  std::uint64_t rng_state_;
  std::vector<Variant> history_;
  std::optional<Variant> last_passing_;
};

} // namespace kloop::softmax
