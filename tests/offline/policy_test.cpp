// Unit tests of the offline policy: it reacts to fixture reports as docs/OFFLINE.md documents and
// is deterministic for a seed.
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/rmsnorm/family_policy.h"
#include "tests/support/test_files.h"

namespace kloop::rmsnorm {
namespace {

using nlohmann::json;

json gate(const char* name, const char* status, json evidence = json::object()) {
  return {{"name", name}, {"status", status}, {"reason", ""}, {"evidence", evidence}};
}

// A passing report with no device: build/static pass, GPU gates not run.
json pending_report() {
  return {{"verdict", "pending_device_validation"},
          {"gates",
           {gate("contract", "pass"), gate("build", "pass"),
            gate("static", "pass",
                 {{"entries", {{{"name", "rms_bf16"}, {"registers", 40}, {"spill_stores", 0}}}}}),
            gate("correctness", "not_run")}},
          {"artifacts", json::object()}};
}

json read_fixture(const std::string& name) {
  return json::parse(
      test_support::read_file(std::string(KLOOP_SOURCE_DIR) + "/tests/offline/fixtures/" + name));
}

// The benchmark gate's CUPTI stall evidence as the producer wrote it on an H200
// (evaluator/device_gates.cpp stalls_from_pcsample; recorded in h200_flagship_report.json by the
// 2026-11-29 session, commit 8050563), with the histogram's `dominant` reason (a CUPTI name) given
// the most samples when set. Only counts change: the layout is the producer's.
json recorded_stalls(const std::string& dominant = "") {
  const json report = read_fixture("h200_flagship_report.json");
  for (const auto& g : report["gates"])
    if (g["name"] == "benchmark") {
      json stalls = g["evidence"]["stalls"];
      if (!dominant.empty()) {
        std::int64_t top = 0;
        for (const auto& [k, n] : stalls["histogram"].items())
          top = std::max<std::int64_t>(top, n.get<std::int64_t>());
        stalls["histogram"][dominant] = top + 1000;
      }
      return stalls;
    }
  throw std::runtime_error("the recorded report has no benchmark gate");
}

// `stalls` go where the benchmark gate puts them: its evidence's "stalls".
json bench_report(json classes, json stalls = json()) {
  json ev = {{"shapes", classes}};
  if (!stalls.is_null()) ev["stalls"] = stalls;
  json r = {{"verdict", "pass"},
            {"gates",
             {gate("build", "pass"), gate("correctness", "pass"), gate("benchmark", "pass", ev)}}};
  return r;
}

TEST(OfflinePolicy, FirstDecisionIsTheSafeDefault) {
  OfflinePolicy p(7);
  const PolicyDecision d = p.next(nullptr);
  EXPECT_EQ(d.variant, all_variants().front());
  EXPECT_EQ(d.rules, std::vector<std::string>{"first:safe_default"});
}

TEST(OfflinePolicy, PassWithoutBenchmarkMovesToFlagship) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json r = pending_report();
  const PolicyDecision d = p.next(&r);
  EXPECT_EQ(d.variant, flagship_variant());
  EXPECT_EQ(p.last_passing(), all_variants().front());
}

TEST(OfflinePolicy, FailedCorrectnessFallsBackToSaferNeighbour) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json ok = pending_report();
  p.next(&ok); // flagship
  json bad = {{"verdict", "reject"},
              {"gates", {gate("build", "pass"), gate("correctness", "fail")}}};
  const PolicyDecision d = p.next(&bad);
  EXPECT_EQ(d.variant, safer_neighbour(flagship_variant()));
  EXPECT_EQ(d.variant.cached_vecs, 2);
  EXPECT_EQ(d.rules, std::vector<std::string>{"fail:safer_neighbour"});
}

