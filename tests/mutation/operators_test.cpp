// Mutation operators: deterministic site enumeration and the exact rewrite of each operator on a
// small fixture source (one line per kind of site), plus their sites in the real baseline.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "mutation/operators.h"
#include "tests/support/test_files.h"

namespace kloop::mutation {
namespace {

// Line numbers are referenced by the expectations below.
const std::string kFixture = R"(// fixture: comments are never mutated: i < nv + eps
__device__ float to_f(__half v) {
  return __half2float(v);
}
__device__ float sum(float* red, int nwarps, int H, float eps, const T* w, int j) {
  if (lane == 0) red[warp] = v;
  __syncthreads(); // producers first
  float s = 0.f;
  for (int i = 0; i < nwarps; ++i)
    s = fmaf(red[i], red[i], s);
  for (int j = t; j < H; j += G)
    c = j < H ? to_f(xr[j]) : 0.f;
  for (int o = 16; o > 0; o >>= 1) {}
  const float q = rsqrtf(s / static_cast<float>(H) + eps);
  y[j] = from_f<T>((to_f(x[j]) * q) * to_f(w[j]));
  row(x + r * xs, y + r * ys);
  ss += vec_sumsq<T>(cache[k]);
  if (H <= 512) return;
}
extern "C" __global__ void k(const float* x, const float* weight, float* y, long long rows) {
  rms_impl<float>(x, weight, y, rows, H, x_row_stride, y_row_stride, eps);
}
)";

// (line, mutated text) of every site of `op`, in site order; single-edit mutants only.
std::vector<std::pair<int, std::string>> sites(const std::string& op) {
  std::vector<std::pair<int, std::string>> out;
  for (const Mutant& m : mutants_of(kFixture, op)) {
    EXPECT_EQ(m.edits.size(), 1u) << m.id;
    out.emplace_back(m.edits.front().line, m.edits.front().after);
  }
  return out;
}

using Sites = std::vector<std::pair<int, std::string>>;

TEST(MutationOperatorsTest, BarrierRemoveDeletesTheCallAndKeepsTheComment) {
  EXPECT_EQ(sites("barrier-remove"), (Sites{{7, "  /* barrier removed */ // producers first"}}));
}

TEST(MutationOperatorsTest, BarrierMoveInsertsAboveThePreviousStatementAndRemovesTheOriginal) {
  const auto ms = mutants_of(kFixture, "barrier-move");
  ASSERT_EQ(ms.size(), 1u);
  ASSERT_EQ(ms[0].edits.size(), 2u);
  EXPECT_EQ(ms[0].edits[0].line, 6);
  EXPECT_EQ(ms[0].edits[0].after,
            "  __syncthreads(); // mutant: moved up\n  if (lane == 0) red[warp] = v;");
  EXPECT_EQ(ms[0].edits[1].line, 7);
  EXPECT_EQ(ms[0].edits[1].after, "  /* barrier moved */ // producers first");
  EXPECT_EQ(ms[0].line, 6);
  EXPECT_NE(ms[0].source.find("  __syncthreads(); // mutant: moved up\n  if (lane == 0)"),
            std::string::npos);
}

TEST(MutationOperatorsTest, RelationalFlipTurnsLessIntoLessEqualAndBack) {
  EXPECT_EQ(sites("relational-flip"),
            (Sites{{9, "  for (int i = 0; i <= nwarps; ++i)"}, {18, "  if (H < 512) return;"}}));
}

TEST(MutationOperatorsTest, RowOverrunReadsOrWritesOnePastTheRow) {
  EXPECT_EQ(sites("row-overrun"), (Sites{{11, "  for (int j = t; j <= H; j += G)"},
                                         {12, "    c = j <= H ? to_f(xr[j]) : 0.f;"}}));
}

TEST(MutationOperatorsTest, BoundPlusAndMinusOneShiftLoopBoundsAndHalvingLoops) {
  EXPECT_EQ(sites("bound-plus-one"), (Sites{{9, "  for (int i = 0; i < nwarps + 1; ++i)"}}));
  EXPECT_EQ(sites("bound-minus-one"), (Sites{{9, "  for (int i = 0; i < nwarps - 1; ++i)"},
                                             {11, "  for (int j = t; j < H - 1; j += G)"},
                                             {12, "    c = j < H - 1 ? to_f(xr[j]) : 0.f;"},
                                             {13, "  for (int o = 16; o > 1; o >>= 1) {}"}}));
}

TEST(MutationOperatorsTest, TailPaddingBecomesNonIdentity) {
  EXPECT_EQ(sites("tail-padding"), (Sites{{12, "    c = j < H ? to_f(xr[j]) : 1.f;"}}));
}

TEST(MutationOperatorsTest, StrideAsWidthReplacesOneOrEveryRowStride) {
  EXPECT_EQ(sites("stride-as-width"),
            (Sites{{16, "  row(x + r * H, y + r * ys);"}, {16, "  row(x + r * xs, y + r * H);"}}));
  EXPECT_EQ(sites("stride-as-width-all"), (Sites{{16, "  row(x + r * H, y + r * H);"}}));
}

TEST(MutationOperatorsTest, NarrowOffsetCastsTheRowOffsetToInt) {
  EXPECT_EQ(sites("narrow-offset-32"),
            (Sites{{16, "  row(x + static_cast<int>(r * xs), y + r * ys);"},
                   {16, "  row(x + r * xs, y + static_cast<int>(r * ys));"}}));
}

TEST(MutationOperatorsTest, EpsAndWidthRulesRewriteTheScale) {
  EXPECT_EQ(sites("eps-drop"),
            (Sites{{14, "  const float q = rsqrtf(s / static_cast<float>(H));"}}));
  EXPECT_EQ(sites("eps-hardcode"),
            (Sites{{14, "  const float q = rsqrtf(s / static_cast<float>(H) + 1e-5f);"}}));
  EXPECT_EQ(sites("divide-rounded-width"),
            (Sites{{14, "  const float q = rsqrtf(s / static_cast<float>((H + 31) / 32 * 32) + "
                        "eps);"}}));
  EXPECT_EQ(sites("hardcode-width"),
            (Sites{{14, "  const float q = rsqrtf(s / 4096.f + eps);"},
                   {21, "  rms_impl<float>(x, weight, y, rows, 4096, x_row_stride, y_row_stride, "
                        "eps);"}}));
}

TEST(MutationOperatorsTest, SkipWeightAndHalfAccumulationRewriteTheArithmetic) {
  EXPECT_EQ(sites("skip-weight-fp32"),
            (Sites{{15, "  y[j] = from_f<T>((to_f(x[j]) * q) * (sizeof(T) == 4 ? 1.f : "
                        "to_f(w[j])));"}}));
  EXPECT_EQ(sites("half-accumulation"),
            (Sites{{10, "    s = __half2float(__float2half_rn(fmaf(red[i], red[i], s)));"},
                   {17, "  ss = __half2float(__float2half_rn(ss + vec_sumsq<T>(cache[k])));"}}));
}

TEST(MutationOperatorsTest, NonFiniteRulesRewriteTheLoadConversion) {
  EXPECT_EQ(sites("scrub-nonfinite"),
            (Sites{{3, "  return isfinite(__half2float(v)) ? (__half2float(v)) : 0.f;"}}));
  EXPECT_EQ(sites("clamp-nonfinite"),
            (Sites{{3, "  return fminf(fmaxf(__half2float(v), -3.0e38f), 3.0e38f);"}}));
}

TEST(MutationOperatorsTest, ModuleScopeStateAddsAWritableStaticCounter) {
  EXPECT_EQ(sites("module-scope-state"),
            (Sites{{21, "  { static unsigned long long kloop_calls = 0; kloop_calls += 1; } "
                        "rms_impl<float>(x, weight, y, rows, H, x_row_stride, y_row_stride, "
                        "eps);"}}));
}

TEST(MutationOperatorsTest, MutantCarriesIdDiffAndWholeSource) {
  const auto ms = mutants_of(kFixture, "eps-drop");
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].id, "eps-drop#0");
  EXPECT_EQ(ms[0].line, 14);
  EXPECT_EQ(ms[0].diff(), "L14: -  const float q = rsqrtf(s / static_cast<float>(H) + eps);\n"
                          "L14: +  const float q = rsqrtf(s / static_cast<float>(H));");
  EXPECT_EQ(ms[0].source.size() + 6, kFixture.size()); // " + eps" removed, nothing else
  EXPECT_EQ(ms[0].to_json().at("op"), "eps-drop");
}

