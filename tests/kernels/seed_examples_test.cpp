// Every executable example of the seed chapter, translated: the visible-shape-only candidate, the
// audit table, zeros on the tiny row, 1e19 vs 2e19 in float32, and the coupled eps relation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>

#include "evaluator/correctness.h"
#include "tests/kernels/rmsnorm_calls.h"

namespace kloop::evaluator {
namespace {

using rmsnorm::EpsScalar;
using Candidate = rms_test::RmsCandidate;
using rms_test::output_only;
using rms_test::raised;
using rms_test::run_case;
using rms_test::run_suite;

HostTensor f32(std::vector<std::int64_t> shape, std::vector<float> v) {
  return HostTensor::from_values(std::move(shape), DType::kFloat32, v);
}

HostTensor scaled(const HostTensor& x, float a) {
  HostTensor y = x.contiguous();
  for (std::int64_t i = 0; i < y.numel(); ++i)
    y.set(i, a * y.get(i));
  return y;
}

HostTensor arange(std::vector<std::int64_t> shape) {
  std::vector<float> v;
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  for (std::int64_t i = 0; i < n; ++i)
    v.push_back(static_cast<float>(i));
  return f32(std::move(shape), v);
}

// The seed's bad_candidate: correct on the visible contiguous 2x4 float32 shape, zeros otherwise.
CandidateCall visible_shape_only(const HostTensor& x, const HostTensor& w, const EpsScalar& eps) {
  HostTensor y = HostTensor::zeros(x.shape(), x.dl_type());
  if (x.shape() == std::vector<std::int64_t>{2, 4} && x.is_contiguous() &&
      x.dtype() == DType::kFloat32) {
    for (std::int64_t r = 0; r < 2; ++r) {
      float ms = 0;
      for (int j = 0; j < 4; ++j)
        ms += x.get(r, j) * x.get(r, j);
      const float scale = 1.0f / std::sqrt(ms / 4.0f + static_cast<float>(eps.value));
      for (int j = 0; j < 4; ++j)
        y.set(r * 4 + j, x.get(r, j) * scale * w.get(j));
    }
  }
  return output_only(y);
}

TEST(SeedExamplesTest, VisibleShapeOnlyCandidatePassesFourVisibleCasesAndIsRejected) {
  const HostTensor base = f32({2, 4}, {0.5f, -1.0f, 2.0f, -0.25f, 3.0f, 0.25f, -2.0f, 1.0f});
  const HostTensor weight4 = f32({4}, {1.0f, 0.5f, -0.75f, 2.0f});
  HostTensor arange15 = arange({3, 5});
  for (std::int64_t i = 0; i < 15; ++i)
    arange15.set(i, arange15.get(i) + 0.5f);
  HostTensor ones5 = f32({5}, {1, 1, 1, 1, 1});
  // torch.arange(8.0).reshape(4, 2).t() + 0.5 keeps the transposed strides (1, 2).
  HostTensor noncontig = arange({4, 2});
  for (std::int64_t i = 0; i < 8; ++i)
    noncontig.set(i, noncontig.get(i) + 0.5f);
  noncontig = noncontig.t();
  ASSERT_EQ(noncontig.strides(), (std::vector<std::int64_t>{1, 2}));
  const std::vector<std::pair<HostTensor, HostTensor>> cases = {{base, weight4},
                                                                {scaled(base, 3.0f), weight4},
                                                                {scaled(base, 0.01f), weight4},
                                                                {scaled(base, -1.0f), weight4},
                                                                {arange15, ones5},
                                                                {noncontig, weight4}};
  std::vector<bool> passed_close, passed_kloop;
  const EpsScalar eps = EpsScalar::of(1e-5);
  for (const auto& [x, w] : cases) {
    const HostTensor expected = *rmsnorm::reference(x, w, eps).output;
    const HostTensor actual = visible_shape_only(x, w, eps).outputs.at(0);
    passed_close.push_back(assert_close(actual, expected, 1e-6, 1e-5, false).pass);
    passed_kloop.push_back(run_case(visible_shape_only, x, w, eps).pass);
  }
  const std::vector<bool> want = {true, true, true, true, false, false};
  EXPECT_EQ(passed_close, want);
  EXPECT_EQ(passed_kloop, want);
  const bool promote =
      std::all_of(passed_kloop.begin(), passed_kloop.end(), [](bool p) { return p; });
  EXPECT_FALSE(promote); // candidate disposition: REJECT
}

TEST(SeedExamplesTest, AuditTableAcceptsReferenceCasesAndRejectsEveryDefect) {
  const HostTensor base = f32({2, 2}, {3, 4, 0, 0});
  const HostTensor weight = f32({2}, {1, 2});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const HostTensor special = f32({2, 2}, {nan, 1, inf, 2});
  const Candidate ref = rms_test::rms_reference();
  const Candidate mutate_after_computing = [](const HostTensor& x, const HostTensor& w,
                                              const EpsScalar& e) {
    CandidateCall call = rms_test::rms_reference()(x, w, e);
    HostTensor alias = x; // same storage: x.add_(1)
    for (std::int64_t i = 0; i < alias.numel(); ++i)
      alias.set(i, alias.get(i) + 1.0f);
    return call;
  };
  const Candidate return_input = [](const HostTensor& x, const HostTensor&, const EpsScalar&) {
    return output_only(x);
  };
  const Candidate wrong_dtype = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    return output_only(rmsnorm::reference(x, w, e).output->to(kDLFloat64Type));
  };
  const Candidate scrub_nans = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    HostTensor y = *rmsnorm::reference(x, w, e).output;
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      const float v = y.get(i);
      if (std::isnan(v)) y.set(i, 0.0f); // nan_to_num
      if (std::isinf(v))
        y.set(i, v > 0 ? std::numeric_limits<float>::max() : std::numeric_limits<float>::lowest());
    }
    return output_only(y);
  };
  const Candidate raises = [](const HostTensor&, const HostTensor&,
                              const EpsScalar&) -> CandidateCall {
    throw std::runtime_error("candidate failed");
  };
  struct Row {
    const char* name;
    Candidate fn;
    HostTensor x;
    bool pass;
  };
  const std::vector<Row> rows = {
      {"reference ordinary", ref, base.clone(), true},
      {"reference empty outer dimension", ref, HostTensor::zeros({0, 2}, DType::kFloat32), true},
      {"reference expanded input", ref, base.slice(0, 0, 1).expand({3, 2}), true},
      {"reference non-finite policy", ref, special, true},
      {"correct values but mutated input", mutate_after_computing, base.clone(), false},
      {"aliased zero output", return_input, HostTensor::zeros({1, 2}, DType::kFloat32), false},
      {"empty output returns input", return_input, HostTensor::zeros({0, 2}, DType::kFloat32),
       false},
      {"wrong output dtype", wrong_dtype, base, false},
      {"silently replaced NaNs", scrub_nans, special, false},
      {"candidate raised an error", raises, base, false},
  };
  for (const auto& row : rows) {
    const CaseResult r = run_case(row.fn, row.x, weight, EpsScalar::of(1e-5));
    EXPECT_EQ(r.pass, row.pass) << row.name << ": " << r.reason;
    if (!row.pass) {
      EXPECT_FALSE(r.reason.empty()) << row.name;
    }
  }
}

