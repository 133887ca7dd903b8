// run_case / run_suite: the audited candidate call (snapshot, call, audit, compare).
#include <exception>
#include <tuple>

#include <fmt/format.h>

#include "evaluator/correctness.h"

namespace kloop::evaluator {

using rmsnorm::CaseSpec;
using rmsnorm::EpsScalar;

namespace {

std::string raised_text(const RaisedError& e) {
  if (e.declared) {
    return fmt::format("declared error {}: {}", rmsnorm::error_code_name(e.declared->code),
                       e.declared->message);
  }
  return e.failure_text.empty() ? "an undeclared failure" : e.failure_text;
}

// Input audit: metadata and logical bytes unchanged. Returns a reason or empty.
std::string audit_inputs(const char* name, const HostTensor& t, const TensorMeta& meta_before,
                         const std::vector<std::byte>& bytes_before) {
  if (!(t.meta() == meta_before)) {
    return fmt::format("input {} metadata changed (was {}, now {})", name,
                       meta_before.to_json().dump(), t.meta().to_json().dump());
  }
  if (t.value_bytes() != bytes_before) {
    return fmt::format("input {} was mutated (its bytes differ after the call)", name);
  }
  return {};
}

CaseResult fail(CaseResult r, std::string reason) {
  r.pass = false;
  r.reason = std::move(reason);
  return r;
}

} // namespace

nlohmann::json CaseResult::to_json() const {
  return {{"pass", pass},
          {"case", case_name},
          {"spec", case_spec},
          {"reason", reason},
          {"comparison", comparison ? comparison->to_json() : nlohmann::json(nullptr)}};
}

CaseResult run_case(const Candidate& candidate, const HostTensor& x, const HostTensor& weight,
                    const EpsScalar& eps, const std::optional<rmsnorm::Tolerance>& tol) {
  CaseResult result;
  result.case_spec = nullptr;
  // The expected value comes from the pristine inputs, before the candidate can touch them.
  const rmsnorm::Validation v = rmsnorm::validate(x, weight, eps);
  std::optional<HostTensor> expected;
  if (v.ok()) expected = rmsnorm::reference_compute(x, weight, v.eps32);
  const TensorMeta x_meta = x.meta(), w_meta = weight.meta();
  const std::vector<std::byte> x_bytes = x.value_bytes(), w_bytes = weight.value_bytes();

  CandidateCall call;
  try {
    call = candidate(x, weight, eps);
  } catch (const std::exception& e) {
    call.error = RaisedError{std::nullopt, fmt::format("candidate threw: {}", e.what())};
  } catch (...) {
    call.error = RaisedError{std::nullopt, "candidate threw a non-standard exception"};
  }

  if (!call.audit_failures.empty()) {
    return fail(std::move(result), fmt::format("audit: {}", call.audit_failures.front()));
  }
  for (auto [name, t, meta, bytes] :
       {std::tuple{"x", &x, &x_meta, &x_bytes}, std::tuple{"weight", &weight, &w_meta, &w_bytes}}) {
    if (std::string why = audit_inputs(name, *t, *meta, *bytes); !why.empty()) {
      return fail(std::move(result), why);
    }
  }
  if (!v.ok()) {
    const auto want = rmsnorm::error_code_name(v.error->code);
    if (call.output && !call.error) {
      return fail(std::move(result),
                  fmt::format("invalid input returned an output instead of raising {}", want));
    }
    if (!call.error || !call.error->declared || call.error->declared->code != v.error->code) {
      return fail(std::move(result),
                  fmt::format("invalid input must raise declared error {}; got {}", want,
                              call.error ? raised_text(*call.error) : "nothing"));
    }
    result.pass = true;
    return result;
  }
  if (call.error) {
    return fail(std::move(result),
                fmt::format("candidate raised on a valid input: {}", raised_text(*call.error)));
  }
  if (!call.output || !call.output->valid()) {
    return fail(std::move(result), "candidate returned no output tensor");
  }
  const HostTensor& y = *call.output;
  if (y.shares_storage(x) || y.shares_storage(weight)) {
    return fail(std::move(result), fmt::format("output aliases input {} (shares its storage); "
                                               "return a fresh tensor",
                                               y.shares_storage(x) ? "x" : "weight"));
  }
  if (y.layout() != TensorLayout::kStrided || !same_device(y.device(), x.device())) {
    return fail(std::move(result),
                fmt::format("output must be a strided tensor on {}; got {} on {}",
                            device_name(x.device()),
                            y.layout() == TensorLayout::kStrided ? "strided" : "sparse",
                            device_name(y.device())));
  }
  const rmsnorm::Tolerance t = tol ? *tol : rmsnorm::tolerance_for(x.dtype());
  result.comparison = compare(y, *expected, t);
  if (!result.comparison->pass) {
    // The reason is copied before `result` is moved: the order in which a call's arguments are
    // evaluated is unspecified (clang moves the comparison out first, and the reason was empty).
    std::string why = result.comparison->reason;
    return fail(std::move(result), std::move(why));
  }
  result.pass = true;
  return result;
}

CaseResult run_case(const Candidate& candidate, const CaseSpec& spec) {
  rmsnorm::CaseInputs in = rmsnorm::materialize(spec);
  CaseResult r = run_case(candidate, in.x, in.weight, in.eps);
  r.case_name = spec.name;
  r.case_spec = spec.to_json();
  return r;
}

nlohmann::json SuiteResult::to_json() const {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& c : cases)
    all.push_back(c.to_json());
  return {{"pass", pass},
          {"passed", passed},
          {"failed", failed},
          {"first_failure", first_failure ? cases[*first_failure].to_json() : nlohmann::json()},
          {"cases", all}};
}

SuiteResult run_suite(const Candidate& candidate, const std::vector<CaseSpec>& specs,
                      bool stop_at_first_failure) {
  SuiteResult s;
  for (const auto& spec : specs) {
    s.cases.push_back(run_case(candidate, spec));
    if (s.cases.back().pass) {
      ++s.passed;
      continue;
    }
    ++s.failed;
    s.pass = false;
    if (!s.first_failure) s.first_failure = s.cases.size() - 1;
    if (stop_at_first_failure) break;
  }
  return s;
}

} // namespace kloop::evaluator
