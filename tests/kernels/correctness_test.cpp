// The correctness core: audit rules with their reasons, the comparison report, invalid inputs,
// suites and their JSON, and that honest fp32 variants pass the public suite.
#include <chrono>
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
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
using ::testing::HasSubstr;

HostTensor f32(std::vector<std::int64_t> shape, std::vector<float> v) {
  return HostTensor::from_values(std::move(shape), DType::kFloat32, v);
}
HostTensor ref(const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
  return *rmsnorm::reference(x, w, e).output;
}

const HostTensor kX = f32({2, 3}, {1, -2, 3, 0.5f, 0.25f, -4});
const HostTensor kW = f32({3}, {1, 0.5f, -2});
const EpsScalar kEps = EpsScalar::of(1e-5);

TEST(CorrectnessAuditTest, MutatedAliasedAndWrongShapeOutputsFailWithNamedReasons) {
  const Candidate writes_weight = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    HostTensor y = ref(x, w, e);
    HostTensor alias = w;
    alias.set(0, 7.0f);
    return output_only(y);
  };
  EXPECT_THAT(run_case(writes_weight, kX.clone(), kW.clone(), kEps).reason,
              HasSubstr("input weight was mutated"));
  const Candidate into_weight_storage = [](const HostTensor&, const HostTensor& w,
                                           const EpsScalar&) {
    return output_only(w.as_strided({2, 3}, {0, 1}, 0));
  };
  EXPECT_THAT(run_case(into_weight_storage, kX, kW, kEps).reason,
              HasSubstr("output aliases input weight"));
  const Candidate wrong_shape = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    return output_only(ref(x, w, e).view({3, 2}));
  };
  EXPECT_THAT(run_case(wrong_shape, kX, kW, kEps).reason, HasSubstr("output shape [3,2]"));
  const Candidate changes_meta = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    HostTensor y = ref(x, w, e);
    const_cast<HostTensor&>(x) = x.view({3, 2}); // the caller's object is not const
    return output_only(y);
  };
  HostTensor x = kX.clone();
  EXPECT_THAT(run_case(changes_meta, x, kW, kEps).reason, HasSubstr("input x metadata changed"));
}

TEST(CorrectnessAuditTest, AdapterAuditFailuresAndUndeclaredErrorsFail) {
  const Candidate guard = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    CandidateCall c = output_only(ref(x, w, e));
    c.audit_failures.push_back("guard bytes after y overwritten at byte 3");
    return c;
  };
  EXPECT_THAT(run_case(guard, kX, kW, kEps).reason, HasSubstr("audit: guard bytes"));
  const Candidate launch_error = [](const HostTensor&, const HostTensor&, const EpsScalar&) {
    return raised(RaisedError{std::nullopt, "cudaErrorInvalidValue"});
  };
  EXPECT_THAT(run_case(launch_error, kX, kW, kEps).reason,
              HasSubstr("raised on a valid input: cudaErrorInvalidValue"));
  const Candidate nothing = [](const HostTensor&, const HostTensor&, const EpsScalar&) {
    return CandidateCall{};
  };
  EXPECT_THAT(run_case(nothing, kX, kW, kEps).reason, HasSubstr("no output tensor"));
}

TEST(CorrectnessAuditTest, InvalidInputsMustRaiseTheSameDeclaredError) {
  const HostTensor bad_w = f32({4}, {1, 2, 3, 4});
  EXPECT_TRUE(run_case(rms_test::rms_reference(), kX, bad_w, kEps).pass);
  const Candidate ignores_validation = [](const HostTensor& x, const HostTensor&,
                                          const EpsScalar&) {
    return output_only(HostTensor::zeros(x.shape(), x.dl_type()));
  };
  EXPECT_THAT(run_case(ignores_validation, kX, bad_w, kEps).reason,
              HasSubstr("invalid input returned an output instead of raising weight_shape"));
  const Candidate wrong_code = [](const HostTensor&, const HostTensor&, const EpsScalar&) {
    return raised(RaisedError{rmsnorm::DeclaredError{rmsnorm::ErrorCode::kBadWidth, "H"}, {}});
  };
  EXPECT_THAT(run_case(wrong_code, kX, bad_w, kEps).reason,
              HasSubstr("must raise declared error weight_shape; got declared error bad_width"));
  EXPECT_TRUE(run_suite(rms_test::rms_reference(), rmsnorm::invalid_cases(3)).pass);
}