TEST(MutationOperatorsTest, UnknownOperatorAndStaleEditsThrow) {
  EXPECT_THROW(mutants_of(kFixture, "no-such-op"), std::invalid_argument);
  EXPECT_THROW(apply_edits("a\nb\n", {{2, "c", "d"}}), std::invalid_argument);
  EXPECT_THROW(apply_edits("a\nb\n", {{3, "", "d"}}), std::invalid_argument);
  EXPECT_EQ(apply_edits("a\nb\n", {{2, "b", "x\ny"}}), "a\nx\ny\n");
  EXPECT_EQ(apply_edits("a\nb", {{1, "a", ""}}), "\nb");
}

TEST(MutationOperatorsTest, SelectionCapsPerOperatorSpreadsSitesAndIsDeterministic) {
  const auto one = select_mutants(kFixture, {"bound-minus-one"}, 2, 0);
  ASSERT_EQ(one.size(), 2u); // sites 0 and 2 of 4 (i * n / k)
  EXPECT_EQ(one[0].id, "bound-minus-one#0");
  EXPECT_EQ(one[1].id, "bound-minus-one#2");
  const auto rr = select_mutants(kFixture, {"bound-minus-one", "eps-drop"}, 3, 3);
  ASSERT_EQ(rr.size(), 3u); // round-robin: op A site, op B site, op A site
  EXPECT_EQ(rr[0].op, "bound-minus-one");
  EXPECT_EQ(rr[1].op, "eps-drop");
  EXPECT_EQ(rr[2].op, "bound-minus-one");
  const auto again = select_mutants(kFixture, {}, 3, 0);
  const auto twice = select_mutants(kFixture, {}, 3, 0);
  ASSERT_EQ(again.size(), twice.size());
  for (std::size_t i = 0; i < again.size(); ++i)
    EXPECT_EQ(again[i].source, twice[i].source);
}

