// The offline policy (family_policy.h): the rule list of docs/OFFLINE.md (the report digest is
// kernels/report_digest.h).
#include "kernels/rmsnorm/family_policy.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <utility>

#include <fmt/format.h>

namespace kloop::rmsnorm {
namespace {

using nlohmann::json;

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

} // namespace

Variant flagship_variant() {
  return *variant_by_name("v16-tauto-b512-c4-shfl-pers-peel");
}

Variant safer_neighbour(const Variant& v) {
  Variant s = v;
  // The newest options go first: the software prefetch, warp rows, the per-call store hint. A
  // composite's per-dtype baseline entries are kept until the composite itself goes: they are the
  // safe part.
  if (s.prefetch) {
    s.prefetch = false;
  } else if (s.warp_rows) {
    s.warp_rows = false;
  } else if (s.plain_stores) {
    s.plain_stores = false;
  } else if (s.stage_weight) {
    s.stage_weight = false;
  } else if (s.cached_vecs > 2) {
    s.cached_vecs /= 2;
  } else if (s.threads_per_row == 0) { // fixed geometry, one block per row
    s.baseline_aligned = false;        // a composite needs the run-time geometry
    s.float32_baseline = s.float16_baseline = s.bfloat16_baseline = false;
    s.threads_per_row = s.block_threads = 256;
    s.grid = FamilyGrid::kPerRows;
  } else if (s.cached_vecs > 0) {
    s.cached_vecs = 0;
  } else {
    s = all_variants().front();
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
  out.rationale = fmt::format("offline policy chose {} ({}): {}", variant_name(v),
                              fmt::join(out.rules, ", "), why);
  return out;
}

PolicyDecision OfflinePolicy::next(const json* report) {
  return decide(report ? digest_report(*report) : ReportDigest{});
}

std::vector<PolicyDecision> OfflinePolicy::next_batch(const std::vector<const json*>& reports,
                                                      int count) {
  if (count < 1) count = 1;
  if (count == 1 && reports.size() <= 1) return {next(reports.empty() ? nullptr : reports.front())};
  std::vector<PolicyDecision> out;
  if (history_.empty()) {
    out.push_back(decide(ReportDigest{}));
    // The rest of the first batch: what the safe default's pass leads to, then exploration.
    ReportDigest passed;
    passed.present = true;
    passed.verdict = "pass";
    for (auto& d : pick(moves_after(passed, history_.back()), count - 1))
      out.push_back(std::move(d));
    return out;
  }
  // The reports are about the last reports.size() variants, in order. Every passing one is a
  // resubmission candidate; the moves start from the best of them (passing, then the highest
  // geometric-mean speed-up, then the earliest), else from the last one.
  const std::size_t n = std::min(reports.size(), history_.size());
  const std::size_t first = history_.size() - n;
  std::optional<std::size_t> focus;
  double best = -1;
  ReportDigest focus_digest;
  for (std::size_t i = 0; i < n; ++i) {
    const ReportDigest d = reports[i] ? digest_report(*reports[i]) : ReportDigest{};
    const bool failed = !d.failed_gate.empty() || d.verdict == "reject";
    if (!d.present || failed) continue;
    last_passing_ = history_[first + i];
    const double g = op::geomean_speedup(*reports[i]);
    if (!focus || g > best) focus = i, best = g, focus_digest = d;
  }
  if (!focus && n > 0) {
    focus = n - 1;
    focus_digest = reports[n - 1] ? digest_report(*reports[n - 1]) : ReportDigest{};
  }
  const Variant prev = focus ? history_[first + *focus] : history_.back();
  return pick(moves_after(focus_digest, prev), count);
}

PolicyDecision OfflinePolicy::decide(const ReportDigest& d) {
  if (history_.empty())
    return finish(all_variants().front(), {"first:safe_default"},
                  "no report yet; start from the safe general variant (scalar, two-pass)");
  const Variant prev = history_.back();
  const bool failed = !d.failed_gate.empty() || d.verdict == "reject";
  if (d.present && !failed) last_passing_ = prev;
  return pick(moves_after(d, prev), 1).front();
}

std::vector<PolicyDecision>
OfflinePolicy::pick(const std::vector<std::pair<std::string, Variant>>& moves, int count) {
  std::vector<PolicyDecision> out;
  for (const auto& [rule, v] : moves) {
    if (static_cast<int>(out.size()) >= count) return out;
    if (!validate(v) && !tried(v))
      out.push_back(finish(v, {rule}, "rule fired on the previous report"));
  }
  while (static_cast<int>(out.size()) < count) {
    // Nothing new from the rules: explore an untried curated vector variant, chosen by the PRNG.
    std::vector<Variant> pool;
    for (const auto& v : all_variants())
      if (v.vec_bytes > 0 && !tried(v)) pool.push_back(v);
    if (!pool.empty()) {
      out.push_back(finish(pool[random() % pool.size()], {"explore:random_untried"},
                           "rules proposed only tried variants; exploring the curated set"));
      continue;
    }
    out.push_back(finish(last_passing_.value_or(all_variants().front()), {"done:resubmit_best"},
                         "every curated variant was tried; resubmitting the last passing one"));
  }
  return out;
}

std::vector<std::pair<std::string, Variant>> OfflinePolicy::moves_after(const ReportDigest& d,
                                                                        const Variant& prev) const {
  const bool failed = !d.failed_gate.empty() || d.verdict == "reject";
  // Candidate moves in rule order; the first valid, untried one wins.
  std::vector<std::pair<std::string, Variant>> moves;
  auto more_in_flight = [](Variant v) {
    if (v.cached_vecs < 8)
      v.cached_vecs = v.cached_vecs == 0 ? 2 : v.cached_vecs * 2;
    else if (v.threads_per_row == 0 && v.block_threads < 1024)
      v.block_threads *= 2;
    return v;
  };
  if (d.present && failed) {
    Variant v = prev;
    do
      v = safer_neighbour(v);
    while (tried(v) && !(v == all_variants().front()));
    moves.emplace_back("fail:safer_neighbour", v);
    if (last_passing_) moves.emplace_back("fail:resubmit_best", *last_passing_);
  } else if (d.spill_bytes > 0 && !prev.baseline_aligned) {
    // (A composite's entries carry the embedded baseline's own spills; its peeled path is kept
    // spill-free by its two cached vectors, see tune:baseline_on_aligned.)
    Variant v = prev;
    if (v.cached_vecs > 0)
      v.cached_vecs /= 2;
    else if (v.vec_bytes == 16)
      v.vec_bytes = 8;
    moves.emplace_back("spills:fewer_cached", v);
  } else if (!d.has_benchmark || (prev == all_variants().front() && !tried(flagship_variant()))) {
    // The safe default exists to prove the pipeline end to end; once it passed, the flagship (the
    // run-time-geometry variant the tuning rules below refine) comes next, timed or not.
    moves.emplace_back("pass:flagship", flagship_variant());
  } else {
    // Slower than the baseline somewhere: first tune the run-time-geometry variant in place (more,
    // smaller blocks resident per SM; the baseline's design on aligned calls; evict-first loads of
    // the cached row), since its structure already covers every shape class.
    if (prev.threads_per_row == 0 && d.min_speedup > 0 && d.min_speedup < 1.0) {
      if (prev.block_threads > 256) {
        Variant v = prev;
        v.block_threads = 256;
        moves.emplace_back("tune:smaller_blocks", v);
      }
      // Still slower somewhere at the baseline's own block size: run the baseline's design on
      // aligned calls and keep this variant's peeled path for the rest (Variant::baseline_aligned).
      // The peeled path is then an out-of-line call with the ABI's register budget: at more
      // than two cached vectors it spills (NVRTC, sm_90), so the composite caches two, and gives
      // rows of up to 128 vectors one warp (no block barrier; the rest re-read from L1/L2), which
      // two cached vectors alone would spread over several warps (bf16 32768 x 1009 on the H200:
      // 48.6 us against 54.8 us, docs/RESULTS.md 2026-11-30).
      if (!prev.baseline_aligned && prev.block_threads == 256) {
        Variant v = prev;
        v.baseline_aligned = true;
        v.stage_weight = false;
        v.cached_vecs = std::min(v.cached_vecs, 2);
        v.warp_rows = v.cached_vecs > 0;
        moves.emplace_back("tune:baseline_on_aligned", v);
      }
      // A composite slower on some dtypes: hand each of them entirely to the baseline's own entry
      // (Variant::float32_baseline, float16_baseline, bfloat16_baseline), so those calls run the
      // baseline's code, and keep the composite where it was not slower. validate() refuses the
      // move when no dtype would stay composite.
      if (prev.baseline_aligned && !d.slower_dtypes.empty()) {
        Variant v = prev;
        v.float32_baseline |= d.slower_dtypes.count("float32") > 0;
        v.float16_baseline |= d.slower_dtypes.count("float16") > 0;
        v.bfloat16_baseline |= d.slower_dtypes.count("bfloat16") > 0;
        if (!(v == prev))
          moves.emplace_back(d.slower_dtypes == std::set<std::string>{"float32"}
                                 ? "tune:float32_baseline"
                                 : "tune:dtype_baseline",
                             v);
      }
      if (!prev.evict_first && prev.cached_vecs > 0) {
        Variant v = prev;
        v.evict_first = true;
        moves.emplace_back("tune:evict_first", v);
      }
    }
    const std::string& st = d.dominant_stall;
    if (has(st, "long_scoreboard") || has(st, "lg_throttle") || has(st, "drain") ||
        (has(st, "throttle") && !has(st, "mio")))
      moves.emplace_back("stall:more_loads_in_flight", more_in_flight(prev));
    if (has(st, "barrier") || has(st, "membar")) {
      Variant v = prev;
      if (v.reduction == Reduction::kSharedTree)
        v.reduction = Reduction::kShuffle;
      else if (v.threads_per_row > 32)
        v.threads_per_row /= 2;
      else if (v.threads_per_row == 0 && v.block_threads > 128)
        v.block_threads /= 2;
      moves.emplace_back("stall:fewer_barriers", v);
    }
    if (has(st, "mio_throttle") || has(st, "short_scoreboard")) {
      Variant v = prev;
      v.stage_weight = false;
      v.reduction = Reduction::kShuffle;
      moves.emplace_back("stall:less_shared_memory", v);
    }
    auto low = [&](const char* cls, double limit) {
      auto it = d.class_fraction.find(cls);
      return it != d.class_fraction.end() && it->second < limit;
    };
    if (low("odd", 0.75)) {
      Variant v = prev;
      if (v.vec_bytes == 0 || !v.peel)
        v.vec_bytes = 16, v.peel = true;
      else
        v.stage_weight = true;
      moves.emplace_back(v.stage_weight ? "odd:stage_weight" : "odd:peel", v);
    }
    if (low("launch_bound", 0.75) || low("narrow", 0.75)) {
      Variant v = flagship_variant();
      if (prev.grid == FamilyGrid::kPersistent) v = more_in_flight(prev);
      moves.emplace_back("small:persistent", v);
    }
    if (low("wide", 0.9) || low("streaming", 0.9) || (d.min_speedup > 0 && d.min_speedup < 1.0))
      moves.emplace_back("bandwidth:more_loads_in_flight", more_in_flight(prev));
  }
  return moves;
}

} // namespace kloop::rmsnorm
