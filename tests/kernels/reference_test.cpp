// The CPU reference: every declared error with its message, the seed's arithmetic, and the
// CASES.md inputs P5, P11 and P12.
#include <algorithm>
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/reference.h"

namespace kloop::rmsnorm {
namespace {

using ::testing::HasSubstr;

HostTensor f32(std::vector<std::int64_t> shape, std::vector<float> v) {
  return HostTensor::from_values(std::move(shape), DType::kFloat32, v);
}

struct ErrorCase {
  const char* name;
  HostTensor x, w;
  EpsScalar eps;
  ErrorCode code;
  const char* message_part;
};

TEST(ReferenceErrorsTest, EveryDeclaredErrorHasItsCodeAndAMessageNamingTheArgument) {
  const HostTensor x = f32({2, 2}, {3, 4, 0, 0});
  const HostTensor w = f32({2}, {1, 2});
  const std::string huge = "1" + std::string(400, '0');
  const std::vector<ErrorCase> cases = {
      {"sparse x", x.with_layout(TensorLayout::kSparse), w, EpsScalar::of(1e-5),
       ErrorCode::kNonStridedLayout, "ordinary strided tensors"},
      {"sparse weight", x, w.with_layout(TensorLayout::kSparse), EpsScalar::of(1e-5),
       ErrorCode::kNonStridedLayout, "ordinary strided tensors"},
      {"0-d x", HostTensor::zeros({}, DType::kFloat32), w, EpsScalar::of(1e-5), ErrorCode::kBadRank,
       "at least 1 dimension"},
      {"H = 0", HostTensor::zeros({2, 0}, DType::kFloat32), HostTensor::zeros({0}, DType::kFloat32),
       EpsScalar::of(1e-5), ErrorCode::kBadWidth, "last dimension H must be > 0"},
      {"weight [3]", x, f32({3}, {1, 2, 3}), EpsScalar::of(1e-5), ErrorCode::kWeightShape,
       "weight must have shape [2]"},
      {"weight [1, 2]", x, f32({1, 2}, {1, 2}), EpsScalar::of(1e-5), ErrorCode::kWeightShape,
       "got [1,2]"},
      {"float64 x", x.to(kDLFloat64Type), w.to(kDLFloat64Type), EpsScalar::of(1e-5),
       ErrorCode::kUnsupportedDtype, "x dtype float64 is not supported"},
      {"int32 x", x.to(kDLInt32Type), w, EpsScalar::of(1e-5), ErrorCode::kUnsupportedDtype,
       "int32"},
      {"fp16 weight", x, w.to(to_dl(DType::kFloat16)), EpsScalar::of(1e-5),
       ErrorCode::kDtypeMismatch, "weight dtype float16 differs from x dtype float32"},
      {"cpu vs cuda", x, w.with_device(cuda_device(0)), EpsScalar::of(1e-5),
       ErrorCode::kDeviceMismatch, "x is on cpu but weight is on cuda:0"},
      {"cuda:0 vs cuda:1", x.with_device(cuda_device(0)), w.with_device(cuda_device(1)),
       EpsScalar::of(1e-5), ErrorCode::kDeviceMismatch, "cuda:1"},
      {"vulkan", x.with_device({kDLVulkan, 0}), w.with_device({kDLVulkan, 0}), EpsScalar::of(1e-5),
       ErrorCode::kUnsupportedDevice, "is not supported; use cpu or cuda"},
      {"bool eps", x, w, EpsScalar::other("bool"), ErrorCode::kEpsNotNumber,
       "eps must be an ordinary numeric scalar (float or int); got bool"},
      {"huge int eps", x, w, EpsScalar::integer_text(huge), ErrorCode::kEpsTooLarge,
       "eps is too large"},
      {"nan eps", x, w, EpsScalar::of(std::nan("")), ErrorCode::kEpsNotFinitePositive,
       "eps must be finite and positive"},
      {"inf eps", x, w, EpsScalar::of(HUGE_VAL), ErrorCode::kEpsNotFinitePositive, "got inf"},
      {"zero eps", x, w, EpsScalar::of(0.0), ErrorCode::kEpsNotFinitePositive, "got 0"},
      {"negative eps", x, w, EpsScalar::of(-1e-5), ErrorCode::kEpsNotFinitePositive, "-1e-05"},
      {"zero int eps", x, w, EpsScalar::integer(0), ErrorCode::kEpsNotFinitePositive, "int 0"},
      {"1e-50 eps", x, w, EpsScalar::of(1e-50), ErrorCode::kEpsFp32NotFinitePositive,
       "must stay finite and positive in float32"},
      {"1e39 eps", x, w, EpsScalar::of(1e39), ErrorCode::kEpsFp32NotFinitePositive,
       "rounds to inf"},
  };
  for (const auto& c : cases) {
    const ReferenceResult r = reference(c.x, c.w, c.eps);
    ASSERT_TRUE(r.error.has_value()) << c.name;
    EXPECT_FALSE(r.output.has_value()) << c.name;
    EXPECT_EQ(r.error->code, c.code) << c.name << ": " << r.error->message;
    EXPECT_THAT(r.error->message, HasSubstr(c.message_part)) << c.name;
    EXPECT_EQ(validate(c.x, c.w, c.eps).error->code, c.code) << c.name;
    EXPECT_EQ(parse_error_code(error_code_name(c.code)), c.code);
  }
}

TEST(ReferenceErrorsTest, LayoutIsCheckedBeforeShapeAndShapeBeforeDtype) {
  // The seed's order: layout, rank/width/weight shape, dtype, device, eps.
  const HostTensor x64 = HostTensor::zeros({2, 3}, kDLFloat64Type);
  EXPECT_EQ(validate(x64.with_layout(TensorLayout::kSparse), x64, EpsScalar::of(-1)).error->code,
            ErrorCode::kNonStridedLayout);
  EXPECT_EQ(validate(x64, HostTensor::zeros({2}, kDLFloat64Type), EpsScalar::of(-1)).error->code,
            ErrorCode::kWeightShape);
  EXPECT_EQ(validate(x64, HostTensor::zeros({3}, kDLFloat64Type), EpsScalar::of(-1)).error->code,
            ErrorCode::kUnsupportedDtype);
}

TEST(ReferenceTest, AcceptsSubnormalFloat32EpsAndIntEps) {
  const HostTensor x = f32({1, 2}, {3, 4});
  const HostTensor w = f32({2}, {1, 1});
  const Validation v = validate(x, w, EpsScalar::of(1e-40));
  ASSERT_TRUE(v.ok());
  EXPECT_GT(v.eps32, 0.0f);
  const Validation vi = validate(x, w, EpsScalar::integer(2));
  ASSERT_TRUE(vi.ok());
  EXPECT_EQ(vi.eps32, 2.0f);
  EXPECT_EQ(vi.rows, 1);
  EXPECT_EQ(vi.h, 2);
}

TEST(ReferenceTest, ComputesTheSeedExampleRow) {
  // Row [3, 4]: mean square 12.5; y = x / sqrt(12.5 + eps) * w.
  const ReferenceResult r =
      reference(f32({2, 2}, {3, 4, 0, 0}), f32({2}, {1, 2}), EpsScalar::of(1e-5));
  ASSERT_TRUE(r.output.has_value());
  const float scale = 1.0f / std::sqrt(12.5f + 1e-5f);
  EXPECT_EQ(r.output->get(0, 0), (3.0f * scale) * 1.0f);
  EXPECT_EQ(r.output->get(0, 1), (4.0f * scale) * 2.0f);
  EXPECT_EQ(r.output->get(1, 0), 0.0f); // zero row gives zeros
  EXPECT_EQ(r.output->get(1, 1), 0.0f);
}

TEST(ReferenceTest, EmptyOuterDimsGiveEmptyOutput) {
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{0, 4096}, {3, 0, 4096}}) {
    const ReferenceResult r =
        reference(HostTensor::zeros(shape, DType::kBFloat16),
                  HostTensor::zeros({4096}, DType::kBFloat16), EpsScalar::of(1e-5));
    ASSERT_TRUE(r.output.has_value());
    EXPECT_EQ(r.output->shape(), shape);
    EXPECT_EQ(r.output->numel(), 0);
  }
}

