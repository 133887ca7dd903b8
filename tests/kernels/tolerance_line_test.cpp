// Both sides of the tolerance line, with the reference oracle and the CPU correctness core on the
// whole public suite, per dtype (CASES.md Q7; kernels/rmsnorm/contract.cpp states the bounds):
// inside, the numerical differences real kernels have (another summation order or a wider
// accumulator, rsqrt within its 2-ulp error bound, the normalised value rounded to the output type
// before a 16-bit weight multiply, the weight multiplied first) and outputs moved by up to the
// declared ULPs pass; just beyond, outputs moved by a few more ULPs fail, and the reason names the
// element (row, column), expected and actual, the error in ULPs of the output dtype and the bound.
#include <cmath>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "evaluator/correctness.h"
#include "tests/kernels/rmsnorm_calls.h"

namespace kloop::evaluator {
namespace {

using rms_test::RmsCandidate;
using rmsnorm::EpsScalar;
using ::testing::HasSubstr;

// x rounded to `dtype` (round to nearest even), as a kernel's cast to T does.
float round_to(DType dtype, float v) {
  HostTensor t = HostTensor::zeros({1}, dtype);
  t.set(0, v);
  return t.get(0);
}

// Knobs of an emulated kernel; the defaults are the contract's reference formula.
struct Variant {
  bool sequential = false;          // sum x^2 front to back in float32 (not pairwise)
  bool wide = false;                // sum in double
  int rsqrt_ulps = 0;               // scale moved this many float32 ulps up (rsqrtf: <= 2)
  bool round_before_weight = false; // y = T(T(x * scale) * w): vLLM's order, two roundings
  bool weight_first = false;        // y = T(x * (w * scale))
};

RmsCandidate emulated(Variant v) {
  return [v](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    const rmsnorm::Validation val = rmsnorm::validate(x, w, e);
    if (!val.ok()) return rms_test::raised(RaisedError{val.error, {}});
    HostTensor y = HostTensor::zeros(x.shape(), x.dl_type());
    std::vector<float> row(static_cast<std::size_t>(val.h));
    for (std::int64_t r = 0; r < val.rows; ++r) {
      for (std::int64_t j = 0; j < val.h; ++j)
        row[j] = x.get(r, j);
      float ss = 0;
      if (v.wide) {
        double d = 0;
        for (float f : row)
          d += static_cast<double>(f) * f;
        ss = static_cast<float>(d);
      } else if (v.sequential) {
        for (float f : row)
          ss += f * f;
      } else {
        ss = rmsnorm::row_sum_of_squares(row.data(), val.h);
      }
      float scale = 1.0f / std::sqrt(ss / static_cast<float>(val.h) + val.eps32);
      // rsqrt's error bound applies to finite results; rsqrt(Inf) is exactly 0 on the device too.
      for (int k = 0; k < v.rsqrt_ulps && std::isfinite(scale) && scale != 0; ++k)
        scale = std::nextafter(scale, INFINITY);
      for (std::int64_t j = 0; j < val.h; ++j) {
        const float xf = row[j], wf = w.get(j);
        float out;
        if (v.round_before_weight) // the 16-bit product of two 16-bit values is exact in float
          out = round_to(x.dtype(), xf * scale) * wf;
        else if (v.weight_first)
          out = xf * (wf * scale);
        else
          out = (xf * scale) * wf;
        y.set(r * val.h + j, out);
      }
    }
    return rms_test::output_only(std::move(y));
  };
}

// `v` moved `k` ulps of `dtype` away from zero (crossing at most one binade boundary upward).
double moved(DType dtype, double v, int k) {
  const double a = std::abs(v), ulp = rmsnorm::output_ulp(dtype, a);
  const double boundary = rmsnorm::output_ulp(dtype, a) == rmsnorm::output_ulp(dtype, 0)
                              ? INFINITY // subnormal: even spacing up to the first normal
                              : std::exp2(std::floor(std::log2(a)) + 1);
  const double room = (boundary - a) / ulp; // steps before the next binade
  const double out = k <= room ? a + k * ulp : boundary + (k - room) * 2 * ulp;
  return std::copysign(out, v);
}

// The reference's output with every non-zero finite element moved `k` ulps of its dtype away
// from zero (exact zeros, which an honest kernel writes exactly, stay).
RmsCandidate moved_ulps(int k) {
  return [k](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    auto r = rmsnorm::reference(x, w, e);
    if (!r.output) return rms_test::raised(RaisedError{r.error, {}});
    HostTensor y = *r.output;
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      const double v = y.get(i);
      if (v != 0 && std::isfinite(v)) y.set(i, static_cast<float>(moved(y.dtype(), v, k)));
    }
    return rms_test::output_only(std::move(y));
  };
}

// The public suite's cases of one dtype (valid inputs and invalid ones alike).
std::vector<rmsnorm::CaseSpec> public_cases_of(DType d) {
  std::vector<rmsnorm::CaseSpec> out;
  for (auto& s : rmsnorm::public_cases(11))
    if (s.dtype == d) out.push_back(std::move(s));
  return out;
}

std::string first_failure(const SuiteResult& s) {
  return s.pass ? "" : s.to_json()["first_failure"].dump();
}

class ToleranceLineTest : public testing::TestWithParam<DType> {};

TEST_P(ToleranceLineTest, LegitimateNumericalDifferencesPass) {
  const auto specs = public_cases_of(GetParam());
  ASSERT_GT(specs.size(), 20u);
  // Two emulated kernels cover every difference: each suite run costs seconds.
  const std::vector<std::pair<std::string, Variant>> variants = {
      {"sequential sum, rsqrt 2 ulp high, rounded to T before the weight multiply",
       {.sequential = true, .rsqrt_ulps = 2, .round_before_weight = true}},
      {"double accumulator, weight multiplied first", {.wide = true, .weight_first = true}},
  };
  for (const auto& [name, v] : variants) {
    const SuiteResult s = rms_test::run_suite(emulated(v), specs, true);
    EXPECT_TRUE(s.pass) << name << ": " << first_failure(s);
  }
}

// ULPs of the output that always pass, and a few more that must not (contract.cpp: float16 and
// bfloat16 rtol are two ulps at the bottom of a binade; float32's 1e-4 is 838.9 ulps there).
int inside_ulps(DType d) {
  return d == DType::kFloat32 ? 838 : 2;
}
int beyond_ulps(DType d) {
  return d == DType::kFloat32 ? 1000 : 3;
}

TEST_P(ToleranceLineTest, OutputsMovedByTheDeclaredUlpsPassAndAFewMoreFail) {
  const DType d = GetParam();
  const auto specs = public_cases_of(d);
  const SuiteResult inside = rms_test::run_suite(moved_ulps(inside_ulps(d)), specs, true);
  EXPECT_TRUE(inside.pass) << first_failure(inside);
  const SuiteResult beyond = rms_test::run_suite(moved_ulps(beyond_ulps(d)), specs, true);
  ASSERT_FALSE(beyond.pass);
  const CaseResult& f = beyond.cases.at(*beyond.first_failure);
  ASSERT_TRUE(f.comparison && f.comparison->breach) << f.reason;
  const ToleranceBreach& b = *f.comparison->breach;
  EXPECT_EQ(b.dtype, dtype_name(d));
  EXPECT_NEAR(b.ulps, beyond_ulps(d), 1.0) << f.reason; // one binade crossing at most
  EXPECT_GE(b.row, 0);
  EXPECT_GE(b.column, 0);
  EXPECT_THAT(f.reason, HasSubstr(fmt::format("(row {}, column {})", b.row, b.column)));
  EXPECT_THAT(f.reason, HasSubstr("ulp of " + std::string(dtype_name(d))));
  if (b.rule == "row") { // a row of tiny values: within atol element-wise, not relatively
    EXPECT_GT(b.row_ratio, b.row_rtol) << f.reason;
  } else {
    EXPECT_EQ(b.rule, "elementwise");
    EXPECT_GT(b.ulps, b.allowed_ulps);
    EXPECT_THAT(f.reason, HasSubstr("is allowed"));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ToleranceLineTest,
                         testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(ToleranceBreachTest, ReasonAndEvidenceNameTheElementUlpsAndBound) {
  // float16 [2, 3]: element 4 (row 1, column 1) is 4 ulps high; 1.0 has an ulp of 2^-10.
  const HostTensor expected =
      HostTensor::from_values({2, 3}, DType::kFloat16, {1, 2, 3, 0.5f, 1.0f, -1});
  const HostTensor actual =
      HostTensor::from_values({2, 3}, DType::kFloat16, {1, 2, 3, 0.5f, 1.0f + 4 * 0x1.0p-10f, -1});
  const Comparison c = compare(actual, expected, rmsnorm::tolerance_for(DType::kFloat16));
  ASSERT_FALSE(c.pass);
  ASSERT_TRUE(c.breach);
  EXPECT_EQ(c.breach->index, 4);
  EXPECT_EQ(c.breach->row, 1);
  EXPECT_EQ(c.breach->column, 1);
  EXPECT_DOUBLE_EQ(c.breach->ulps, 4.0);
  EXPECT_DOUBLE_EQ(c.breach->allowed, 1e-5 + 2e-3);
  EXPECT_NEAR(c.breach->allowed_ulps, (1e-5 + 2e-3) * 1024, 1e-9);
  EXPECT_EQ(c.reason, "1 element(s) exceed |a-e| <= 1e-05 + 0.002*|e|; worst at element 4 (row 1, "
                      "column 1): expected 1, got 1.00390625, error 0.00391 = 4 ulp of float16 "
                      "where 0.00201 = 2.06 ulp is allowed");
  const nlohmann::json j = c.to_json()["breach"];
  EXPECT_EQ(j["rule"], "elementwise");
  EXPECT_EQ(j["column"], 1);
  EXPECT_EQ(j["ulps"], 4.0);
  // A passing comparison has no breach.
  EXPECT_FALSE(compare(expected, expected, rmsnorm::tolerance_for(DType::kFloat16)).breach);
}

TEST(ToleranceBreachTest, RowRuleNamesTheRowsLargestError) {
  // P5: zeros for the tiny row [1e-8, -1e-8] pass atol but not the row check.
  const HostTensor expected = HostTensor::from_values({1, 2}, DType::kFloat32, {0.7f, -0.7f});
  const HostTensor zeros = HostTensor::from_values({1, 2}, DType::kFloat32, {0, 0});
  rmsnorm::Tolerance loose = rmsnorm::tolerance_for(DType::kFloat32);
  loose.atol = 1; // every element within atol: only the row rule can fail
  const Comparison c = compare(zeros, expected, loose);
  ASSERT_FALSE(c.pass);
  ASSERT_TRUE(c.breach);
  EXPECT_EQ(c.breach->rule, "row");
  EXPECT_EQ(c.breach->row, 0);
  EXPECT_DOUBLE_EQ(c.breach->row_ratio, 1.0);
  EXPECT_THAT(c.reason, HasSubstr("row 0 relative error 1 exceeds 0.0001"));
  EXPECT_THAT(c.reason, HasSubstr("ulp of float32"));
}

TEST(OutputUlpTest, SpacingPerDtypeIncludingSubnormals) {
  EXPECT_EQ(rmsnorm::output_ulp(DType::kFloat32, 1.0), 0x1.0p-23);
  EXPECT_EQ(rmsnorm::output_ulp(DType::kFloat32, 1.999), 0x1.0p-23);
  EXPECT_EQ(rmsnorm::output_ulp(DType::kFloat32, -2.0), 0x1.0p-22);
  EXPECT_EQ(rmsnorm::output_ulp(DType::kFloat32, 0.0), 0x1.0p-149);
  EXPECT_EQ(rmsnorm::output_ulp(DType::kFloat16, 1.0), 0x1.0p-10);
  EXPECT_EQ(rmsnorm::output_ulp(DType::kFloat16, 1e-7), 0x1.0p-24); // subnormal half
  EXPECT_EQ(rmsnorm::output_ulp(DType::kBFloat16, 1.0), 0x1.0p-7);
  EXPECT_EQ(rmsnorm::output_ulp(DType::kBFloat16, 3e38), 0x1.0p120);
}

} // namespace
} // namespace kloop::evaluator