TEST(OfflinePolicy, SaferNeighbourDropsTheNewestOptionsFirst) {
  const auto name_of = [](const char* n) {
    return variant_name(safer_neighbour(*variant_by_name(n)));
  };
  EXPECT_EQ(name_of("v16-tauto-b128-c2-shfl-pers-peel-ef-ps-wr-pf"),
            "v16-tauto-b128-c2-shfl-pers-peel-ef-ps-wr");
  EXPECT_EQ(name_of("v16-tauto-b128-c2-shfl-pers-peel-ef-ps-wr"),
            "v16-tauto-b128-c2-shfl-pers-peel-ef-ps");
  EXPECT_EQ(name_of("v16-tauto-b128-c2-shfl-pers-peel-ef-ps"),
            "v16-tauto-b128-c2-shfl-pers-peel-ef");
  // A failing composite with warp rows goes to the composite without them, then (two cached
  // vectors, run-time geometry) to fixed geometry, which a composite cannot have: the composite
  // flag goes with it (it used to fall to the scalar safe default).
  EXPECT_EQ(name_of("v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl"),
            "v16-tauto-b256-c2-shfl-pers-peel-ef-bl");
  EXPECT_EQ(name_of("v16-tauto-b256-c2-shfl-pers-peel-bl"), "v16-t256-b256-c2-shfl-rows-peel");
  // Float32 on the baseline's own entry stays while the composite does (it is the safe part).
  EXPECT_EQ(name_of("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl"),
            "v16-tauto-b256-c2-shfl-pers-peel-bl-f32bl");
  EXPECT_EQ(name_of("v16-tauto-b256-c2-shfl-pers-peel-bl-f32bl"),
            "v16-t256-b256-c2-shfl-rows-peel");
}

TEST(OfflinePolicy, SpillsHalveTheCachedVectors) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json ok = pending_report();
  p.next(&ok); // flagship, c4
  json spilled = pending_report();
  spilled["gates"][2]["evidence"]["entries"][0]["spill_stores"] = 48;
  const PolicyDecision d = p.next(&spilled);
  EXPECT_EQ(d.rules, std::vector<std::string>{"spills:fewer_cached"});
  EXPECT_EQ(d.variant.cached_vecs, 2);
}

TEST(OfflinePolicy, LowOddWidthFractionStagesTheWeightOfAPeeledVariant) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json ok = pending_report();
  ASSERT_TRUE(p.next(&ok).variant.peel); // flagship: peeled, weight read from global memory
  const json r = bench_report({{{"shape_class", "odd"}, {"fraction_of_copy_ceiling", 0.2}},
                               {{"shape_class", "wide"}, {"fraction_of_copy_ceiling", 0.95}}});
  const PolicyDecision d = p.next(&r);
  EXPECT_EQ(d.rules, std::vector<std::string>{"odd:stage_weight"});
  EXPECT_TRUE(d.variant.peel);
  EXPECT_TRUE(d.variant.stage_weight);
}

TEST(OfflinePolicy, LongScoreboardStallAddsLoadsInFlight) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json ok = pending_report();
  p.next(&ok); // flagship, c4
  const json r = bench_report({{{"shape_class", "wide"}, {"fraction_of_copy_ceiling", 0.7}}},
                              recorded_stalls("smsp__pcsamp_warps_issue_stalled_long_scoreboard"));
  const PolicyDecision d = p.next(&r);
  EXPECT_EQ(d.rules, std::vector<std::string>{"stall:more_loads_in_flight"});
  EXPECT_EQ(d.variant.cached_vecs, 8);
}

TEST(OfflinePolicy, LaunchBoundShapesKeepThePersistentGridWithMoreLoadsInFlight) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json ok = pending_report();
  const Variant flagship = p.next(&ok).variant; // persistent, c4
  const json r = bench_report({{{"shape_class", "launch_bound"}, {"fraction", 0.1}}});
  const PolicyDecision d = p.next(&r);
  EXPECT_EQ(d.rules, std::vector<std::string>{"small:persistent"});
  EXPECT_EQ(d.variant.grid, FamilyGrid::kPersistent);
  EXPECT_EQ(d.variant.cached_vecs, 2 * flagship.cached_vecs);
}

TEST(OfflinePolicy, ATimedSafeDefaultLeadsToTheFlagshipThenTheTuningChain) {
  std::ifstream in(std::string(KLOOP_SOURCE_DIR) +
                   "/tests/offline/fixtures/h200_flagship_report.json");
  ASSERT_TRUE(in.good());
  const json slower = json::parse(in); // slower than the baseline on some shape-states
  OfflinePolicy p(1);
  ASSERT_EQ(p.next(nullptr).variant, all_variants().front());
  std::vector<std::string> names, rules;
  for (int i = 0; i < 4; ++i) {
    const PolicyDecision d = p.next(&slower);
    names.push_back(variant_name(d.variant));
    rules.push_back(d.rules.front());
  }
  EXPECT_EQ(rules, (std::vector<std::string>{"pass:flagship", "tune:smaller_blocks",
                                             "tune:baseline_on_aligned", "tune:evict_first"}));
  EXPECT_EQ(names[2], "v16-tauto-b256-c2-shfl-pers-peel-wr-bl");
  EXPECT_EQ(names[3], "v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl");
}

