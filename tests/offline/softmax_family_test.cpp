// The softmax offline family (kernels/softmax/family.h) and its policy (family_policy.h): names,
// constraints, the curated set, deterministic emission, manifests that the operator-generic
// parser accepts with the dispatch and launch each member declares, the in-tree baseline as the
// flagship's emitted body, and the policy's rules on report digests. The rules driven by a real
// pipeline report (safe default passed, a build failure, spills) are tested on reports of the
// real pipeline in tests/evaluator/softmax_evaluate_test.cpp.
#include <set>

#include <gtest/gtest.h>

#include "kernels/manifest.h"
#include "kernels/softmax/family.h"
#include "kernels/softmax/family_policy.h"
#include "kernels/softmax/operator.h"
#include "tests/support/test_files.h"

namespace kloop::softmax {
namespace {

TEST(SoftmaxFamilyTest, NamesRoundTripAndTheCuratedSetIsValidAndDistinct) {
  std::set<std::string> names;
  for (const Variant& v : all_variants()) {
    EXPECT_EQ(validate(v), std::nullopt) << variant_name(v);
    EXPECT_EQ(variant_by_name(variant_name(v)), v);
    EXPECT_TRUE(names.insert(variant_name(v)).second) << variant_name(v);
  }
  EXPECT_EQ(all_variants().front().vec_bytes, 0);
  EXPECT_EQ(all_variants().front().pass, Pass::kTwoPass);
  EXPECT_EQ(variant_name(flagship_variant()), "v16-b512-tauto-c6-online-pers");
  EXPECT_NE(std::find(all_variants().begin(), all_variants().end(), flagship_variant()),
            all_variants().end());
  for (const char* junk : {"", "v16", "v16-b512-tauto-c6-online", "v16-b512-tauto-c6-online-pers-x",
                           "v12-b512-tauto-c6-online-pers", "v16-b500-tauto-c6-online-pers",
                           "v16-b512-t0-c6-online-pers", "v16-b512-tauto-c8-online-pers",
                           "v16-b512-tauto-c6-online-rows", "v16-b512-t32-c6-fast-rows",
                           "v16-b0512-tauto-c6-online-pers"})
    EXPECT_EQ(variant_by_name(junk), std::nullopt) << junk;
}

TEST(SoftmaxFamilyTest, ValidateNamesTheViolatedField) {
  auto why = [](auto edit) {
    Variant v = flagship_variant();
    edit(v);
    return validate(v).value_or("");
  };
  EXPECT_NE(why([](Variant& v) { v.vec_bytes = 4; }).find("vec_bytes"), std::string::npos);
  EXPECT_NE(why([](Variant& v) { v.block_threads = 96; }).find("block_threads"), std::string::npos);
  EXPECT_NE(why([](Variant& v) { v.threads_per_row = 1024; }).find("threads_per_row"),
            std::string::npos);
  EXPECT_NE(why([](Variant& v) { v.cached_units = 8; }).find("registers"), std::string::npos);
  EXPECT_NE(why([](Variant& v) { v.grid = FamilyGrid::kPerRows; }).find("persistent"),
            std::string::npos);
  EXPECT_THROW((void)generate([] {
                 Variant v = flagship_variant();
                 v.cached_units = 0;
                 return v;
               }()),
               std::invalid_argument);
}

TEST(SoftmaxFamilyTest, EmissionIsDeterministicAndManifestsParseWithTheirLaunchAndDispatch) {
  for (const Variant& v : all_variants()) {
    const GeneratedCandidate a = generate(v), b = generate(v);
    EXPECT_EQ(a.kernel_cu, b.kernel_cu);
    EXPECT_EQ(a.manifest_json, b.manifest_json);
    EXPECT_EQ(a.name, variant_name(v));
    EXPECT_NE(a.kernel_cu.find(variant_name(v)), std::string::npos);
    for (const char* entry : {"softmax_f32(", "softmax_f16(", "softmax_bf16("})
      EXPECT_NE(a.kernel_cu.find(entry), std::string::npos) << entry;
    EXPECT_EQ(a.kernel_cu.find('$'), std::string::npos) << "unsubstituted marker";
    const op::ManifestParse m = op::parse_manifest(declaration(), a.manifest_json);
    ASSERT_TRUE(m.errors.empty()) << a.name << ": " << m.errors.front().message;
    const op::Variant& mv = m.manifest->variants.at(0);
    EXPECT_EQ(mv.launch.block_threads, v.block_threads);
    EXPECT_EQ(mv.launch.rows_per_block, v.rows_per_block());
    EXPECT_EQ(mv.launch.grid, v.grid == FamilyGrid::kPersistent ? op::GridKind::kPersistent
                                                                : op::GridKind::kPerRows);
    EXPECT_EQ(mv.when.alignment_bytes, 2);
    EXPECT_EQ(mv.when.axes.at(0).max, 16777216);
    EXPECT_EQ(mv.entry_points.size(), 3u);
    // The launch bound keeps 64 registers per thread: 1024 / block_threads blocks per SM.
    EXPECT_NE(a.kernel_cu.find("__launch_bounds__(" + std::to_string(v.block_threads) + ", " +
                               std::to_string(1024 / v.block_threads) + ")"),
              std::string::npos);
  }
  // Members differ where their parameters do.
  EXPECT_NE(emit_kernel_body(*variant_by_name("v16-b512-tauto-c6-online-pers")),
            emit_kernel_body(*variant_by_name("v16-b512-tauto-c6-twopass-pers")));
  EXPECT_EQ(generate(all_variants().front()).kernel_cu.find("uint4"), std::string::npos);
  EXPECT_NE(generate(*variant_by_name("v8-b512-tauto-c12-online-pers")).kernel_cu.find("uint2"),
            std::string::npos);
}

TEST(SoftmaxFamilyTest, TheInTreeBaselineIsTheFlagshipsEmittedSource) {
  const std::string dir = std::string(KLOOP_SOURCE_DIR) + "/kernels/softmax/baseline/";
  const std::string source = test_support::read_file(dir + "kernel.cu");
  ASSERT_NE(source.find("#include"), std::string::npos);
  EXPECT_EQ(source.substr(source.find("#include")), emit_kernel_body(flagship_variant()));
  EXPECT_NE(source.find(variant_name(flagship_variant())), std::string::npos);
  // Its manifest is the flagship's, but for the known_limits text written for the baseline.
  nlohmann::json in_tree = nlohmann::json::parse(test_support::read_file(dir + "manifest.json"));
  nlohmann::json emitted = nlohmann::json::parse(emit_manifest(flagship_variant()));
  in_tree.erase("known_limits");
  emitted.erase("known_limits");
  EXPECT_EQ(in_tree, emitted);
}

ReportDigest passed_pending() {
  ReportDigest d;
  d.present = true;
  d.verdict = "pending_device_validation";
  return d;
}

ReportDigest timed(std::map<std::string, double> fractions, double min_speedup = 0,
                   std::string stall = "") {
  ReportDigest d;
  d.present = true;
  d.verdict = "pass";
  d.class_fraction = std::move(fractions);
  d.min_speedup = min_speedup;
  d.has_benchmark = true;
  d.dominant_stall = std::move(stall);
  return d;
}

TEST(SoftmaxPolicyTest, SafeDefaultThenFlagshipThenSaferNeighbourOnAFailure) {
  OfflinePolicy p(3);
  PolicyDecision d = p.next(nullptr);
  EXPECT_EQ(d.variant, all_variants().front());
  EXPECT_EQ(d.rules, std::vector<std::string>{"first:safe_default"});
  d = p.decide(passed_pending());
  EXPECT_EQ(d.variant, flagship_variant());
  EXPECT_EQ(d.rules, std::vector<std::string>{"pass:flagship"});
  EXPECT_EQ(p.last_passing(), all_variants().front());
  ReportDigest failed;
  failed.present = true;
  failed.verdict = "reject";
  failed.failed_gate = "correctness";
  d = p.decide(failed);
  EXPECT_EQ(d.rules, std::vector<std::string>{"fail:safer_neighbour"});
  EXPECT_EQ(d.variant, safer_neighbour(flagship_variant()));
  EXPECT_EQ(d.variant.pass, Pass::kTwoPass); // the first step toward safety
  EXPECT_NE(d.rationale.find(variant_name(d.variant)), std::string::npos);
}

TEST(SoftmaxPolicyTest, SaferNeighbourEndsAtTheSafeDefault) {
  Variant v = *variant_by_name("v8-b512-tauto-c12-online-pers");
  std::vector<std::string> chain;
  for (int i = 0; i < 6 && !(v == all_variants().front()); ++i) {
    v = safer_neighbour(v);
    EXPECT_EQ(validate(v), std::nullopt);
    chain.push_back(variant_name(v));
  }
  EXPECT_EQ(chain, (std::vector<std::string>{
                       "v8-b512-tauto-c12-twopass-pers", "v8-b256-t32-c12-twopass-rows",
                       "v8-b256-t32-c4-twopass-rows", "v0-b256-t32-c8-twopass-rows"}));
  EXPECT_EQ(safer_neighbour(all_variants().front()), all_variants().front());
}

TEST(SoftmaxPolicyTest, BenchmarkFiguresSteerTowardTheirRule) {
  auto after_flagship = [](const ReportDigest& d) {
    OfflinePolicy p(3);
    p.next(nullptr);
    p.decide(passed_pending()); // flagship
    return p.decide(d);
  };
  PolicyDecision d = after_flagship(timed({{"wide", 0.7}}));
  EXPECT_EQ(d.rules, std::vector<std::string>{"bandwidth:whole_row_cached"});
  EXPECT_EQ(variant_name(d.variant), "v16-b1024-tauto-c4-online-pers");
  d = after_flagship(timed({{"launch_bound", 0.3}}));
  EXPECT_EQ(d.rules, std::vector<std::string>{"small:more_blocks"});
  EXPECT_EQ(d.variant.block_threads, 256);
  d = after_flagship(timed({{"wide", 0.95}}, 1.1, "long_scoreboard"));
  EXPECT_EQ(d.rules, std::vector<std::string>{"stall:more_loads_in_flight"});
  EXPECT_EQ(variant_name(d.variant), "v16-b1024-tauto-c3-online-pers");
  d = after_flagship(timed({{"wide", 0.95}}, 1.1, "barrier"));
  EXPECT_EQ(d.rules, std::vector<std::string>{"stall:fewer_barriers"});
  EXPECT_EQ(d.variant.block_threads, 256);
  ReportDigest spills = passed_pending();
  spills.spill_bytes = 8;
  d = after_flagship(spills);
  EXPECT_EQ(d.rules, std::vector<std::string>{"spills:fewer_cached"});
  EXPECT_EQ(d.variant.cached_units, 3);
  // Nothing new from the rules: an untried curated member, then the last passing one.
  OfflinePolicy p(3);
  std::set<std::string> seen{variant_name(p.next(nullptr).variant)};
  for (std::size_t i = 1; i < all_variants().size() + 2; ++i) {
    const PolicyDecision e = p.decide(timed({{"wide", 0.95}}, 1.2));
    seen.insert(variant_name(e.variant));
    const std::string expected = i == 1                      ? "pass:flagship"
                                 : i < all_variants().size() ? "explore:random_untried"
                                                             : "done:resubmit_best";
    EXPECT_EQ(e.rules, std::vector<std::string>{expected}) << i;
  }
  EXPECT_EQ(seen.size(), all_variants().size());
}

TEST(SoftmaxPolicyTest, SameSeedAndDigestsGiveTheSameDecisions) {
  auto run = [](std::uint64_t seed) {
    OfflinePolicy p(seed);
    std::vector<std::string> names{variant_name(p.next(nullptr).variant)};
    for (int i = 0; i < 6; ++i)
      names.push_back(variant_name(p.decide(timed({{"wide", 0.95}}, 1.2)).variant));
    return names;
  };
  EXPECT_EQ(run(11), run(11));
}

} // namespace
} // namespace kloop::softmax