TEST(ReferenceTest, NonFiniteInputsFollowFloat32Semantics) {
  const float inf = std::numeric_limits<float>::infinity();
  const ReferenceResult r =
      reference(f32({2, 2}, {std::nanf(""), 1, inf, 2}), f32({2}, {1, 2}), EpsScalar::of(1e-5));
  ASSERT_TRUE(r.output.has_value());
  EXPECT_TRUE(std::isnan(r.output->get(0, 0)));
  EXPECT_TRUE(std::isnan(r.output->get(0, 1))); // NaN mean square poisons the row
  EXPECT_TRUE(std::isnan(r.output->get(1, 0))); // Inf * rsqrt(Inf) = Inf * 0
  EXPECT_EQ(r.output->get(1, 1), 0.0f);         // finite * 0
}

TEST(ReferenceTest, OneE19SquaresFiniteButTwoE19OverflowsToZeroOutput) {
  const ReferenceResult r =
      reference(f32({2, 1}, {1e19f, 2e19f}), f32({1}, {1}), EpsScalar::of(1e-5));
  ASSERT_TRUE(r.output.has_value());
  EXPECT_NEAR(r.output->get(0, 0), 1.0f, 1e-6f); // 1e38 is a finite float32 square
  EXPECT_EQ(r.output->get(1, 0), 0.0f);          // 4e38 overflows: rsqrt(inf) = 0
}

