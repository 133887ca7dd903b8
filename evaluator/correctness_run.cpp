// run_case / run_suite: the audited candidate call (snapshot, call, audit by role, compare).
#include <algorithm>
#include <deque>
#include <exception>
#include <future>

#include <fmt/format.h>

#include "evaluator/correctness.h"

namespace kloop::evaluator {

namespace {

std::string raised_text(const RaisedError& e) {
  if (e.declared)
    return fmt::format("declared error {}: {}", e.declared->code, e.declared->message);
  return e.failure_text.empty() ? "an undeclared failure" : e.failure_text;
}

// Input audit: metadata and logical bytes unchanged. Returns a reason or empty.
std::string audit_input(const std::string& name, const HostTensor& t, const TensorMeta& meta_before,
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

// What the pristine passed tensors looked like before the call.
struct Snapshot {
  std::vector<TensorMeta> meta;
  std::vector<std::vector<std::byte>> bytes;
};

Snapshot snapshot(const op::CallArgs& call) {
  Snapshot s;
  for (const HostTensor& t : call.tensors) {
    s.meta.push_back(t.meta());
    s.bytes.push_back(t.value_bytes());
  }
  return s;
}

CandidateCall call_guarded(const CandidateFn& candidate, const op::CallArgs& call) {
  try {
    return candidate(call);
  } catch (const std::exception& e) {
    CandidateCall c;
    c.error = RaisedError{std::nullopt, fmt::format("candidate threw: {}", e.what())};
    return c;
  } catch (...) {
    CandidateCall c;
    c.error = RaisedError{std::nullopt, "candidate threw a non-standard exception"};
    return c;
  }
}

// The outputs' and input-outputs' checks against the reference (valid call, no error raised).
CaseResult judge_outputs(CaseResult result, const op::Operator& op, const op::CallArgs& call,
                         const CandidateCall& got, const std::vector<HostTensor>& expected,
                         const std::optional<op::Tolerance>& tol) {
  const op::Declaration& d = op.declaration();
  const std::vector<int> passed = op::passed_tensors(d), written = op::written_tensors(d);
  const std::size_t want_outputs =
      static_cast<std::size_t>(std::count_if(written.begin(), written.end(), [&](int t) {
        return d.tensors[t].role == op::Role::kOutput;
      }));
  if (got.outputs.empty() && want_outputs > 0)
    return fail(std::move(result), "candidate returned no output tensor");
  if (got.outputs.size() != want_outputs)
    return fail(std::move(result), fmt::format("candidate returned {} output tensors; the contract "
                                               "has {}",
                                               got.outputs.size(), want_outputs));
  const HostTensor& first = call.tensors.front();
  std::size_t out_index = 0;
  for (std::size_t k = 0; k < written.size(); ++k) {
    const op::Tensor& decl = d.tensors[written[k]];
    const HostTensor* actual = nullptr;
    if (decl.role == op::Role::kOutput) {
      actual = &got.outputs[out_index++];
      if (!actual->valid()) return fail(std::move(result), "candidate returned no output tensor");
      for (std::size_t p = 0; p < passed.size(); ++p)
        if (actual->shares_storage(call.tensors[p]))
          return fail(std::move(result),
                      fmt::format("output aliases input {} (shares its storage); return a fresh "
                                  "tensor",
                                  d.tensors[passed[p]].name));
      if (actual->layout() != TensorLayout::kStrided ||
          !same_device(actual->device(), first.device()))
        return fail(std::move(result),
                    fmt::format("output must be a strided tensor on {}; got {} on {}",
                                device_name(first.device()),
                                actual->layout() == TensorLayout::kStrided ? "strided" : "sparse",
                                device_name(actual->device())));
    } else {
      const auto at = std::find(passed.begin(), passed.end(), written[k]) - passed.begin();
      actual = &call.tensors[static_cast<std::size_t>(at)];
    }
    const op::Tolerance t = tol ? *tol : op.tolerance(first.dtype(), written[k]);
    Comparison c = compare(*actual, expected[k], t);
    const bool ok = c.pass;
    if (!ok && written.size() > 1) c.reason = fmt::format("{}: {}", decl.name, c.reason);
    if (!result.comparison || (!ok && result.comparison->pass)) result.comparison = std::move(c);
    if (!ok) {
      // The reason is copied before `result` is moved: the order in which a call's arguments are
      // evaluated is unspecified (clang moves the comparison out first, and the reason was empty).
      std::string why = result.comparison->reason;
      return fail(std::move(result), std::move(why));
    }
  }
  result.pass = true;
  return result;
}

} // namespace

nlohmann::json CaseResult::to_json() const {
  nlohmann::json j{{"pass", pass},
                   {"case", case_name},
                   {"spec", case_spec},
                   {"reason", reason},
                   {"comparison", comparison ? comparison->to_json() : nlohmann::json(nullptr)}};
  if (!route.empty()) {
    j["route"] = route;
    j["variant"] = variant;
  }
  return j;
}

namespace {

// A call made ready to run: validated and, when valid, its expected outputs computed from the
// pristine inputs, before the candidate can touch them.
struct PreparedCase {
  op::CallArgs call;
  op::Validated v;
  std::vector<HostTensor> expected;
};

PreparedCase prepare_case(const op::Operator& op, op::CallArgs call) {
  PreparedCase c{std::move(call), {}, {}};
  c.v = op.validate(c.call);
  if (c.v.ok()) {
    // Input-output tensors are copied first: the candidate writes them in place afterwards.
    const op::Declaration& d = op.declaration();
    op::CallArgs pristine = c.call;
    const std::vector<int> passed = op::passed_tensors(d);
    for (std::size_t p = 0; p < pristine.tensors.size() && p < passed.size(); ++p)
      if (d.tensors[passed[p]].role == op::Role::kInputOutput)
        pristine.tensors[p] = pristine.tensors[p].clone();
    c.expected = op.reference(pristine, c.v);
  }
  return c;
}

CaseResult run_prepared(const op::Operator& op, const CandidateFn& candidate,
                        const PreparedCase& prepared, const std::optional<op::Tolerance>& tol) {
  CaseResult result;
  result.case_spec = nullptr;
  const op::Declaration& d = op.declaration();
  const op::CallArgs& call = prepared.call;
  const op::Validated& v = prepared.v;
  const std::vector<HostTensor>& expected = prepared.expected;
  const Snapshot before = snapshot(call);

  const CandidateCall got = call_guarded(candidate, call);
  result.route = got.route;
  result.variant = got.variant;

  if (!got.audit_failures.empty())
    return fail(std::move(result), fmt::format("audit: {}", got.audit_failures.front()));
  const std::vector<int> passed = op::passed_tensors(d);
  for (std::size_t p = 0; p < call.tensors.size() && p < passed.size(); ++p) {
    if (d.tensors[passed[p]].role != op::Role::kInput) continue; // written in place
    if (std::string why = audit_input(d.tensors[passed[p]].name, call.tensors[p], before.meta[p],
                                      before.bytes[p]);
        !why.empty())
      return fail(std::move(result), why);
  }
  if (!v.ok()) {
    const std::string& want = v.error->code;
    if (!got.outputs.empty() && !got.error)
      return fail(std::move(result),
                  fmt::format("invalid input returned an output instead of raising {}", want));
    if (!got.error || !got.error->declared || got.error->declared->code != want)
      return fail(std::move(result),
                  fmt::format("invalid input must raise declared error {}; got {}", want,
                              got.error ? raised_text(*got.error) : "nothing"));
    result.pass = true;
    return result;
  }
  if (got.error)
    return fail(std::move(result),
                fmt::format("candidate raised on a valid input: {}", raised_text(*got.error)));
  return judge_outputs(std::move(result), op, call, got, expected, tol);
}

CaseResult named(CaseResult r, const nlohmann::json& spec) {
  r.case_name = spec.value("name", std::string());
  r.case_spec = spec;
  return r;
}

} // namespace

CaseResult run_case(const op::Operator& op, const CandidateFn& candidate, const op::CallArgs& call,
                    const std::optional<op::Tolerance>& tol) {
  return run_prepared(op, candidate, prepare_case(op, call), tol);
}

CaseResult run_case(const op::Operator& op, const CandidateFn& candidate,
                    const nlohmann::json& spec) {
  return named(run_prepared(op, candidate, prepare_case(op, op.materialize(spec)), std::nullopt),
               spec);
}

void SuiteResult::add(CaseResult r) {
  if (r.pass) {
    ++passed;
  } else {
    ++failed;
    pass = false;
    if (!first_failure) first_failure = cases.size();
  }
  cases.push_back(std::move(r));
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

void run_suite(const op::Operator& op, const CandidateFn& candidate,
               const std::vector<nlohmann::json>& specs, SuiteResult& result,
               const SuiteRunOptions& options) {
  // Cases i+1 .. i+prepare_ahead are prepared on their own threads while case i runs; a spec that
  // cannot be materialized throws when its turn comes, as without preparation ahead.
  const std::size_t ahead = static_cast<std::size_t>(std::max(0, options.prepare_ahead));
  std::deque<std::future<PreparedCase>> ready;
  std::size_t queued = 0; // specs handed to `ready` so far
  const auto refill = [&](std::size_t upto) {
    for (; queued < specs.size() && queued <= upto; ++queued)
      ready.push_back(std::async(std::launch::async, [&op, &spec = specs[queued]] {
        return prepare_case(op, op.materialize(spec));
      }));
  };
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (options.before_case) options.before_case(i, specs[i]);
    CaseResult r;
    if (ahead == 0) {
      r = run_case(op, candidate, specs[i]);
    } else {
      refill(i + ahead);
      const PreparedCase prepared = ready.front().get();
      ready.pop_front();
      r = named(run_prepared(op, candidate, prepared, std::nullopt), specs[i]);
    }
    const bool pass = r.pass;
    result.add(std::move(r));
    if (options.after_case) options.after_case(result.cases.back());
    if (!pass && options.stop_at_first_failure) break;
  }
}

SuiteResult run_suite(const op::Operator& op, const CandidateFn& candidate,
                      const std::vector<nlohmann::json>& specs, bool stop_at_first_failure) {
  SuiteResult s;
  run_suite(op, candidate, specs, s, SuiteRunOptions{stop_at_first_failure, {}, {}});
  return s;
}

} // namespace kloop::evaluator