TEST(SeedExamplesTest, ZerosOnTinyRowPassLooseAtolFailTightAtolAndFailKloopPolicy) {
  const HostTensor x = f32({1, 2}, {1e-8f, -1e-8f});
  const HostTensor ones = f32({2}, {1, 1});
  const HostTensor expected = *rmsnorm::reference(x, ones, EpsScalar::of(1.0)).output;
  const HostTensor zeros = HostTensor::zeros({1, 2}, DType::kFloat32);
  EXPECT_TRUE(assert_close(zeros, expected, 1e-6, 1e-5, false).pass);
  EXPECT_FALSE(assert_close(zeros, expected, 1e-10, 1e-5, false).pass);
  const Comparison c = compare(zeros, expected, rmsnorm::tolerance_for(DType::kFloat32));
  EXPECT_FALSE(c.pass);
  EXPECT_NE(c.reason.find("row 0 relative error"), std::string::npos) << c.reason;
  const Candidate zero_candidate = [](const HostTensor& xx, const HostTensor&, const EpsScalar&) {
    return output_only(HostTensor::zeros(xx.shape(), xx.dl_type()));
  };
  EXPECT_FALSE(run_case(zero_candidate, x, ones, EpsScalar::of(1.0)).pass);
  EXPECT_TRUE(run_case(rms_test::rms_reference(), x, ones, EpsScalar::of(1.0)).pass);
}

TEST(SeedExamplesTest, OneE19SquaresFiniteTwoE19OverflowsAndDirectFp32LosesIt) {
  volatile float a = 1e19f, b = 2e19f; // volatile: evaluate in float32 at run time
  EXPECT_TRUE(std::isfinite(a * a));
  EXPECT_FALSE(std::isfinite(b * b));
  const float direct = b * (1.0f / std::sqrt(b * b + 1e-5f));
  const double wide = 2e19 * (1.0 / std::sqrt(2e19 * 2e19 + 1e-5));
  EXPECT_EQ(direct, 0.0f);
  EXPECT_LT(std::abs(wide - 1.0), 1e-12);
}

TEST(SeedExamplesTest, CoupledEpsRelationHoldsAndNaiveInvarianceDoesNot) {
  const HostTensor x = f32({1, 2}, {1e-3f, -1e-3f});
  const HostTensor w = f32({2}, {1, 1});
  const double eps = 1e-5, scale = 100.0;
  const HostTensor original = *rmsnorm::reference(x, w, EpsScalar::of(eps)).output;
  const HostTensor big = scaled(x, static_cast<float>(scale));
  const HostTensor fixed = *rmsnorm::reference(big, w, EpsScalar::of(eps)).output;
  const HostTensor coupled = *rmsnorm::reference(big, w, EpsScalar::of(scale * scale * eps)).output;
  EXPECT_NEAR(original.get(0), 0.301511, 5e-7);
  EXPECT_NEAR(fixed.get(0), 0.999500, 5e-7);
  EXPECT_NEAR(coupled.get(0), 0.301511, 5e-7);
  EXPECT_FALSE(assert_close(fixed, original, 1e-6, 1e-5, false).pass);  // naive
  EXPECT_TRUE(assert_close(coupled, original, 1e-6, 1e-5, false).pass); // coupled
}

} // namespace
} // namespace kloop::evaluator
