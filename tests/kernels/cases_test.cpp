// Case families: reproducible bytes, JSON round trip, layouts, and the suites' coverage.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kernels/rmsnorm/cases.h"

namespace kloop::rmsnorm {
namespace {

TEST(CasesTest, SameSpecGivesSameBytesAndDifferentSeedsDiffer) {
  CaseSpec s;
  s.name = "repro";
  s.dtype = DType::kBFloat16;
  s.outer = {3};
  s.h = 129;
  s.seed = 42;
  const CaseInputs a = materialize(s), b = materialize(s);
  EXPECT_EQ(a.x.value_bytes(), b.x.value_bytes());
  EXPECT_EQ(a.weight.value_bytes(), b.weight.value_bytes());
  s.seed = 43;
  EXPECT_NE(materialize(s).x.value_bytes(), a.x.value_bytes());
}

TEST(CasesTest, PrngMatchesIndependentXoshiroComputation) {
  // xoshiro256** seeded by splitmix64(0); values computed independently (Python, arbitrary
  // precision integers), so any change of generator or platform-dependent arithmetic is caught.
  Rng a(0);
  EXPECT_EQ(a.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(a.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(a.next(), 0x1a5f849d4933e6e0ull);
  Rng n(7);
  double sum = 0, sq = 0;
  for (int i = 0; i < 20000; ++i) {
    const double v = n.normal();
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / 20000, 0.0, 0.05);
  EXPECT_NEAR(sq / 20000, 1.0, 0.05);
}

TEST(CasesTest, EveryPublicSpecRoundTripsThroughJson) {
  for (const CaseSpec& s : public_cases(1)) {
    const CaseSpec back = CaseSpec::from_json(nlohmann::json::parse(s.to_json().dump()));
    if (s.eps.kind == EpsScalar::Kind::kFloat && std::isnan(s.eps.value)) {
      EXPECT_TRUE(std::isnan(back.eps.value));
      continue;
    }
    EXPECT_EQ(back, s) << s.name;
  }
}

TEST(CasesTest, FromJsonNamesTheBadField) {
  nlohmann::json j = public_cases(1).front().to_json();
  j["layout"] = "diagonal";
  try {
    (void)CaseSpec::from_json(j);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'layout'"), std::string::npos) << e.what();
  }
  j.erase("layout");
  EXPECT_THROW((void)CaseSpec::from_json(j), std::invalid_argument);
}

TEST(CasesTest, LayoutsProduceTheDeclaredStrides) {
  CaseSpec s;
  s.outer = {4};
  s.h = 8;
  s.layout = LayoutKind::kTransposed;
  EXPECT_EQ(materialize(s).x.strides(), (std::vector<std::int64_t>{1, 4}));
  s.layout = LayoutKind::kSlicedGaps;
  s.gap = 5;
  CaseInputs sliced = materialize(s);
  EXPECT_EQ(sliced.x.strides(), (std::vector<std::int64_t>{13, 1}));
  // Gap elements hold NaN so that a kernel reading them is caught.
  EXPECT_TRUE(std::isnan(sliced.x.as_strided({1}, {1}, 8).get(0)));
  s.layout = LayoutKind::kExpanded;
  CaseInputs e = materialize(s);
  EXPECT_EQ(e.x.strides()[0], 0);
  EXPECT_EQ(e.x.get(0, 3), e.x.get(3, 3));
  s.layout = LayoutKind::kStorageOffset;
  s.offset = 1;
  s.weight_offset = 1;
  CaseInputs o = materialize(s);
  EXPECT_EQ(o.x.offset(), 1);
  EXPECT_EQ(o.weight.offset(), 1);
  EXPECT_EQ(o.x.dl().byte_offset, 4u);
}

TEST(CasesTest, CasesMdP7IsAFusedBufferSliceThatDoesNotCollapse) {
  const auto all = cases_md_cases();
  const auto p7 = std::find_if(all.begin(), all.end(),
                               [](const CaseSpec& c) { return c.name.starts_with("P7"); });
  ASSERT_NE(p7, all.end());
  const CaseInputs in = materialize(*p7);
  EXPECT_EQ(in.x.shape(), (std::vector<std::int64_t>{4, 16, 128}));
  EXPECT_EQ(in.x.strides(), (std::vector<std::int64_t>{6144, 128, 1}));
  EXPECT_EQ(in.x.dtype(), DType::kBFloat16);
  EXPECT_FALSE(collapsed_row_stride(in.x).has_value());
}

TEST(CasesTest, RandomWeightsAreSignedWithExactZerosAndBoundedMagnitudes) {
  CaseSpec s;
  s.outer = {1};
  s.h = 4096;
  const CaseInputs in = materialize(s);
  int zeros = 0, neg = 0;
  for (std::int64_t j = 0; j < s.h; ++j) {
    const float w = in.weight.get(j);
    if (w == 0) {
      ++zeros;
      continue;
    }
    if (w < 0) ++neg;
    EXPECT_GE(std::abs(w), 1e-3f * 0.999f);
    EXPECT_LE(std::abs(w), 10.0f);
  }
  EXPECT_GT(zeros, 0);
  EXPECT_GT(neg, 1000);
}

TEST(CasesTest, PublicSuiteCoversRequiredFamiliesForAllDtypesAndStaysModest) {
  const auto cases = public_cases(7);
  std::set<std::string> names;
  std::int64_t elements = 0;
  std::set<std::int64_t> widths;
  std::set<LayoutKind> layouts;
  std::set<ValueFamily> values;
  for (const auto& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    elements += c.numel();
    widths.insert(c.h);
    layouts.insert(c.layout);
    values.insert(c.values);
  }
  for (std::int64_t h : {1, 2, 127, 128, 129, 511, 512, 513, 1009, 4096, 4099, 8192}) {
    EXPECT_TRUE(widths.count(h)) << h;
  }
  EXPECT_EQ(layouts.size(), 6u);
  EXPECT_GE(values.size(), 12u);
  EXPECT_LT(elements, 50'000'000);
  for (DType d : kAllDTypes) {
    EXPECT_TRUE(names.count(fmt::format("transposed-7x1009-{}", dtype_name(d))));
    EXPECT_TRUE(names.count(fmt::format("empty-3x0x4096-{}", dtype_name(d))));
  }
  // Per dtype, a strided case with more rows than a persistent grid has blocks (132 SMs x 32),
  // 16-byte-aligned row strides (vector paths run), a width that is no power of two and eps !=
  // 1e-5.
  for (DType d : kAllDTypes) {
    bool found = false;
    for (const auto& c : cases) {
      const std::int64_t stride_bytes = (c.h + c.gap) * static_cast<std::int64_t>(dtype_bytes(d));
      found |= c.dtype == d && c.layout == LayoutKind::kSlicedGaps && c.rows() > 132 * 32 &&
               c.gap > 0 && stride_bytes % 16 == 0 && (c.h & (c.h - 1)) != 0 &&
               c.h * static_cast<std::int64_t>(dtype_bytes(d)) > 2048 && c.eps.value >= 0.5;
    }
    EXPECT_TRUE(found) << dtype_name(d);
  }
  EXPECT_EQ(public_cases(7), cases); // reproducible from the seed
}

TEST(CasesTest, LargeCasesExceedTwoGiBAndSixtyFiveThousandRows) {
  bool big_bytes = false, many_rows = false;
  for (const auto& c : large_cases(1)) {
    big_bytes |= c.numel() * static_cast<std::int64_t>(dtype_bytes(c.dtype)) > (1ll << 31);
    many_rows |= c.rows() > 65535;
  }
  EXPECT_TRUE(big_bytes);
  EXPECT_TRUE(many_rows);
}

} // namespace
} // namespace kloop::rmsnorm