TEST(ReferenceTest, CasesMdP5TinyRowIsNotZero) {
  CaseSpec s;
  s.outer = {1};
  s.h = 2;
  s.values = ValueFamily::kTinyRow;
  s.weight = WeightFamily::kOnes;
  s.eps = EpsScalar::of(1.0);
  const CaseInputs in = materialize(s);
  const ReferenceResult r = reference(in.x, in.weight, in.eps);
  ASSERT_TRUE(r.output.has_value());
  EXPECT_FLOAT_EQ(r.output->get(0, 0), 1e-8f);
  EXPECT_FLOAT_EQ(r.output->get(0, 1), -1e-8f);
}

TEST(ReferenceTest, CasesMdP11Fp16ConstantRowNormalisesToOne) {
  const auto all = cases_md_cases();
  const auto it = std::find_if(all.begin(), all.end(),
                               [](const CaseSpec& c) { return c.name.starts_with("P11"); });
  ASSERT_NE(it, all.end());
  const CaseInputs in = materialize(*it);
  ASSERT_EQ(in.x.dtype(), DType::kFloat16);
  const ReferenceResult r = reference(in.x, in.weight, in.eps);
  ASSERT_TRUE(r.output.has_value());
  for (std::int64_t j = 0; j < 4096; ++j)
    ASSERT_EQ(r.output->get(0, j), 1.0f) << j;
}

TEST(ReferenceTest, CasesMdP12ZeroRowGivesZerosAndEpsIsHonoured) {
  for (double eps : {1e-6, 1e-5, 1e-12}) {
    CaseSpec s;
    s.outer = {2};
    s.h = 8192;
    s.values = ValueFamily::kZeroAndSmallRow;
    s.weight = WeightFamily::kOnes;
    s.eps = EpsScalar::of(eps);
    const CaseInputs in = materialize(s);
    const ReferenceResult r = reference(in.x, in.weight, in.eps);
    ASSERT_TRUE(r.output.has_value());
    const double expect = 1e-3 / std::sqrt(1e-6 + eps); // exact-arithmetic value
    for (std::int64_t j = 0; j < 8192; j += 1023) {
      EXPECT_EQ(r.output->get(0, j), 0.0f);
      EXPECT_NEAR(r.output->get(1, j), expect, 2e-6 * expect) << "eps " << eps;
    }
  }
}

TEST(ReferenceTest, PairwiseRowSumMatchesDoubleOnLongRows) {
  std::vector<float> v(65536);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 1.0f + static_cast<float>(i % 7) * 0.1f;
  double exact = 0;
  for (float f : v)
    exact += static_cast<double>(f) * f;
  EXPECT_NEAR(row_sum_of_squares(v.data(), 65536), exact, exact * 1e-6);
}

} // namespace
} // namespace kloop::rmsnorm
