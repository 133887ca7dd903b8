// One call of an operator: scalar arguments, declared errors, tolerances (call.h).
#include "kernels/call.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace kloop::op {

nlohmann::json DeclaredError::to_json() const {
  return {{"code", code}, {"message", message}};
}

nlohmann::json Tolerance::to_json() const {
  return {{"atol", atol}, {"rtol", rtol}, {"row_rtol", row_rtol}, {"row_floor", row_floor}};
}

ScalarArg ScalarArg::integer(std::int64_t v) {
  return {Kind::kInt, 0, std::to_string(v)};
}

ScalarArg ScalarArg::integer_text(std::string digits) {
  const std::size_t start = !digits.empty() && digits[0] == '-' ? 1 : 0;
  if (digits.size() == start ||
      digits.find_first_not_of("0123456789", start) != std::string::npos) {
    throw std::invalid_argument(
        fmt::format("ScalarArg::integer_text: '{}' is not a decimal integer", digits));
  }
  return {Kind::kInt, 0, std::move(digits)};
}

nlohmann::json ScalarArg::to_json() const {
  switch (kind) {
  case Kind::kFloat:
    // JSON has no NaN/Inf: those travel as text.
    if (!std::isfinite(value)) {
      return {{"kind", "float"},
              {"text", std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf")}};
    }
    return {{"kind", "float"}, {"value", value}};
  case Kind::kInt:
    return {{"kind", "int"}, {"text", text}};
  case Kind::kOther:
    return {{"kind", "other"}, {"type", text}};
  }
  return nullptr;
}

ScalarArg ScalarArg::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string()) {
    throw std::invalid_argument("eps: expected an object with a string field 'kind'");
  }
  const std::string kind = j["kind"];
  if (kind == "float") {
    if (j.contains("value") && j["value"].is_number()) return of(j["value"].get<double>());
    if (j.contains("text") && j["text"].is_string()) {
      const std::string t = j["text"];
      if (t == "nan") return of(std::nan(""));
      if (t == "inf") return of(HUGE_VAL);
      if (t == "-inf") return of(-HUGE_VAL);
    }
    throw std::invalid_argument("eps: a float needs a numeric 'value' or 'text' nan/inf/-inf");
  }
  if (kind == "int" && j.contains("text") && j["text"].is_string()) return integer_text(j["text"]);
  if (kind == "other" && j.contains("type") && j["type"].is_string()) return other(j["type"]);
  throw std::invalid_argument(
      fmt::format("eps: kind '{}' needs 'value' (float), 'text' (int) or 'type' (other)", kind));
}

std::string ScalarArg::describe() const {
  switch (kind) {
  case Kind::kFloat:
    return fmt::format("{}", value);
  case Kind::kInt:
    return fmt::format("int {}", text);
  case Kind::kOther:
    return text;
  }
  return "?";
}

std::vector<int> passed_tensors(const Declaration& decl) {
  std::vector<int> out;
  for (std::size_t i = 0; i < decl.tensors.size(); ++i)
    if (decl.tensors[i].role != Role::kOutput) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<int> written_tensors(const Declaration& decl) {
  std::vector<int> out;
  for (std::size_t i = 0; i < decl.tensors.size(); ++i)
    if (decl.tensors[i].written()) out.push_back(static_cast<int>(i));
  return out;
}

bool Validated::empty() const {
  if (rows == 0) return true;
  for (std::int64_t a : axes)
    if (a == 0) return true;
  return false;
}

std::vector<std::int64_t> tensor_shape(const Declaration& decl, const Validated& v, int t) {
  const Tensor& tensor = decl.tensors.at(static_cast<std::size_t>(t));
  std::vector<std::int64_t> shape = tensor.batched ? v.batch_shape : std::vector<std::int64_t>{};
  for (const std::string& d : tensor.dims) {
    const int a = decl.axis_index(d);
    shape.push_back(decl.axes[a].variable ? v.axes.at(a) : decl.axes[a].value);
  }
  return shape;
}

} // namespace kloop::op
