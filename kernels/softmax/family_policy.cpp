// The softmax offline policy (family_policy.h).
#include "kernels/softmax/family_policy.h"

#include <algorithm>
#include <optional>

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
  return pick(moves_after(d, prev), 1).front();
}

std::vector<PolicyDecision>
OfflinePolicy::next_batch(const std::vector<const nlohmann::json*>& reports, int count) {
  if (count < 1) count = 1;
  if (count == 1 && reports.size() <= 1) return {next(reports.empty() ? nullptr : reports.front())};
  if (history_.empty()) {
    std::vector<PolicyDecision> out{decide(ReportDigest{})};
    ReportDigest passed; // the rest of the first batch: where the safe default's pass leads
    passed.present = true;
    passed.verdict = "pass";
    for (auto& d : pick(moves_after(passed, history_.back()), count - 1))
      out.push_back(std::move(d));
    return out;
  }
  // The reports are about the last reports.size() members, in order.
  const std::size_t n = std::min(reports.size(), history_.size());
  const std::size_t first = history_.size() - n;
  std::optional<std::size_t> focus;
  double best = -1;
  ReportDigest focus_digest;
  for (std::size_t i = 0; i < n; ++i) {
    const ReportDigest d = reports[i] ? digest_report(*reports[i]) : ReportDigest{};
    if (!d.present || !d.failed_gate.empty() || d.verdict == "reject") continue;
    last_passing_ = history_[first + i];
    const double g = op::geomean_speedup(*reports[i]);
    if (!focus || g > best) focus = i, best = g, focus_digest = d;
  }
  if (!focus && n > 0) {
    focus = n - 1;
    focus_digest = reports[n - 1] ? digest_report(*reports[n - 1]) : ReportDigest{};
  }
  return pick(moves_after(focus_digest, focus ? history_[first + *focus] : history_.back()), count);
}

std::vector<PolicyDecision>
OfflinePolicy::pick(const std::vector<std::pair<std::string, Variant>>& moves, int count) {
  std::vector<PolicyDecision> out;
  for (const auto& [rule, v] : moves) {
    if (static_cast<int>(out.size()) >= count) return out;
    if (!validate(v) && !tried(v)) out.push_back(finish(v, {rule}, "rule fired on the report"));
  }
  while (static_cast<int>(out.size()) < count) {
    std::vector<Variant> pool;
    for (const Variant& v : all_variants())
      if (!tried(v)) pool.push_back(v);
    if (!pool.empty()) {
      out.push_back(finish(pool[random() % pool.size()], {"explore:random_untried"},
                           "rules proposed only tried members; exploring the curated set"));
      continue;
    }
    out.push_back(finish(last_passing_.value_or(all_variants().front()), {"done:resubmit_best"},
                         "every curated member was tried; resubmitting the last passing one"));
  }
  return out;
}

} // namespace kloop::softmax