TEST(CorrectnessCompareTest, NanIsNoWildcardAndFiniteReferenceNeedsFiniteOutput) {
  const float inf = std::numeric_limits<float>::infinity();
  // P4: a row with +Inf makes the reference row NaN/0; garbage elsewhere must not hide in NaN.
  const HostTensor x = f32({2, 3}, {inf, 1, 2, 1, 2, 3});
  const HostTensor expected = ref(x, kW, kEps);
  HostTensor garbage = expected.clone();
  garbage.set(1, 5.0f); // expected NaN*... -> here the row is [NaN, 0, 0]; write 5 at a 0
  Comparison c = compare(garbage, expected, rmsnorm::tolerance_for(DType::kFloat32));
  EXPECT_FALSE(c.pass);
  HostTensor fake_inf = expected.clone();
  fake_inf.set(4, inf);
  c = compare(fake_inf, expected, rmsnorm::tolerance_for(DType::kFloat32));
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.nonfinite_mismatches, 1);
  EXPECT_EQ(c.first_nonfinite_index, 4);
  EXPECT_THAT(c.reason, HasSubstr("non-finite"));
  HostTensor neg = expected.clone();
  EXPECT_TRUE(std::isnan(neg.get(0)));
  neg.set(0, -inf);
  EXPECT_FALSE(compare(neg, expected, rmsnorm::tolerance_for(DType::kFloat32)).pass);
}

TEST(CorrectnessCompareTest, FiniteErrorsAreReportedSeparatelyWithTheWorstElement) {
  const HostTensor expected = f32({2, 2}, {1, std::nanf(""), 2, 4});
  HostTensor actual = f32({2, 2}, {1, 0, 2, 4.5f});
  const Comparison c = compare(actual, expected, rmsnorm::tolerance_for(DType::kFloat32));
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.nonfinite_mismatches, 1);
  EXPECT_EQ(c.tolerance_violations, 1);
  EXPECT_DOUBLE_EQ(c.max_abs_err, 0.5);
  EXPECT_DOUBLE_EQ(c.max_rel_err, 0.125);
  EXPECT_EQ(c.worst_index, 3);
  EXPECT_EQ(c.worst_row, 1);
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j["worst"]["index"], 3);
  EXPECT_EQ(j["nonfinite_mismatches"], 1);
}

TEST(CorrectnessCompareTest, OneUlpDifferencesInLowPrecisionOutputsPass) {
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    const float ulp = d == DType::kFloat16 ? 0x1.0p-10f : 0x1.0p-7f;
    const HostTensor expected = HostTensor::from_values({1, 3}, d, {1.0f, -1.0f, 0.5f});
    const HostTensor actual =
        HostTensor::from_values({1, 3}, d, {1.0f + ulp, -1.0f - ulp, 0.5f + 0.5f * ulp});
    EXPECT_TRUE(compare(actual, expected, rmsnorm::tolerance_for(d)).pass) << dtype_name(d);
    const HostTensor off = HostTensor::from_values({1, 3}, d, {1.0f + 4 * ulp, -1.0f, 0.5f});
    EXPECT_FALSE(compare(off, expected, rmsnorm::tolerance_for(d)).pass) << dtype_name(d);
  }
}

// An honest fp32 variant: sequential sum, multiply by (scale * w), different from the reference's
// order in every step the contract leaves free.
CandidateCall sequential_variant(const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
  const rmsnorm::Validation v = rmsnorm::validate(x, w, e);
  if (!v.ok()) return raised(RaisedError{v.error, {}});
  HostTensor y = HostTensor::zeros(x.shape(), x.dl_type());
  for (std::int64_t r = 0; r < v.rows; ++r) {
    float s = 0;
    for (std::int64_t j = v.h; j-- > 0;)
      s += x.get(r, j) * x.get(r, j);
    const float scale = 1.0f / std::sqrt(s * (1.0f / static_cast<float>(v.h)) + v.eps32);
    for (std::int64_t j = 0; j < v.h; ++j)
      y.set(r * v.h + j, (x.get(r, j) * scale) * w.get(j));
  }
  return output_only(y);
}

TEST(CorrectnessSuiteTest, ReferenceAndAnHonestVariantPassThePublicSuite) {
  const auto specs = rmsnorm::public_cases(11);
  const SuiteResult ref_result = run_suite(rms_test::rms_reference(), specs);
  EXPECT_TRUE(ref_result.pass) << ref_result.to_json()["first_failure"].dump();
  EXPECT_EQ(ref_result.passed, static_cast<std::int64_t>(specs.size()));
  const SuiteResult variant = run_suite(sequential_variant, specs);
  EXPECT_TRUE(variant.pass) << variant.to_json()["first_failure"].dump();
}