TEST(OfflinePolicy, SlowerThanBaselineTunesTheRunTimeVariantInPlace) {
  OfflinePolicy p(7);
  p.next(nullptr);
  const json ok = pending_report();
  const PolicyDecision flagship = p.next(&ok);
  ASSERT_EQ(flagship.variant.threads_per_row, 0);
  ASSERT_EQ(flagship.variant.block_threads, 512);
  // Faster on odd widths, slower on launch-bound shapes than the in-tree baseline.
  const json mixed = bench_report({{{"shape_class", "odd"}, {"speedup", 3.0}},
                                   {{"shape_class", "launch_bound"}, {"speedup", 0.9}}});
  const PolicyDecision smaller = p.next(&mixed);
  EXPECT_EQ(smaller.rules, std::vector<std::string>{"tune:smaller_blocks"});
  Variant want = flagship.variant;
  want.block_threads = 256;
  EXPECT_EQ(smaller.variant, want);
  const PolicyDecision composite = p.next(&mixed);
  EXPECT_EQ(composite.rules, std::vector<std::string>{"tune:baseline_on_aligned"});
  want.baseline_aligned = true;
  want.cached_vecs = 2;
  want.warp_rows = true; // rows of up to 128 vectors on one warp in the peeled path
  EXPECT_EQ(composite.variant, want);
  const PolicyDecision ef = p.next(&mixed);
  EXPECT_EQ(ef.rules, std::vector<std::string>{"tune:evict_first"});
  want.evict_first = true;
  EXPECT_EQ(ef.variant, want);
  // Not slower anywhere: the tuning rules stay quiet.
  OfflinePolicy q(7);
  q.next(nullptr);
  q.next(&ok);
  const json fast = bench_report({{{"shape_class", "odd"}, {"speedup", 3.0}}});
  const PolicyDecision d = q.next(&fast);
  EXPECT_NE(d.rules.front().rfind("tune:", 0), 0u) << d.rules.front();
}

// The benchmark gate's own layout (evaluator/perf_gates.cpp): per shape its dtype and class, per
// cache state the paired ratio against the baseline and the decision against the A/A floor.
json state(const char* cache, double ratio, const char* decision) {
  return {{"state", cache}, {"vs_baseline", {{"ratio", ratio}}}, {"decision", decision}};
}
json gate_shape(const char* dtype, json states) {
  return {{"rows", 512},
          {"h", 4096},
          {"dtype", dtype},
          {"shape_class", "streaming"},
          {"states", states}};
}

// A composite slower than the baseline only on float32 calls hands float32 to the baseline's own
// entry (tune:float32_baseline); slower on a half type as well, it hands both dtypes
// (tune:dtype_baseline); slower on all three, no dtype would stay composite, so it moves on.
TEST(OfflinePolicy, CompositeSlowerOnSomeDtypesHandsThemToTheBaseline) {
  const json only_f32 = bench_report(
      {gate_shape("bfloat16",
                  {state("cold", 0.80, "faster"), state("warm", 0.99, "indistinguishable")}),
       gate_shape("float32",
                  {state("cold", 1.03, "slower"), state("warm", 1.00, "indistinguishable")})});
  const ReportDigest d = digest_report(only_f32);
  EXPECT_EQ(d.slower_dtypes, std::set<std::string>{"float32"});
  EXPECT_NEAR(d.min_speedup, 1 / 1.03, 1e-12);

  const auto composite = *variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl");
  const auto run_after = [&](const json& report) {
    // Reach the composite through the documented chain, then feed `report` as its report.
    OfflinePolicy p(7);
    p.next(nullptr);
    const json ok = pending_report();
    p.next(&ok); // flagship, 512 threads
    const json mixed = bench_report({{{"shape_class", "launch_bound"}, {"speedup", 0.9}}});
    p.next(&mixed); // 256 threads
    EXPECT_EQ(p.next(&mixed).variant, composite);
    return p.next(&report);
  };
  const PolicyDecision f32 = run_after(only_f32);
  EXPECT_EQ(f32.rules, std::vector<std::string>{"tune:float32_baseline"});
  EXPECT_EQ(variant_name(f32.variant), "v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl");

  json also_bf16 = only_f32;
  also_bf16["gates"][2]["evidence"]["shapes"][0]["states"][1]["decision"] = "slower";
  EXPECT_EQ(digest_report(also_bf16).slower_dtypes, (std::set<std::string>{"bfloat16", "float32"}));
  const PolicyDecision both = run_after(also_bf16);
  EXPECT_EQ(both.rules, std::vector<std::string>{"tune:dtype_baseline"});
  EXPECT_EQ(variant_name(both.variant), "v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl-bf16bl");
  EXPECT_TRUE(both.variant.baseline_entry("float"));
  EXPECT_TRUE(both.variant.baseline_entry("__nv_bfloat16"));
  EXPECT_FALSE(both.variant.baseline_entry("__half"));

  json all_three = also_bf16;
  all_three["gates"][2]["evidence"]["shapes"].push_back(
      gate_shape("float16", {state("cold", 1.02, "slower"), state("warm", 0.98, "faster")}));
  EXPECT_EQ(digest_report(all_three).slower_dtypes,
            (std::set<std::string>{"bfloat16", "float16", "float32"}));
  const PolicyDecision ef = run_after(all_three);
  EXPECT_EQ(ef.rules, std::vector<std::string>{"tune:evict_first"});

  // A composite that already runs float32 on the baseline and is slower on float32 again (noise on
  // identical code) moves on: evict-first loads on its own path.
  Variant f32bl = composite;
  f32bl.float32_baseline = true;
  OfflinePolicy q(7);
  q.next(nullptr);
  const json ok = pending_report();
  q.next(&ok);
  const json mixed = bench_report({{{"shape_class", "launch_bound"}, {"speedup", 0.9}}});
  q.next(&mixed);
  q.next(&mixed);
  ASSERT_EQ(q.next(&only_f32).variant, f32bl);
  const PolicyDecision after = q.next(&only_f32);
  EXPECT_EQ(after.rules, std::vector<std::string>{"tune:evict_first"});
  EXPECT_EQ(variant_name(after.variant), "v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl-f32bl");
}

