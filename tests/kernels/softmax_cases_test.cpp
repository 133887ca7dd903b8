// row_softmax/1 case families: determinism and pinned hashes of the suites, the holdout and the
// search pool; JSON round trips and named errors; the layouts' strides; each value family's
// declared property; the suites' coverage (widths, layouts, dtypes, the non-finite rows, the
// target shape, calls past 2^31 elements) and size.
#include <cmath>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/softmax/cases.h"
#include "kernels/softmax/operator.h"

namespace kloop::softmax {
namespace {

using ::testing::HasSubstr;

HostTensor x_of(const CaseSpec& s) {
  return materialize(s).tensors.at(0);
}

CaseSpec spec(ValueFamily f, DType d, std::vector<std::int64_t> outer, std::int64_t n) {
  CaseSpec s;
  s.name = "t";
  s.family = "test";
  s.dtype = d;
  s.outer = std::move(outer);
  s.n = n;
  s.values = f;
  s.seed = 99;
  return s;
}

// sha256 of a text, through the contract hash's function.
std::string sha(const std::string& text) {
  return op::sha256_text_hex(text);
}

std::string suite_text(const std::vector<nlohmann::json>& specs) {
  return nlohmann::json(specs).dump();
}

TEST(SoftmaxCasesTest, SameSpecGivesSameBytesAndOtherSeedsDiffer) {
  CaseSpec s = spec(ValueFamily::kNormal, DType::kBFloat16, {5}, 129);
  s.layout = LayoutKind::kSlicedGaps;
  s.gap = 3;
  const HostTensor a = x_of(s), b = x_of(s);
  EXPECT_EQ(a.value_bytes(), b.value_bytes());
  EXPECT_EQ(std::vector<std::byte>(a.storage_bytes().begin(), a.storage_bytes().end()),
            std::vector<std::byte>(b.storage_bytes().begin(), b.storage_bytes().end()));
  s.seed = 100;
  EXPECT_NE(x_of(s).value_bytes(), a.value_bytes());
}

TEST(SoftmaxCasesTest, SpecsRoundTripThroughJsonAndBadFieldsAreNamed) {
  for (const CaseSpec& s : public_cases(1))
    ASSERT_EQ(CaseSpec::from_json(s.to_json()), s) << s.name;
  nlohmann::json j = public_cases(1).front().to_json();
  auto error_of = [](const nlohmann::json& bad) {
    try {
      (void)CaseSpec::from_json(bad);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json bad = j;
  bad["values"] = "gaussian";
  EXPECT_THAT(error_of(bad), HasSubstr("'values'"));
  EXPECT_THAT(error_of(bad), HasSubstr("causal_mask"));
  bad = j;
  bad.erase("n");
  EXPECT_THAT(error_of(bad), HasSubstr("missing field 'n'"));
  bad = j;
  bad["outer"] = {1, "two"};
  EXPECT_THAT(error_of(bad), HasSubstr("'outer'"));
  bad = j;
  bad["dtype"] = "float64";
  EXPECT_THAT(error_of(bad), HasSubstr("'dtype'"));
  bad = j;
  bad["seed"] = -1;
  EXPECT_THAT(error_of(bad), HasSubstr("'seed'"));
  EXPECT_THAT(error_of(nlohmann::json::array()), HasSubstr("JSON object"));
  CaseSpec neg = spec(ValueFamily::kNormal, DType::kFloat32, {2}, -1);
  EXPECT_THROW((void)materialize(neg), std::invalid_argument);
}

TEST(SoftmaxCasesTest, LayoutsProduceTheDeclaredStridesWithNanGaps) {
  CaseSpec s = spec(ValueFamily::kNormal, DType::kFloat16, {4}, 100);
  s.layout = LayoutKind::kSlicedGaps;
  s.gap = 12;
  HostTensor x = x_of(s);
  EXPECT_EQ(x.strides(), (std::vector<std::int64_t>{112, 1}));
  EXPECT_TRUE(std::isnan(x.as_strided({1}, {1}, 100).get(0))); // the gap after row 0
  s.layout = LayoutKind::kStorageOffset;
  s.offset = 3;
  s.gap = 0;
  x = x_of(s);
  EXPECT_EQ(x.offset(), 3);
  EXPECT_TRUE(std::isnan(x.as_strided({1}, {1}, 0).get(0)));
  s.offset = 0;
  s.layout = LayoutKind::kTransposed;
  x = x_of(s);
  EXPECT_EQ(x.strides(), (std::vector<std::int64_t>{1, 4}));
  s.layout = LayoutKind::kExpanded;
  x = x_of(s);
  EXPECT_EQ(x.strides(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(x.get(0, 7), x.get(3, 7));
}

TEST(SoftmaxCasesTest, ValueFamiliesHaveTheirDeclaredProperties) {
  const std::int64_t n = 64;
  auto count_row = [&](const HostTensor& x, std::int64_t r, auto pred) {
    int c = 0;
    for (std::int64_t j = 0; j < n; ++j)
      c += pred(x.get(r, j)) ? 1 : 0;
    return c;
  };
  const auto is_neg_inf = [](float v) { return std::isinf(v) && v < 0; };
  const auto is_finite = [](float v) { return std::isfinite(v); };
  HostTensor x = x_of(spec(ValueFamily::kCausalMask, DType::kFloat32, {70}, n));
  for (std::int64_t r = 0; r < 70; ++r)
    EXPECT_EQ(count_row(x, r, is_finite), r % n + 1) << r;
  x = x_of(spec(ValueFamily::kAllNegInf, DType::kBFloat16, {4}, n));
  EXPECT_EQ(count_row(x, 0, is_neg_inf), n);
  EXPECT_EQ(count_row(x, 1, is_finite), n);
  x = x_of(spec(ValueFamily::kNanInf, DType::kFloat16, {4}, n));
  EXPECT_EQ(count_row(x, 0, [](float v) { return std::isnan(v); }), 1);
  EXPECT_EQ(count_row(x, 1, [](float v) { return std::isinf(v) && v > 0; }), 1);
  EXPECT_GE(count_row(x, 2, [](float v) { return std::isinf(v); }), 1);
  EXPECT_EQ(count_row(x, 3, is_neg_inf), 1);
  x = x_of(spec(ValueFamily::kNegInfElements, DType::kFloat32, {8}, n));
  int masked = 0;
  for (std::int64_t r = 0; r < 8; ++r)
    masked += count_row(x, r, is_neg_inf);
  EXPECT_GT(masked, 8 * n / 8);
  EXPECT_LT(masked, 8 * n / 2);
  x = x_of(spec(ValueFamily::kConstantRows, DType::kFloat32, {5}, n));
  for (std::int64_t r = 0; r < 5; ++r)
    EXPECT_EQ(count_row(x, r, [&](float v) { return v == x.get(r, 0); }), n) << r;
  EXPECT_EQ(x.get(2, 0), -1e4f);
  EXPECT_EQ(x.get(3, 0), 1e4f);
  x = x_of(spec(ValueFamily::kLargePositive, DType::kFloat16, {3}, n));
  EXPECT_EQ(count_row(x, 1, [](float v) { return v > 9950 && v < 10050; }), n);
  for (DType d : kAllDTypes) {
    x = x_of(spec(ValueFamily::kNearMax, d, {3}, n));
    const double max = d == DType::kFloat16 ? 65504.0 : 3.3e38;
    EXPECT_EQ(
        count_row(x, 0, [&](float v) { return std::isfinite(v) && std::fabs(v) >= max / 2.1; }), n)
        << dtype_name(d);
  }
  x = x_of(spec(ValueFamily::kAscending, DType::kFloat32, {2}, n));
  for (std::int64_t j = 1; j < n; ++j)
    EXPECT_GT(x.get(1, j), x.get(1, j - 1));
  x = x_of(spec(ValueFamily::kOneHot, DType::kBFloat16, {2}, n));
  EXPECT_EQ(count_row(x, 0, [](float v) { return v == 30.0f; }), 1);
  x = x_of(spec(ValueFamily::kSubnormals, DType::kFloat32, {1}, n));
  EXPECT_EQ(count_row(x, 0, [](float v) { return std::fpclassify(v) == FP_SUBNORMAL; }), n);
}

TEST(SoftmaxCasesTest, InvalidCasesRaiseEachDeclaredErrorForEveryDtype) {
  const op::Operator& op = operator_instance();
  std::multiset<std::string> codes;
  for (const CaseSpec& s : invalid_cases(1)) {
    const op::Validated v = op.validate(materialize(s));
    ASSERT_FALSE(v.ok()) << s.name;
    codes.insert(v.error->code);
  }
  EXPECT_EQ(codes.count("non_strided_layout"), 3u);
  EXPECT_EQ(codes.count("bad_rank"), 3u);
  EXPECT_EQ(codes.count("unsupported_dtype"), 6u);
  EXPECT_EQ(codes.count("unsupported_device"), 3u);
}

TEST(SoftmaxCasesTest, PublicSuiteCoversWidthsLayoutsValuesAndStaysModest) {
  const auto cases = public_cases(1);
  std::set<std::string> names;
  std::int64_t elements = 0;
  std::set<std::pair<std::string, std::string>> value_dtype;
  std::set<std::int64_t> widths;
  std::set<std::string> layouts;
  for (const CaseSpec& s : cases) {
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    elements += s.numel();
    value_dtype.insert(
        {std::string(value_family_name(s.values)), std::string(dtype_name(s.dtype))});
    widths.insert(s.n);
    layouts.insert(std::string(op::layout_kind_name(s.layout)));
  }
  for (const char* f :
       {"logits", "large_positive", "large_negative", "near_max", "constant_rows", "causal_mask",
        "neg_inf_elements", "all_neg_inf", "nan_inf", "ascending", "one_hot", "subnormals"})
    for (DType d : kAllDTypes)
      EXPECT_TRUE(value_dtype.count({f, std::string(dtype_name(d))})) << f << " " << dtype_name(d);
  for (std::int64_t n : {0, 1, 7, 31, 33, 127, 129, 1009, 1025, 4099, 32768, 65536})
    EXPECT_TRUE(widths.count(n)) << n;
  EXPECT_EQ(layouts, (std::set<std::string>{"contiguous", "transposed", "sliced_gaps",
                                            "storage_offset", "expanded", "3d"}));
  EXPECT_LT(elements, 40'000'000) << "the CPU reference must stay quick";
  EXPECT_GT(elements, 5'000'000);
  // The invalid calls are part of the public suite.
  EXPECT_EQ(std::count_if(cases.begin(), cases.end(),
                          [](const CaseSpec& s) { return s.invalid != InvalidKind::kNone; }),
            15);
}

TEST(SoftmaxCasesTest, LargeCasesReachTheTargetShapeAndPastTwoToTheThirtyOneElements) {
  const auto cases = large_cases(1);
  std::set<std::string> past_2e31;
  bool target = false, over_65535_rows = false, over_2gib = false;
  for (const CaseSpec& s : cases) {
    if (s.numel() > (std::int64_t{1} << 31)) past_2e31.insert(std::string(dtype_name(s.dtype)));
    target = target || (s.dtype == DType::kBFloat16 && s.rows() == 16384 && s.n == 32768);
    over_65535_rows = over_65535_rows || s.rows() > 65535;
    over_2gib = over_2gib || s.numel() * static_cast<std::int64_t>(dtype_bytes(s.dtype)) >
                                 (std::int64_t{1} << 31);
  }
  EXPECT_EQ(past_2e31, (std::set<std::string>{"float32", "float16", "bfloat16"}));
  EXPECT_TRUE(target);
  EXPECT_TRUE(over_65535_rows);
  EXPECT_TRUE(over_2gib);
}

TEST(SoftmaxCasesTest, HoldoutDiffersFromThePublicSuiteAndKeepsItsBudget) {
  const op::Operator& op = operator_instance();
  const auto h = op.holdout_suite(42, 96, 24'000'000);
  ASSERT_EQ(h.size(), 96u);
  EXPECT_EQ(nlohmann::json(h), nlohmann::json(op.holdout_suite(42, 96, 24'000'000)));
  EXPECT_NE(nlohmann::json(h), nlohmann::json(op.holdout_suite(43, 96, 24'000'000)));
  std::int64_t elements = 0;
  bool wide = false, row_scales = false;
  std::set<std::string> dtypes;
  for (const auto& j : h) {
    const CaseSpec s = CaseSpec::from_json(j);
    elements += s.numel();
    wide = wide || s.n > 32768;
    row_scales = row_scales || s.values == ValueFamily::kRowScales;
    dtypes.insert(std::string(dtype_name(s.dtype)));
    EXPECT_EQ(s.family, "holdout");
  }
  EXPECT_LE(elements, 24'000'000 + 96 * 65536);
  EXPECT_TRUE(wide);
  EXPECT_TRUE(row_scales); // a holdout-only family
  EXPECT_EQ(dtypes.size(), 3u);
  for (const CaseSpec& s : public_cases(1))
    EXPECT_NE(s.values, ValueFamily::kRowScales) << s.name;
  EXPECT_EQ(op.holdout_version(), "row_softmax-holdout/1");
}

TEST(SoftmaxCasesTest, SearchPoolHasAnAlignedVectorStratumAndHoldoutStyleCases) {
  const auto pool = search_pool_cases(5, 40, 8, 1 << 20);
  ASSERT_EQ(pool.size(), 48u);
  int aligned = 0;
  for (std::size_t i = 0; i < 40; ++i) {
    const CaseSpec& s = pool[i];
    EXPECT_EQ(s.name, "pool-" + std::to_string(i));
    EXPECT_EQ(s.invalid, InvalidKind::kNone);
    if (i % 4 != 3) continue;
    const std::int64_t stride = s.n + s.gap;
    EXPECT_EQ(stride * static_cast<std::int64_t>(dtype_bytes(s.dtype)) % 16, 0) << s.name;
    EXPECT_GE(s.rows(), 600) << s.name;
    ++aligned;
  }
  EXPECT_EQ(aligned, 10);
  EXPECT_EQ(pool[40].name, "pool-h0");
}

// What the suites are, pinned: a change to a family, a width list, a seed formula or the spec
// layout changes these hashes and with them the meaning of every stored row_softmax/1 session.
TEST(SoftmaxCasesTest, SuiteHoldoutAndPoolHashesArePinned) {
  const op::Operator& op = operator_instance();
  EXPECT_EQ(op.suite("public", 1).size(), 361u);
  EXPECT_EQ(sha(suite_text(op.suite("public", 1))),
            "d589f8d975209ba83b17c7ca06a777fa9988277efa52308a88007e3e364e96a5");
  EXPECT_EQ(sha(suite_text(op.suite("public", 7))),
            "f16d0243e7de48580ee8e456dbedd7c367738b638d27e7e269dae78d5e6e3a8b");
  EXPECT_EQ(sha(suite_text(op.suite("large", 1))),
            "0935070ae673a7bdff522ded910f12a457b230372dbdb862961cc07eb9be30ae");
  EXPECT_EQ(sha(suite_text(op.suite("invalid", 1))),
            "58f2716032d0fa1b93044f2d1b7e876680dcaa05352b56bb43e24098bce3c8ac");
  EXPECT_EQ(sha(suite_text(op.holdout_suite(1234, 64, 16'000'000))),
            "f23fd0608e66863fd1ca8710c8ea7a5d51657afd3aba0c78e0eef25ba0610322");
  EXPECT_EQ(sha(suite_text(op.search_pool(9, 120, 40, 1 << 20))),
            "b861c1dc507cf55bf890a473d3509aa4276e8da8c327d4b091c59ece8d9ff66b");
  EXPECT_THROW((void)op.suite("cases_md", 1), std::invalid_argument);
}

// The bytes of every public case of at most 2^16 elements (x's whole storage: values, NaN gaps
// and offsets), pinned.
TEST(SoftmaxCasesTest, MaterializedInputsOfSmallPublicCasesArePinned) {
  std::string all;
  int hashed = 0;
  for (const nlohmann::json& j : operator_instance().suite("public", 1)) {
    const CaseSpec s = CaseSpec::from_json(j);
    if (s.numel() > (1 << 16)) continue;
    const HostTensor x = operator_instance().materialize(j).tensors.at(0);
    const auto bytes = x.storage_bytes();
    all += s.name + ":" +
           sha(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())) + ";" +
           nlohmann::json(x.shape()).dump() + nlohmann::json(x.strides()).dump() +
           std::to_string(x.offset()) + "\n";
    ++hashed;
  }
  EXPECT_EQ(hashed, 324);
  EXPECT_EQ(sha(all), "8dc4e1bfa8ce835a69479e4291354c8eb7b3b462079cf3ca805ef233b4dae6bf");
}

} // namespace
} // namespace kloop::softmax
