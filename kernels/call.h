// One call of an operator as its contract's Python-level function sees it (issue 25): the tensors
// the caller passes, the scalar arguments as tagged Python-like values, the validation result
// (a declared error, or the problem size and the scalars as the kernel receives them), and the
// tolerance policy one output is judged by. Every operator's CPU reference, the correctness core
// and the GPU worker's adapter speak these types; an operator maps them to its own names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/declaration.h"
#include "kernels/tensor.h"

namespace kloop::op {

// A scalar argument as a Python-like tagged value: a float (double), an int (arbitrary-size
// decimal text), or something else (described by a type name such as "bool" or "str"), so that
// the declared errors of a bad scalar (a bool eps, an int too large for a double) can be exercised.
struct ScalarArg {
  enum class Kind { kFloat, kInt, kOther };
  Kind kind = Kind::kFloat;
  double value = 0; // kFloat
  std::string text; // kInt: decimal digits with optional '-'; kOther: the type name
  static ScalarArg of(double v) { return {Kind::kFloat, v, {}}; }
  static ScalarArg integer(std::int64_t v);
  static ScalarArg integer_text(std::string digits); // e.g. "1" followed by 400 zeros
  static ScalarArg other(std::string type_name) { return {Kind::kOther, 0, std::move(type_name)}; }
  nlohmann::json to_json() const; // {"kind":"float","value":1e-5} | {"kind":"int","text":"1"} ...
  static ScalarArg from_json(const nlohmann::json& j); // throws std::invalid_argument
  std::string describe() const;                        // "1e-05", "int 3", "bool"
  bool operator==(const ScalarArg& other) const = default;
};

// A declared error: its code name (the contract's "errors" list) and a message naming the
// argument, the cause and the fix.
struct DeclaredError {
  std::string code;
  std::string message;
  nlohmann::json to_json() const; // {"code": name, "message": ...}
  bool operator==(const DeclaredError&) const = default;
};

// Acceptance policy for one output dtype. An output passes when, on every element whose expected
// value is finite, |actual - expected| <= atol + rtol * |expected| (torch.testing.assert_close's
// rule), non-finite positions match exactly (NaN where NaN, same-signed Inf where Inf), AND every
// row satisfies the per-row relative check
//     ||actual_row - expected_row||_2 <= row_rtol * max(||expected_row||_2, row_floor)
// over the row's finite-expected entries. Denominator policy: the expected row norm, floored at
// row_floor so that an all-zero expected row demands an error norm of at most row_rtol *
// row_floor (essentially exact zeros) instead of dividing by zero.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double row_rtol = 0;
  double row_floor = 0;
  nlohmann::json to_json() const;
};

// The arguments of one call: every tensor the caller passes (role input or input_output, in
// declaration order) and every scalar (declaration order).
struct CallArgs {
  std::vector<HostTensor> tensors;
  std::vector<ScalarArg> scalars;
};

// Declaration indices of the tensors a call passes (CallArgs::tensors[i] is tensor passed()[i]).
std::vector<int> passed_tensors(const Declaration& decl);
// Declaration indices of the tensors a call writes (outputs and input-outputs), in order: the
// reference returns one tensor per entry, the correctness core compares each.
std::vector<int> written_tensors(const Declaration& decl);

// A validated call: either a declared error, or the problem size (rows and the batch shape of the
// batched tensors, every axis's value, indexed like Declaration::axes) and the scalars as the
// kernel receives them (a float32 scalar already rounded to float32).
struct Validated {
  std::optional<DeclaredError> error;
  std::int64_t rows = 0;
  std::vector<std::int64_t> batch_shape;
  std::vector<std::int64_t> axes;
  std::vector<double> scalars;
  bool ok() const { return !error.has_value(); }
  // True when the call has no element to compute (rows == 0 or an axis of size 0): nothing is
  // launched and every output is empty.
  bool empty() const;
};

// Shape of written tensor `t` for a validated call: batch_shape + dims for a batched tensor,
// dims for a broadcast one.
std::vector<std::int64_t> tensor_shape(const Declaration& decl, const Validated& v, int t);

} // namespace kloop::op