TEST(MutationOperatorsTest, SelectionDropsMutantsIdenticalToTheOriginalOrAnEarlierOne) {
  // The same operator listed twice produces the same sources: each is kept once.
  const std::string src = "  x = y < H;\n";
  const auto ms = select_mutants(src, {"row-overrun", "row-overrun"}, 3, 0);
  EXPECT_EQ(ms.size(), 1u);
}

// row_softmax/1's own rules on its baseline: the exact rewrite of each one's first site.
TEST(MutationOperatorsTest, SoftmaxRulesRewriteTheBaselinesIdioms) {
  const std::string src = test_support::read_file(std::string(KLOOP_SOURCE_DIR) +
                                                  "/kernels/softmax/baseline/kernel.cu");
  auto first = [&](const char* op) {
    const auto ms = mutants_of(src, op);
    return ms.empty() ? std::string("(no site)") : ms.front().edits.front().after;
  };
  auto trimmed = [](std::string s) { return s.substr(s.find_first_not_of(' ')); };
  EXPECT_EQ(trimmed(first("softmax-no-max")), "return 0.f;");
  EXPECT_EQ(trimmed(first("softmax-no-shift-guard")), "return m;");
  EXPECT_EQ(trimmed(first("softmax-max-from-zero")), "Stat st{0.f, 0.f};");
  EXPECT_EQ(trimmed(first("softmax-no-rescale")), "return 1.f;");
  EXPECT_EQ(trimmed(first("softmax-half-sum")),
            "add = __half2float(__float2half_rn(add + __expf(u.at(k) - sh)));");
  EXPECT_EQ(trimmed(first("softmax-skip-tail-sum")), "/* tail not summed */;");
  EXPECT_EQ(trimmed(first("softmax-zero-masked-rows"))
                .rfind("const float inv = s > 0.f ? 1.f / s : 0.f;", 0),
            0u);
  EXPECT_EQ(trimmed(first("softmax-stride-as-width")),
            "row_softmax<T, true>(x + r * n, y + r * ys, n, t, G, active, red, parity);");
  EXPECT_EQ(mutants_of(src, "softmax-stride-as-width").size(), 4u); // x and y, both paths
  EXPECT_NE(first("softmax-row-overrun").find("j <= n;"), std::string::npos);
  EXPECT_NE(first("softmax-unit-overrun").find("<= nu"), std::string::npos);
  EXPECT_NE(first("module-scope-state").find("kloop_calls += 1; } softmax_impl<float>"),
            std::string::npos);
  EXPECT_NE(first("hardcode-width").find("rows, 4096, x_row_stride"), std::string::npos);
}

// Every rule of an operator's vocabulary has sites in that operator's in-tree baseline; a rule
// outside weighted_rmsnorm/1's vocabulary has none in its baseline (so "every rule" selects the
// same RMSNorm mutants as its vocabulary, tests/pins); every rule belongs to a vocabulary.
TEST(MutationOperatorsTest, EveryOperatorHasSitesInItsOperatorsBaseline) {
  std::set<std::string> covered;
  for (const char* name : {"rmsnorm", "softmax"}) {
    const op::Operator* o = op::find_operator(name);
    ASSERT_NE(o, nullptr);
    const std::string src = test_support::read_file(std::string(KLOOP_SOURCE_DIR) + "/" +
                                                    o->baseline_folder() + "/kernel.cu");
    const std::vector<std::string> vocab = vocabulary(o->contract_id());
    EXPECT_FALSE(vocab.empty()) << name;
    for (const std::string& op : vocab) {
      EXPECT_FALSE(mutants_of(src, op).empty()) << op << " has no site in " << name;
      covered.insert(op);
    }
    if (std::string(name) != "rmsnorm") continue;
    for (const OperatorInfo& op : operators()) {
      if (std::find(vocab.begin(), vocab.end(), op.name) != vocab.end()) continue;
      EXPECT_TRUE(mutants_of(src, op.name).empty()) << op.name << " has a site in rmsnorm";
    }
  }
  for (const OperatorInfo& op : operators())
    EXPECT_TRUE(covered.count(std::string(op.name))) << op.name << " is in no vocabulary";
  EXPECT_TRUE(vocabulary("no_such/1").empty());
  EXPECT_FALSE(is_operator("bogus"));
  EXPECT_TRUE(is_operator("barrier-remove"));
  EXPECT_TRUE(is_operator("softmax-no-shift-guard"));
}

} // namespace
} // namespace kloop::mutation