// A real public report (H200, 2026-11-29: the flagship's benchmark and roofline evidence, sample
// batches stripped): the digest must read the gates' own layout, per-state paired ratios and
// fractions of the copy ceiling. Before this was read, no class or speed-up rule ever fired on
// real reports and the policy only explored at random.
TEST(OfflinePolicy, DigestReadsTheGatesOwnEvidenceLayout) {
  const json report = read_fixture("h200_flagship_report.json");
  const ReportDigest d = digest_report(report);
  // The benchmark gate's CUPTI histogram leads with long_scoreboard on this H200 run; before the
  // digest read the histogram it took a bookkeeping count and said "total_samples".
  EXPECT_EQ(d.dominant_stall, "long_scoreboard");
  EXPECT_TRUE(d.has_benchmark);
  EXPECT_EQ(d.verdict, "pass");
  EXPECT_GT(d.min_speedup, 0.5);
  EXPECT_LT(d.min_speedup, 1.0); // slower than the baseline on some shape-states
  for (const char* cls : {"launch_bound", "streaming", "odd", "narrow", "wide"}) {
    ASSERT_TRUE(d.class_fraction.count(cls)) << cls;
    EXPECT_GT(d.class_fraction.at(cls), 0.0) << cls;
    EXPECT_LT(d.class_fraction.at(cls), 1.2) << cls;
  }
  EXPECT_LT(d.class_fraction.at("launch_bound"), d.class_fraction.at("streaming"));
  // The flagship was slower beyond the noise floor on states of every dtype (8-9 each).
  EXPECT_EQ(d.slower_dtypes, (std::set<std::string>{"bfloat16", "float16", "float32"}));
  // After the flagship, this report makes the policy tune the flagship in place.
  OfflinePolicy p(1);
  p.next(nullptr);
  const json ok = pending_report();
  ASSERT_EQ(variant_name(p.next(&ok).variant), "v16-tauto-b512-c4-shfl-pers-peel");
  const PolicyDecision next = p.next(&report);
  EXPECT_EQ(next.rules, std::vector<std::string>{"tune:smaller_blocks"});
  EXPECT_EQ(variant_name(next.variant), "v16-tauto-b256-c4-shfl-pers-peel");
  // Still slower somewhere at 256 threads: the baseline's design on aligned calls, then
  // evict-first loads on the peeled path.
  const PolicyDecision composite = p.next(&report);
  EXPECT_EQ(composite.rules, std::vector<std::string>{"tune:baseline_on_aligned"});
  EXPECT_EQ(variant_name(composite.variant), "v16-tauto-b256-c2-shfl-pers-peel-wr-bl");
  // A composite's report carries the embedded baseline's own spills (its rms_f32): that does not
  // send the policy to fewer cached vectors; evict-first loads come next.
  json spilling = report;
  for (auto& g : spilling["gates"])
    if (g["name"] == "static") g["evidence"]["spill_bytes"] = 32;
  ASSERT_GT(digest_report(spilling).spill_bytes, 0);
  const PolicyDecision ef = p.next(&spilling);
  EXPECT_EQ(ef.rules, std::vector<std::string>{"tune:evict_first"});
  EXPECT_EQ(variant_name(ef.variant), "v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl");
}

