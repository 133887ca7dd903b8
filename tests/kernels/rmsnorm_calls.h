// Test support: weighted_rmsnorm calls in the (x, weight, eps) form the seed's examples use,
// adapted to the operator-generic correctness core (evaluator/correctness.h), so that the tests
// keep their candidates' natural signatures.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "evaluator/correctness.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/operator.h"
#include "kernels/rmsnorm/reference.h"

namespace kloop::evaluator::rms_test {

using RmsCandidate = std::function<CandidateCall(const HostTensor& x, const HostTensor& weight,
                                                 const rmsnorm::EpsScalar& eps)>;

inline const op::Operator& rms() {
  return rmsnorm::operator_instance();
}

inline CandidateCall output_only(HostTensor y) {
  CandidateCall c;
  c.outputs.push_back(std::move(y));
  return c;
}

inline CandidateCall raised(RaisedError e) {
  CandidateCall c;
  c.error = std::move(e);
  return c;
}

inline CandidateFn adapt(RmsCandidate f) {
  return [f = std::move(f)](const op::CallArgs& a) {
    return f(a.tensors[0], a.tensors[1], a.scalars[0]);
  };
}

// The operator's reference as an (x, weight, eps) candidate.
inline RmsCandidate rms_reference() {
  return [](const HostTensor& x, const HostTensor& w, const rmsnorm::EpsScalar& e) {
    return reference_candidate(rms())(op::CallArgs{{x, w}, {e}});
  };
}

inline CaseResult run_case(const RmsCandidate& c, const HostTensor& x, const HostTensor& w,
                           const rmsnorm::EpsScalar& eps,
                           const std::optional<op::Tolerance>& tol = std::nullopt) {
  return evaluator::run_case(rms(), adapt(c), op::CallArgs{{x, w}, {eps}}, tol);
}

inline CaseResult run_case(const RmsCandidate& c, const rmsnorm::CaseSpec& spec) {
  return evaluator::run_case(rms(), adapt(c), spec.to_json());
}

inline SuiteResult run_suite(const RmsCandidate& c, const std::vector<rmsnorm::CaseSpec>& specs,
                             bool stop_at_first_failure = false) {
  std::vector<nlohmann::json> j;
  for (const auto& s : specs)
    j.push_back(s.to_json());
  return evaluator::run_suite(rms(), adapt(c), j, stop_at_first_failure);
}

} // namespace kloop::evaluator::rms_test
