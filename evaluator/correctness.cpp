// The correctness core: one audited candidate call per case, and suites of cases.
#include "evaluator/correctness.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include <fmt/format.h>

namespace kloop::evaluator {

using op::Tolerance;

nlohmann::json RaisedError::to_json() const {
  return {{"declared", declared ? declared->to_json() : nlohmann::json(nullptr)},
          {"failure", failure_text}};
}

CandidateFn reference_candidate(const op::Operator& op) {
  return [&op](const op::CallArgs& args) {
    CandidateCall call;
    const op::Validated v = op.validate(args);
    if (!v.ok()) {
      call.error = RaisedError{v.error, {}};
      return call;
    }
    const op::Declaration& d = op.declaration();
    const std::vector<int> written = op::written_tensors(d), passed = op::passed_tensors(d);
    std::vector<HostTensor> expected = op.reference(args, v);
    for (std::size_t k = 0; k < written.size(); ++k) {
      const int t = written[k];
      if (d.tensors[t].role == op::Role::kOutput) {
        call.outputs.push_back(std::move(expected[k]));
        continue;
      }
      // An input-output tensor: write the expected bytes into the passed tensor.
      const auto at = std::find(passed.begin(), passed.end(), t) - passed.begin();
      HostTensor dst = args.tensors[static_cast<std::size_t>(at)];
      for (std::int64_t i = 0; i < dst.numel(); ++i)
        dst.set(i, expected[k].get(i));
    }
    return call;
  };
}

namespace {

// JSON numbers cannot be NaN/Inf; keep them readable.
nlohmann::json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

bool same_type(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// Shape and element-type agreement; returns a reason or empty.
std::string shape_type_mismatch(const HostTensor& actual, const HostTensor& expected) {
  if (!actual.valid()) return "output is not a tensor";
  if (actual.shape() != expected.shape()) {
    return fmt::format("output shape {} differs from expected {}",
                       nlohmann::json(actual.shape()).dump(),
                       nlohmann::json(expected.shape()).dump());
  }
  if (!same_type(actual.dl_type(), expected.dl_type())) {
    return fmt::format("output dtype {} differs from expected {}", dl_type_name(actual.dl_type()),
                       dl_type_name(expected.dl_type()));
  }
  return {};
}

struct Rule {
  double atol, rtol;
  bool equal_nan;
  std::optional<std::pair<double, double>> row; // (row_rtol, row_floor)
};

// The breach record of element `i` under `rule`.
ToleranceBreach breach(const HostTensor& actual, const HostTensor& expected, const Rule& rule,
                       std::int64_t i, const char* kind) {
  ToleranceBreach b;
  b.rule = kind;
  const DType dtype = expected.dtype();
  b.dtype = std::string(dtype_name(dtype));
  const std::int64_t h = expected.ndim() == 0 ? 1 : std::max<std::int64_t>(expected.width(), 1);
  b.index = i;
  b.row = i / h;
  b.column = i % h;
  b.expected = expected.get(i);
  b.actual = actual.get(i);
  b.atol = rule.atol;
  b.rtol = rule.rtol;
  const double spacing = output_ulp(dtype, b.expected);
  if (std::isfinite(b.expected) && std::isfinite(b.actual)) {
    b.abs_error = std::abs(b.actual - b.expected);
    b.ulps = b.abs_error / spacing;
  }
  b.allowed = rule.atol + rule.rtol * (std::isfinite(b.expected) ? std::abs(b.expected) : 0.0);
  b.allowed_ulps = b.allowed / spacing;
  return b;
}

// The element of `row` with the largest finite error.
std::int64_t worst_in_row(const HostTensor& actual, const HostTensor& expected, std::int64_t row) {
  const std::int64_t h = expected.width();
  std::int64_t worst = row * h;
  double most = -1;
  for (std::int64_t j = 0; j < h; ++j) {
    const double e = expected.get(row * h + j), a = actual.get(row * h + j);
    if (!std::isfinite(e) || !std::isfinite(a)) continue;
    if (std::abs(a - e) > most) {
      most = std::abs(a - e);
      worst = row * h + j;
    }
  }
  return worst;
}

// "element 1234 (row 3, column 210): expected 0.87011719, got 0.87353516".
std::string where(const ToleranceBreach& b) {
  return fmt::format("at element {} (row {}, column {}): expected {:.9g}, got {:.9g}", b.index,
                     b.row, b.column, b.expected, b.actual);
}

Comparison compare_impl(const HostTensor& actual, const HostTensor& expected, const Rule& rule) {
  Comparison c;
  if (std::string why = shape_type_mismatch(actual, expected); !why.empty()) {
    c.pass = false;
    c.reason = why;
    return c;
  }
  const std::int64_t n = expected.numel();
  const std::int64_t h = expected.ndim() == 0 ? 1 : expected.width();
  const std::int64_t rows = h == 0 ? 0 : n / h;
  double worst_excess = -1;
  for (std::int64_t r = 0; r < rows; ++r) {
    double err2 = 0, exp2 = 0;
    for (std::int64_t j = 0; j < h; ++j) {
      const std::int64_t i = r * h + j;
      const double e = expected.get(i);
      const double a = actual.get(i);
      bool mismatch = false;
      if (std::isnan(e)) {
        mismatch = !(rule.equal_nan && std::isnan(a));
      } else if (std::isinf(e)) {
        mismatch = a != e;
      } else if (!std::isfinite(a)) {
        mismatch = true; // a finite reference needs a finite output
      }
      if (mismatch) {
        if (c.nonfinite_mismatches++ == 0) c.first_nonfinite_index = i;
        continue;
      }
      if (!std::isfinite(e)) continue;
      const double err = std::abs(a - e);
      err2 += err * err;
      exp2 += e * e;
      c.max_abs_err = std::max(c.max_abs_err, err);
      if (e != 0) c.max_rel_err = std::max(c.max_rel_err, err / std::abs(e));
      const double excess = err - (rule.atol + rule.rtol * std::abs(e));
      if (excess > 0) ++c.tolerance_violations;
      if (excess > worst_excess) {
        worst_excess = excess;
        c.worst_index = i;
        c.worst_row = r;
        c.worst_expected = e;
        c.worst_actual = a;
      }
    }
    if (rule.row) {
      const double ratio = std::sqrt(err2) / std::max(std::sqrt(exp2), rule.row->second);
      if (ratio > c.worst_row_ratio || c.worst_ratio_row < 0) {
        c.worst_row_ratio = ratio;
        c.worst_ratio_row = r;
      }
    }
  }
  if (c.nonfinite_mismatches > 0) {
    c.breach = breach(actual, expected, rule, c.first_nonfinite_index, "nonfinite");
    c.breach->violations = c.nonfinite_mismatches;
    c.pass = false;
    c.reason = fmt::format("{} non-finite mismatch(es) (NaN/Inf positions, signs, or a non-finite "
                           "output where the reference is finite); first {}",
                           c.nonfinite_mismatches, where(*c.breach));
  } else if (c.tolerance_violations > 0) {
    c.breach = breach(actual, expected, rule, c.worst_index, "elementwise");
    c.breach->violations = c.tolerance_violations;
    const ToleranceBreach& b = *c.breach;
    c.pass = false;
    c.reason =
        fmt::format("{} element(s) exceed |a-e| <= {:g} + {:g}*|e|; worst {}, error {:.3g} = "
                    "{:.3g} ulp of {} where {:.3g} = {:.3g} ulp is allowed",
                    c.tolerance_violations, rule.atol, rule.rtol, where(b), b.abs_error, b.ulps,
                    b.dtype, b.allowed, b.allowed_ulps);
  } else if (rule.row && c.worst_row_ratio > rule.row->first) {
    c.breach =
        breach(actual, expected, rule, worst_in_row(actual, expected, c.worst_ratio_row), "row");
    c.breach->row_ratio = c.worst_row_ratio;
    c.breach->row_rtol = rule.row->first;
    c.breach->row_floor = rule.row->second;
    c.breach->allowed = 0; // the bound is on the row: row_rtol * max(||e||, row_floor)
    c.breach->allowed_ulps = 0;
    c.pass = false;
    c.reason =
        fmt::format("row {} relative error {:.3g} exceeds {:g} (||a-e|| / max(||e||, {:g})); "
                    "its largest error {}, error {:.3g} = {:.3g} ulp of {}",
                    c.worst_ratio_row, c.worst_row_ratio, rule.row->first, rule.row->second,
                    where(*c.breach), c.breach->abs_error, c.breach->ulps, c.breach->dtype);
  }
  return c;
}

} // namespace

nlohmann::json ToleranceBreach::to_json() const {
  return {{"rule", rule},
          {"dtype", dtype},
          {"index", index},
          {"row", row},
          {"column", column},
          {"expected", num(expected)},
          {"actual", num(actual)},
          {"abs_error", num(abs_error)},
          {"ulps", num(ulps)},
          {"atol", atol},
          {"rtol", rtol},
          {"allowed", num(allowed)},
          {"allowed_ulps", num(allowed_ulps)},
          {"violations", violations},
          {"row_ratio", num(row_ratio)},
          {"row_rtol", row_rtol},
          {"row_floor", row_floor}};
}

nlohmann::json Comparison::to_json() const {
  return {{"pass", pass},
          {"reason", reason},
          {"max_abs_err", num(max_abs_err)},
          {"max_rel_err", num(max_rel_err)},
          {"worst",
           {{"index", worst_index},
            {"row", worst_row},
            {"expected", num(worst_expected)},
            {"actual", num(worst_actual)}}},
          {"tolerance_violations", tolerance_violations},
          {"nonfinite_mismatches", nonfinite_mismatches},
          {"first_nonfinite_index", first_nonfinite_index},
          {"worst_row_ratio", num(worst_row_ratio)},
          {"worst_ratio_row", worst_ratio_row},
          {"breach", breach ? breach->to_json() : nlohmann::json(nullptr)}};
}

Comparison compare(const HostTensor& actual, const HostTensor& expected, const Tolerance& tol) {
  return compare_impl(actual, expected,
                      Rule{tol.atol, tol.rtol, true, std::pair{tol.row_rtol, tol.row_floor}});
}

Comparison assert_close(const HostTensor& actual, const HostTensor& expected, double atol,
                        double rtol, bool equal_nan) {
  return compare_impl(actual, expected, Rule{atol, rtol, equal_nan, std::nullopt});
}

} // namespace kloop::evaluator