TEST(OfflinePolicy, DigestReadsEvidenceAndToleratesOddShapes) {
  const json r = bench_report({{{"shape_class", "odd"}, {"fraction", 0.5}, {"speedup", 1.4}},
                               {{"shape_class", "odd"}, {"fraction", 0.3}, {"speedup", 0.8}}},
                              recorded_stalls("smsp__pcsamp_warps_issue_stalled_lg_throttle"));
  const ReportDigest d = digest_report(r);
  EXPECT_TRUE(d.has_benchmark);
  EXPECT_DOUBLE_EQ(d.class_fraction.at("odd"), 0.3);
  EXPECT_DOUBLE_EQ(d.min_speedup, 0.8);
  EXPECT_EQ(d.dominant_stall, "lg_throttle");
  // Oddly typed keys are ignored, never thrown on.
  const json weird = {{"verdict", 3}, {"gates", {1, "x", {{"evidence", "text"}}}}};
  const ReportDigest w = digest_report(weird);
  EXPECT_TRUE(w.present);
  EXPECT_FALSE(w.has_benchmark);
  EXPECT_TRUE(w.failed_gate.empty());
  OfflinePolicy p(1);
  p.next(nullptr);
  EXPECT_FALSE(validate(p.next(&weird).variant));
}

TEST(OfflinePolicy, SameSeedAndReportsGiveTheSameDecisions) {
  auto run = [](std::uint64_t seed) {
    OfflinePolicy p(seed);
    std::vector<std::string> names{variant_name(p.next(nullptr).variant)};
    const json converged = bench_report({{{"shape_class", "wide"}, {"fraction", 0.95}}});
    for (int i = 0; i < 6; ++i)
      names.push_back(variant_name(p.next(&converged).variant));
    return names;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43)); // converged reports explore with the seeded PRNG
}

// Issue 26, K variants per iteration: the first batch is the safe default and what its pass
// leads to; a batch after the H200 flagship report takes the tuning chain's next moves at once,
// every variant distinct; one report and K = 1 is next().
TEST(OfflinePolicy, ABatchTakesTheNextRulesAtOnceAndNeverRepeatsAVariant) {
  std::ifstream in(std::string(KLOOP_SOURCE_DIR) +
                   "/tests/offline/fixtures/h200_flagship_report.json");
  ASSERT_TRUE(in.good());
  const json slower = json::parse(in);
  OfflinePolicy p(1);
  const auto first = p.next_batch({}, 3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].variant, all_variants().front());
  EXPECT_EQ(first[1].variant, flagship_variant());
  EXPECT_EQ(first[2].rules, std::vector<std::string>{"explore:random_untried"});
  // The three reports: the flagship's (slower somewhere) is the only one with a benchmark; the
  // moves start from it.
  const json ok = pending_report();
  const auto second = p.next_batch({&ok, &slower, &ok}, 3);
  ASSERT_EQ(second.size(), 3u);
  std::vector<std::string> rules;
  for (const auto& d : second)
    rules.push_back(d.rules.front());
  // From the flagship (the best report: the only timed one), its moves in rule order: smaller
  // blocks, then evict-first loads (the composite move needs 256-thread blocks already).
  EXPECT_EQ(rules[0], "tune:smaller_blocks");
  EXPECT_EQ(rules[1], "tune:evict_first");
  std::set<std::string> names;
  for (const auto& v : p.history())
    names.insert(variant_name(v));
  EXPECT_EQ(names.size(), p.history().size()) << "no variant proposed twice";
}

TEST(OfflinePolicy, ABatchOfOneIsNext) {
  const json ok = pending_report();
  OfflinePolicy a(5), b(5);
  EXPECT_EQ(a.next_batch({}, 1).front().variant, b.next(nullptr).variant);
  EXPECT_EQ(a.next_batch({&ok}, 1).front().variant, b.next(&ok).variant);
  EXPECT_EQ(a.history(), b.history());
}

} // namespace
} // namespace kloop::rmsnorm
