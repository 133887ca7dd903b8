// `kloop compare --by generator` (store/generator_compare.h): the Wilson interval and the
// bootstrap of a geometric mean against values worked by hand, and a comparison over sessions
// written through the Store API (fixture.h) with promoted, rejected and pending ones.
#include <gtest/gtest.h>

#include <cmath>

#include "store/error.h"
#include "store/generator_compare.h"
#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

using testing::TempDir;

TEST(GeneratorCompare, WilsonIntervalMatchesTheClosedForm) {
  // k = 5 of n = 10, z = 1.96: centre 0.5, half-width 0.2634 (Wilson 1927).
  const auto a = wilson_interval(5, 10);
  ASSERT_TRUE(a);
  EXPECT_NEAR(a->first, 0.2366, 1e-4);
  EXPECT_NEAR(a->second, 0.7634, 1e-4);
  // 0 of 4: [0, z^2 / (n + z^2)] = [0, 0.4899], not the Wald interval's [0, 0].
  const auto b = wilson_interval(0, 4);
  EXPECT_NEAR(b->first, 0.0, 1e-12);
  EXPECT_NEAR(b->second, 0.4899, 1e-4);
  EXPECT_FALSE(wilson_interval(0, 0));
}

TEST(GeneratorCompare, GeomeanBootstrapIsExactInTheMeanAndReproducibleInTheInterval) {
  const auto g = geomean_bootstrap({2.0, 8.0});
  ASSERT_TRUE(g);
  EXPECT_NEAR(g->geomean, 4.0, 1e-12);
  ASSERT_TRUE(g->interval);
  EXPECT_GE(g->interval->first, 2.0 - 1e-12);
  EXPECT_LE(g->interval->second, 8.0 + 1e-12);
  EXPECT_LT(g->interval->first, g->interval->second);
  const auto again = geomean_bootstrap({2.0, 8.0});
  EXPECT_EQ(again->interval, g->interval);          // fixed seed: one report, one interval
  EXPECT_FALSE(geomean_bootstrap({1.5})->interval); // no interval from one value
  EXPECT_FALSE(geomean_bootstrap({}));
}

TEST(GeneratorCompare, RatesSpeedupsPairsFalseStartsAndCostPerGenerator) {
  TempDir t;
  Store st = Store::open(t.path() + "/s");
  // Generator a: two promoted sessions; generator b: one. Named as `kloop sweep task` names them.
  const auto name = [&](std::int64_t id, const std::string& gen) {
    st.set_session_param(id, "sweep",
                         {{"generator", gen},
                          {"operator", "rmsnorm"},
                          {"price_usd_per_mtok", {{"input", 1.0}, {"output", 1.0}}}});
  };
  const std::int64_t a1 = testing::write_fake_session(st, 2, "offline", "x"); // speed-up 1.25
  const std::int64_t a2 = testing::write_fake_session(st, 3, "offline", "x"); // speed-up 1.5
  const std::int64_t b1 = testing::write_fake_session(st, 1, "openai", "m");  // speed-up 1.0
  name(a1, "a");
  name(a2, "a");
  name(b1, "b");
  const auto cmp = compare_generators(st, std::nullopt);
  ASSERT_EQ(cmp["overall"].size(), 2u) << cmp.dump(2);
  const auto& a = cmp["overall"][0];
  const auto& b = cmp["overall"][1];
  EXPECT_EQ(a["generator"], "a");
  EXPECT_EQ(a["sessions"], 2);
  EXPECT_EQ(a["promoted"], 2);
  EXPECT_DOUBLE_EQ(a["success_rate"].get<double>(), 1.0);
  EXPECT_NEAR(a["speedup_geomean"].get<double>(), std::sqrt(1.25 * 1.5), 1e-9);
  EXPECT_TRUE(a["speedup_interval"].is_array());
  EXPECT_EQ(b["promoted"], 1);
  EXPECT_TRUE(b["speedup_interval"].is_null()); // one value
  // The fixture's earlier iterations are rejected at one gate each: counted as false starts.
  EXPECT_FALSE(a["false_starts"].empty()) << a.dump(2);
  EXPECT_EQ(a["iterations_to_first_pass"]["sessions_with_pass"], 2);
  // Every fixture session runs with seed 42: a1, a2 and b1 share (operator, seed), and the pair
  // takes the latest session of each generator (a2: 1.5 against b1: 1.0).
  ASSERT_FALSE(cmp["paired_speedup"].empty());
  const auto& p = cmp["paired_speedup"][0];
  EXPECT_EQ(p["a"], "a");
  EXPECT_EQ(p["pairs"], 1);
  EXPECT_NEAR(p["geomean_ratio"].get<double>(), 1.5, 1e-9);
  EXPECT_TRUE(a["cost_usd"].is_number());
  EXPECT_EQ(a["cost_usd_sessions_priced"], 2);
  // --operator takes the sweep's name or the contract's; another operator matches nothing.
  EXPECT_EQ(compare_generators(st, "rmsnorm")["sessions"], 3);
  EXPECT_EQ(compare_generators(st, "weighted_rmsnorm")["sessions"], 3);
  EXPECT_THROW(compare_generators(st, "softmax"), StoreError);
  const std::string text = format_generator_comparison(cmp);
  EXPECT_NE(text.find("paired speed-up a / b"), std::string::npos) << text;
  const std::string html = render_generator_comparison_html(cmp);
  EXPECT_NE(html.find("<svg id=\"speedup-geomean\""), std::string::npos);
  EXPECT_NE(html.find("<svg id=\"false-starts\""), std::string::npos);
}

} // namespace
} // namespace kloop::store