// Preparing cases ahead on other threads (SuiteRunOptions::prepare_ahead, issue 26) changes no
// result, no order and no callback: the public suite with the reference and with a candidate that
// fails part-way (stopping there), each with 0 and 4 cases ahead.
TEST(CorrectnessSuiteTest, PreparingCasesAheadGivesTheSameResultsInTheSameOrder) {
  std::vector<nlohmann::json> specs;
  for (const auto& spec : rmsnorm::public_cases(11))
    specs.push_back(spec.to_json());
  const Candidate wrong_on_wide_rows = [](const HostTensor& x, const HostTensor& w,
                                          const EpsScalar& e) {
    HostTensor y = ref(x, w, e);
    if (x.shape().back() > 1000 && y.numel() > 0) y.set(0, y.get(0) + 1.0f);
    return output_only(y);
  };
  const std::vector<Candidate> candidates = {rms_test::rms_reference(), wrong_on_wide_rows};
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    std::vector<std::string> order[2];
    nlohmann::json results[2];
    for (int k = 0; k < 2; ++k) {
      SuiteRunOptions o;
      o.stop_at_first_failure = true;
      o.prepare_ahead = k == 0 ? 0 : 4;
      o.before_case = [&, k](std::size_t i, const nlohmann::json& spec) {
        order[k].push_back(std::to_string(i) + " " + spec.value("name", std::string()));
      };
      o.after_case = [&, k](const CaseResult& r) { order[k].push_back("done " + r.case_name); };
      SuiteResult s;
      run_suite(rms_test::rms(), rms_test::adapt(candidates[c]), specs, s, o);
      results[k] = s.to_json();
    }
    EXPECT_EQ(results[0], results[1]) << "candidate " << c;
    EXPECT_EQ(order[0], order[1]) << "candidate " << c;
    EXPECT_EQ(results[0]["pass"], c == 0) << "candidate " << c;
    if (c == 1) {
      EXPECT_LT(results[0]["cases"].size(), specs.size()); // it stopped part-way
    }
  }
}

// A callback that throws (the GPU worker's sticky fault) ends a run with cases prepared ahead
// cleanly: the finished cases stay, the exception reaches the caller.
TEST(CorrectnessSuiteTest, AThrowingCallbackEndsARunWithCasesPreparedAhead) {
  std::vector<nlohmann::json> specs;
  for (const auto& spec : rmsnorm::public_cases(11))
    specs.push_back(spec.to_json());
  SuiteRunOptions o;
  o.prepare_ahead = 4;
  o.after_case = [](const CaseResult& r) {
    if (r.case_spec.is_object()) throw std::runtime_error("sticky");
  };
  SuiteResult s;
  EXPECT_THROW(run_suite(rms_test::rms(), rms_test::adapt(rms_test::rms_reference()), specs, s, o),
               std::runtime_error);
  EXPECT_EQ(s.cases.size(), 1u);
}

TEST(CorrectnessSuiteTest, MisplacedEpsIsRejectedOnCasesMdP12) {
  // eps added outside the square root: scale = 1 / (sqrt(ms) + eps).
  const Candidate misplaced = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    const rmsnorm::Validation v = rmsnorm::validate(x, w, e);
    HostTensor y = HostTensor::zeros(x.shape(), x.dl_type());
    for (std::int64_t r = 0; r < v.rows; ++r) {
      float s = 0;
      for (std::int64_t j = 0; j < v.h; ++j)
        s += x.get(r, j) * x.get(r, j);
      const float scale = 1.0f / (std::sqrt(s / static_cast<float>(v.h)) + v.eps32);
      for (std::int64_t j = 0; j < v.h; ++j)
        y.set(r * v.h + j, x.get(r, j) * scale * w.get(j));
    }
    return output_only(y);
  };
  int checked = 0;
  for (const auto& spec : rmsnorm::cases_md_cases()) {
    // With eps 1e-12 << ms = 1e-6 both placements agree to float32 precision; 1e-6 and 1e-5 differ.
    if (!spec.name.starts_with("P12") || spec.name.find("eps1e-12") != std::string::npos) continue;
    ++checked;
    EXPECT_FALSE(run_case(misplaced, spec).pass) << spec.name;
  }
  EXPECT_EQ(checked, 2);
}

TEST(CorrectnessSuiteTest, FirstFailureCarriesTheCaseSpecReasonAndWorstElement) {
  // A candidate that ignores the weight's sign fails, and the report says where.
  const Candidate abs_weight = [](const HostTensor& x, const HostTensor& w, const EpsScalar& e) {
    HostTensor wa = w.contiguous();
    for (std::int64_t j = 0; j < wa.numel(); ++j)
      wa.set(j, std::abs(wa.get(j)));
    auto r = rmsnorm::reference(x, wa, e);
    if (!r.output) return raised(RaisedError{r.error, {}});
    return output_only(*r.output);
  };
  const SuiteResult s = run_suite(abs_weight, rmsnorm::cases_md_cases(), true);
  EXPECT_FALSE(s.pass);
  ASSERT_TRUE(s.first_failure.has_value());
  EXPECT_EQ(s.cases.size(), *s.first_failure + 1); // stopped at the first failure
  const nlohmann::json j = s.to_json();
  const auto& f = j["first_failure"];
  EXPECT_FALSE(f["pass"].get<bool>());
  EXPECT_EQ(rmsnorm::CaseSpec::from_json(f["spec"]).name, f["case"].get<std::string>());
  EXPECT_GE(f["comparison"]["worst"]["index"].get<std::int64_t>(), 0);
  EXPECT_THAT(f["reason"].get<std::string>(), HasSubstr("exceed"));
}

} // namespace
} // namespace kloop::evaluator
