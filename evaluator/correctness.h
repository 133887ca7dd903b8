// The correctness core of the correctness gate: runs one candidate callable on one case of any
// registered operator and audits the call by the roles its declaration gives each tensor (seed,
// "Multi-scale numerical verification" and its audit script; DESIGN.md gate 3). The same code
// serves in-process CPU callables (tests, the reference) and the GPU worker, whose adapter wraps
// a kernel launch as a CandidateFn and reports device-only findings (poison, guard bytes) through
// CandidateCall::audit_failures. Audit: every input byte-identical and its metadata unchanged
// after the call, every output a fresh object (sharing no storage with a passed tensor) of the
// declared shape and the call's dtype, compared with its own tolerance: NaN positions equal,
// signed infinities equal, a finite reference needs a finite output, finite errors within the
// contract's tolerance, per-row relative check; an input-output tensor's final value is compared
// the same way; invalid inputs must raise the declared error. Results are JSON for gate evidence
// and feedback.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/call.h"
#include "kernels/operator.h"
#include "kernels/tensor.h"

namespace kloop::evaluator {

// What a candidate call raised: a declared error, or any other failure (text).
struct RaisedError {
  std::optional<op::DeclaredError> declared;
  std::string failure_text; // non-declared failures (launch error, exception text); may be empty
  nlohmann::json to_json() const;
};

// Outcome of one candidate call as seen by the caller.
struct CandidateCall {
  std::vector<HostTensor> outputs;         // one per output tensor (role output, declaration
                                           // order) when the call returned
  std::optional<RaisedError> error;        // set when the call raised
  std::vector<std::string> audit_failures; // adapter findings (guard bytes, poison, ...)
  // What served the call, when the adapter knows (the GPU wrapper): "candidate", "reference" or
  // "no_launch", and the index of the manifest variant that served it (-1: none).
  std::string route;
  int variant = -1;
};

// A candidate as the correctness core calls it: the case's arguments (passed tensors and scalars);
// must not throw (adapters convert exceptions into `error`; the core also catches std::exception as
// a non-declared failure). An input-output tensor is updated in place in the passed tensor.
using CandidateFn = std::function<CandidateCall(const op::CallArgs& call)>;

// The operator's CPU reference wrapped as a CandidateFn (outputs or declared error).
CandidateFn reference_candidate(const op::Operator& op);

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
  double ulps = 0;      // abs_error / (the dtype's spacing at |expected|; kloop::output_ulp)
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

// The contract's rule (op::Tolerance): elementwise atol/rtol on finite entries, exact NaN and
// signed-Inf positions, finite reference needs finite output, per-row relative check.
Comparison compare(const HostTensor& actual, const HostTensor& expected, const op::Tolerance& tol);
// torch.testing.assert_close's elementwise rule alone (no row check), for the seed's examples:
// |a-e| <= atol + rtol*|e| on finite entries, Inf must match with sign, NaN matches NaN only when
// equal_nan. Shapes must match (a mismatch fails).
Comparison assert_close(const HostTensor& actual, const HostTensor& expected, double atol,
                        double rtol, bool equal_nan);

// Verdict of one case.
struct CaseResult {
  bool pass = false;
  std::string case_name;
  nlohmann::json case_spec;             // the case's spec JSON, or null for ad-hoc inputs
  std::string reason;                   // one line naming the failed rule; empty on pass
  std::optional<Comparison> comparison; // the first failing written tensor's, else the first's
  std::string route;                    // CandidateCall::route ("" when the callee did not say)
  int variant = -1;                     // CandidateCall::variant
  nlohmann::json to_json() const;       // {"pass","case","spec","reason","comparison"} plus
                                        // "route" and "variant" when the callee said
};

// Runs `candidate` on `call` with the contract's tolerance of each written tensor for the call's
// dtype (or `tol` for every one, when given) and audits the call. Valid inputs need outputs that
// pass; invalid inputs (per op.validate) need the same declared error code. Never throws for
// candidate misbehaviour.
CaseResult run_case(const op::Operator& op, const CandidateFn& candidate, const op::CallArgs& call,
                    const std::optional<op::Tolerance>& tol = std::nullopt);
// Materializes `spec` and runs it; the result carries the spec and its name.
CaseResult run_case(const op::Operator& op, const CandidateFn& candidate,
                    const nlohmann::json& spec);

// Verdict over a suite: pass iff every case passed.
struct SuiteResult {
  bool pass = true;
  std::vector<CaseResult> cases;            // every case run, in order
  std::optional<std::size_t> first_failure; // index into cases
  std::int64_t passed = 0, failed = 0;
  void add(CaseResult result);    // appends and updates pass, counts and first_failure
  nlohmann::json to_json() const; // {"pass", "passed", "failed", "first_failure": CaseResult|null,
                                  //  "cases": [...]}
};

struct SuiteRunOptions {
  bool stop_at_first_failure = false;
  // Called before each case (index, spec) and after it; either may throw to end the run (the GPU
  // worker writes its progress file and checks for a sticky fault there): the cases finished so
  // far stay in the result.
  std::function<void(std::size_t, const nlohmann::json&)> before_case;
  std::function<void(const CaseResult&)> after_case;
  // Cases made ready ahead of the one running, each on a thread of its own (issue 26): the spec
  // materialized and, for a valid call, the reference computed from its pristine inputs, so the
  // host work of later cases overlaps the device work of the current one. Results, their order
  // and the callbacks are the same for every value; 0 prepares each case when it runs.
  int prepare_ahead = 0;
};
// Runs every spec in order, appending to `result` as each case finishes.
void run_suite(const op::Operator& op, const CandidateFn& candidate,
               const std::vector<nlohmann::json>& specs, SuiteResult& result,
               const SuiteRunOptions& options = {});
SuiteResult run_suite(const op::Operator& op, const CandidateFn& candidate,
                      const std::vector<nlohmann::json>& specs, bool stop_at_first_failure = false);

} // namespace kloop::evaluator
