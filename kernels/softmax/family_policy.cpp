// The softmax offline policy (family_policy.h).
#include "kernels/softmax/family_policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace kloop::softmax {

namespace {

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

bool below(const ReportDigest& d, const char* shape_class, double limit) {
  auto it = d.class_fraction.find(shape_class);
  return it != d.class_fraction.end() && it->second < limit;
}

} // namespace

Variant safer_neighbour(const Variant& v) {
  Variant s = v;
  if (s.pass == Pass::kOnline) {
    s.pass = Pass::kTwoPass;
  } else if (s.threads_per_row == 0 || s.grid == FamilyGrid::kPersistent) {
    s.threads_per_row = 32;
    s.block_threads = 256;
    s.grid = FamilyGrid::kPerRows;
  } else if (s.vec_bytes > 0 && s.cached_units > 4) {
    s.cached_units = 4;
  } else {
    s = all_variants().front(); // scalar, two passes, a warp per row
  }
  return validate(s) ? all_variants().front() : s;
}

std::uint64_t OfflinePolicy::random() {
  std::uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool OfflinePolicy::tried(const Variant& v) const {
  return std::find(history_.begin(), history_.end(), v) != history_.end();
}

PolicyDecision OfflinePolicy::finish(Variant v, std::vector<std::string> rules,
                                     const std::string& why) {
  history_.push_back(v);
  PolicyDecision out{v, std::move(rules), ""};
  out.rationale = fmt::format("offline softmax policy chose {} ({}): {}", variant_name(v),
                              fmt::join(out.rules, ", "), why);
  return out;
}

std::vector<std::pair<std::string, Variant>> OfflinePolicy::moves_after(const ReportDigest& d,
                                                                        const Variant& prev) const {
  std::vector<std::pair<std::string, Variant>> moves;
  const bool failed = !d.failed_gate.empty() || d.verdict == "reject";
  if (d.present && failed) {
    Variant v = prev;
    do
      v = safer_neighbour(v);
    while (tried(v) && !(v == all_variants().front()));
    moves.emplace_back("fail:safer_neighbour", v);
    if (last_passing_) moves.emplace_back("fail:resubmit_best", *last_passing_);
    return moves;
  }
  if (d.spill_bytes > 0) {
    Variant v = prev;
    v.cached_units = std::max(1, v.cached_units / 2);
    moves.emplace_back("spills:fewer_cached", v);
    return moves;
  }
  if (!d.has_benchmark || (prev == all_variants().front() && !tried(flagship_variant()))) {
    moves.emplace_back("pass:flagship", flagship_variant());
    return moves;
  }
  const std::string& st = d.dominant_stall;
  if (has(st, "long_scoreboard") || has(st, "lg_throttle") || has(st, "drain")) {
    Variant v = prev;
    if (v.threads_per_row == 0 && v.block_threads < 1024) {
      v.block_threads *= 2;
      v.cached_units = std::max(1, v.cached_units / 2);
    } else {
      v.cached_units += 2;
    }
    moves.emplace_back("stall:more_loads_in_flight", v);
  }
  if (has(st, "barrier") || has(st, "membar")) {
    Variant v = prev;
    if (v.pass == Pass::kTwoPass)
      v.pass = Pass::kOnline;
    else if (v.threads_per_row > 32)
      v.threads_per_row /= 2;
    else if (v.threads_per_row == 0 && v.block_threads > 256)
      v.block_threads /= 2;
    moves.emplace_back("stall:fewer_barriers", v);
  }
  if (below(d, "wide", 0.9) || below(d, "streaming", 0.9) ||
      (d.min_speedup > 0 && d.min_speedup < 1.0))
    moves.emplace_back("bandwidth:whole_row_cached",
                       *variant_by_name("v16-b1024-tauto-c4-online-pers"));
  if (below(d, "launch_bound", 0.75) || below(d, "narrow", 0.75))
    moves.emplace_back("small:more_blocks", *variant_by_name("v16-b256-tauto-c6-online-pers"));
  return moves;
}

PolicyDecision OfflinePolicy::next(const nlohmann::json* report) {
  return decide(report ? digest_report(*report) : ReportDigest{});
}

PolicyDecision OfflinePolicy::decide(const ReportDigest& d) {
  if (history_.empty())
    return finish(all_variants().front(), {"first:safe_default"},
                  "no report yet; start from the safe general member (scalar, two passes, a warp "
                  "per row)");
  const Variant prev = history_.back();
  if (d.present && d.failed_gate.empty() && d.verdict != "reject") last_passing_ = prev;
  for (const auto& [rule, v] : moves_after(d, prev))
    if (!validate(v) && !tried(v)) return finish(v, {rule}, "rule fired on the previous report");
  std::vector<Variant> pool;
  for (const Variant& v : all_variants())
    if (!tried(v)) pool.push_back(v);
  if (!pool.empty())
    return finish(pool[random() % pool.size()], {"explore:random_untried"},
                  "rules proposed only tried members; exploring the curated set");
  return finish(last_passing_.value_or(all_variants().front()), {"done:resubmit_best"},
                "every curated member was tried; resubmitting the last passing one");
}

} // namespace kloop::softmax
