// The correctness core of the correctness gate: runs one candidate callable on one case and audits
// the call (seed, "Multi-scale numerical verification" and its audit script; DESIGN.md gate 3).
// The same code serves in-process CPU callables (tests, the reference) and the GPU worker, whose
// adapter wraps a kernel launch as a Candidate and reports device-only findings (poison, guard
// bytes) through CandidateCall::audit_failures. Audit: inputs byte-identical and metadata unchanged
// after the call, output a fresh object (not x or weight, no shared storage) of x's shape and
// dtype, NaN positions equal, signed infinities equal, a finite reference needs a finite output,
// finite errors within the contract's tolerance, per-row relative check; invalid inputs must
// raise the declared error. Results are JSON for gate evidence and feedback.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/reference.h"
#include "kernels/tensor.h"

namespace kloop::evaluator {

// What a candidate call raised: a declared error, or any other failure (text).
struct RaisedError {
  std::optional<rmsnorm::DeclaredError> declared;
  std::string failure_text; // non-declared failures (launch error, exception text); may be empty
  nlohmann::json to_json() const;
};

// Outcome of one candidate call as seen by the caller.
struct CandidateCall {
  std::optional<HostTensor> output;        // set when the call returned a tensor
  std::optional<RaisedError> error;        // set when the call raised
  std::vector<std::string> audit_failures; // adapter findings (guard bytes, poison, ...)
};

// A candidate: called with the case inputs; must not throw (adapters convert exceptions into
// `error`; the core also catches std::exception as a non-declared failure).
using Candidate = std::function<CandidateCall(const HostTensor& x, const HostTensor& weight,
                                              const rmsnorm::EpsScalar& eps)>;

// The reference wrapped as a Candidate (output or declared error).
Candidate reference_candidate();

// The element that broke the contract's tolerance, in the output's own terms: where it is, what
// was expected and written, the error in ULPs of the output dtype, and the bound it broke. Gate
// evidence (`breach` of the comparison JSON) for feedback; the reason line says the same.
struct ToleranceBreach {
  std::string rule;         // "elementwise", "nonfinite" or "row"
  std::string dtype;        // output dtype name, e.g. "float16"
  std::int64_t index = -1;  // flat row-major index into the output
  std::int64_t row = -1;    // row of the [rows, H] view of the output
  std::int64_t column = -1; // index within the row (0 <= column < H)
  double expected = 0, actual = 0;
  double abs_error = 0; // |actual - expected| (elementwise and row rules)
  double ulps = 0;      // abs_error / (the dtype's spacing at |expected|; rmsnorm::output_ulp)
  double atol = 0, rtol = 0;
  double allowed = 0;          // elementwise and nonfinite: atol + rtol * |expected|; row: 0
  double allowed_ulps = 0;     // allowed in the same ULPs
  std::int64_t violations = 0; // elements over the bound, or non-finite mismatches
  double row_ratio = 0, row_rtol = 0, row_floor = 0; // rule "row": ||a-e|| / max(||e||, floor)
  nlohmann::json to_json() const;
};

// Element-level comparison of actual against expected (same shape, both valid tensors).
struct Comparison {
  bool pass = true;
  std::string reason;            // first failed rule, empty on pass
  double max_abs_err = 0;        // over elements with finite expected and finite actual
  double max_rel_err = 0;        // |a-e| / |e| over those with e != 0
  std::int64_t worst_index = -1; // flat row-major index of the worst tolerance violation
                                 // (or of the largest error when all pass)
  std::int64_t worst_row = -1;
  double worst_expected = 0, worst_actual = 0;
  std::int64_t nonfinite_mismatches = 0; // NaN/Inf position or sign mismatches
  std::int64_t first_nonfinite_index = -1;
  std::int64_t tolerance_violations = 0; // finite elements over atol + rtol*|e|
  double worst_row_ratio = 0;            // max over rows of err_norm / max(exp_norm, floor)
  std::int64_t worst_ratio_row = -1;
  std::optional<ToleranceBreach> breach; // set when !pass and values were compared
  nlohmann::json to_json() const;
};

// The contract's rule (rmsnorm::Tolerance): elementwise atol/rtol on finite entries, exact NaN
// and signed-Inf positions, finite reference needs finite output, per-row relative check.
Comparison compare(const HostTensor& actual, const HostTensor& expected,
                   const rmsnorm::Tolerance& tol);
// torch.testing.assert_close's elementwise rule alone (no row check), for the seed's examples:
// |a-e| <= atol + rtol*|e| on finite entries, Inf must match with sign, NaN matches NaN only when
// equal_nan. Shapes must match (a mismatch fails).
Comparison assert_close(const HostTensor& actual, const HostTensor& expected, double atol,
                        double rtol, bool equal_nan);

// Verdict of one case.
struct CaseResult {
  bool pass = false;
  std::string case_name;
  nlohmann::json case_spec;             // CaseSpec JSON, or null for ad-hoc inputs
  std::string reason;                   // one line naming the failed rule; empty on pass
  std::optional<Comparison> comparison; // when values were compared
  nlohmann::json to_json() const;
};

// Runs `candidate` on (x, weight, eps) with the contract's tolerance for x's dtype (or `tol` when
// given) and audits the call. Valid inputs need an output that passes; invalid inputs (per
// rmsnorm::validate) need the same declared error code. Never throws for candidate misbehaviour.
CaseResult run_case(const Candidate& candidate, const HostTensor& x, const HostTensor& weight,
                    const rmsnorm::EpsScalar& eps,
                    const std::optional<rmsnorm::Tolerance>& tol = std::nullopt);
// Materializes `spec` and runs it; the result carries the spec's JSON and name.
CaseResult run_case(const Candidate& candidate, const rmsnorm::CaseSpec& spec);

// Verdict over a suite: pass iff every case passed.
struct SuiteResult {
  bool pass = true;
  std::vector<CaseResult> cases;            // every case run, in order
  std::optional<std::size_t> first_failure; // index into cases
  std::int64_t passed = 0, failed = 0;
  nlohmann::json to_json() const; // {"pass", "passed", "failed", "first_failure": CaseResult|null,
                                  //  "cases": [...]}
};
// Runs every spec (or stops after the first failure when stop_at_first_failure).
SuiteResult run_suite(const Candidate& candidate, const std::vector<rmsnorm::CaseSpec>& specs,
                      bool stop_at_first_failure = false);

} // namespace kloop::evaluator
