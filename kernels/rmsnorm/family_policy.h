// The offline generator's policy: reads the previous public report (the JSON of
// evaluator::PublicReport: {"verdict", "gates":[{"name","status","reason","evidence"}],
// "artifacts"}) and picks the next variant of the family (family.h). Rules are documented in
// docs/OFFLINE.md; every missing evidence key is tolerated (the rule that needs it does not fire).
// Deterministic for a seed: no clock, its own PRNG (splitmix64), history kept in the object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/report_digest.h"
#include "kernels/rmsnorm/family.h"

namespace kloop::rmsnorm {

// What the policy read from one report, and the reader (kernels/report_digest.h).
using ReportDigest = op::ReportDigest;
using op::digest_report;

// One decision: the variant, the rules that fired (names from docs/OFFLINE.md) and a rationale.
struct PolicyDecision {
  Variant variant;
  std::vector<std::string> rules; // e.g. {"first:safe_default"}, {"spills:fewer_cached"}
  std::string rationale;          // one paragraph for the record
};

class OfflinePolicy {
public:
  explicit OfflinePolicy(std::uint64_t seed) : rng_state_(seed) {}

  // Next variant. `report` is the public report of the variant returned by the previous call
  // (nullptr on the first call or when none is available). Deterministic: the same seed and the
  // same sequence of reports give the same sequence of decisions.
  PolicyDecision next(const nlohmann::json* report);

  // `count` variants at once (`--candidates-per-iteration`, issue 26). `reports` are the public
  // reports of the previous batch, in its order (empty on the first call). The moves start from
  // the best variant of that batch (passing, highest geometric-mean speed-up, earliest), else its
  // last; the first `count` valid untried moves in rule order are taken, then untried curated
  // variants (PRNG), then the last passing one. The first batch is the safe default followed by
  // the moves its pass leads to. With one report and count 1 it is next().
  std::vector<PolicyDecision> next_batch(const std::vector<const nlohmann::json*>& reports,
                                         int count);

  // Variants returned so far, oldest first.
  const std::vector<Variant>& history() const { return history_; }
  // Last variant whose report had no failed gate; nullopt before the first.
  const std::optional<Variant>& last_passing() const { return last_passing_; }

private:
  std::uint64_t random(); // splitmix64
  bool tried(const Variant& v) const;
  PolicyDecision decide(const ReportDigest& d);
  // The rules' moves after a report `d` on variant `prev`, in rule order (docs/OFFLINE.md).
  std::vector<std::pair<std::string, Variant>> moves_after(const ReportDigest& d,
                                                           const Variant& prev) const;
  // The first `count` valid untried moves, then exploration, then the last passing variant.
  std::vector<PolicyDecision> pick(const std::vector<std::pair<std::string, Variant>>& moves,
                                   int count);
  PolicyDecision finish(Variant v, std::vector<std::string> rules, const std::string& why);

  std::uint64_t rng_state_;
  std::vector<Variant> history_;
  std::optional<Variant> last_passing_;
};

// The variant the policy moves to after the safe default passes: persistent grid, threads per row
// from H, 16-byte vectors with per-row peel, 4 cached vectors per thread.
Variant flagship_variant();

// One step toward safety (documented order in docs/OFFLINE.md); the safe default maps to itself.
Variant safer_neighbour(const Variant& v);

} // namespace kloop::rmsnorm
