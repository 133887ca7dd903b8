// The operator declaration, its checks and the canonical ABI derived from it (declaration.h).
#include "kernels/declaration.h"

#include <set>

#include <fmt/format.h>

namespace kloop::op {

std::string_view role_name(Role role) {
  switch (role) {
  case Role::kInput:
    return "input";
  case Role::kOutput:
    return "output";
  case Role::kInputOutput:
    return "input_output";
  }
  return "unknown";
}

std::string_view scalar_c_type(ScalarType type) {
  switch (type) {
  case ScalarType::kFloat32:
    return "float";
  case ScalarType::kInt32:
    return "int";
  case ScalarType::kInt64:
    return "long long";
  }
  return "?";
}

std::string AxisConstraint::text() const {
  return factor == 1 ? fmt::format("{} == {}", axis, of)
                     : fmt::format("{} == {}*{}", axis, factor, of);
}

std::string Declaration::id() const {
  return fmt::format("{}/{}", name, version);
}

int Declaration::axis_index(std::string_view n) const {
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == n) return static_cast<int>(i);
  return -1;
}

int Declaration::tensor_index(std::string_view n) const {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == n) return static_cast<int>(i);
  return -1;
}

bool Declaration::has_batch() const {
  for (const Tensor& t : tensors)
    if (t.batched) return true;
  return false;
}

int Declaration::row_axis() const {
  for (const Tensor& t : tensors)
    if (t.batched && !t.dims.empty()) return axis_index(t.dims.back());
  return -1;
}

std::int64_t Declaration::row_elements(const Tensor& t,
                                       const std::vector<std::int64_t>& values) const {
  std::int64_t n = 1;
  for (const std::string& d : t.dims) {
    const int a = axis_index(d);
    if (a < 0) return 0;
    n *= axes[a].variable ? values.at(a) : axes[a].value;
  }
  return n;
}

nlohmann::json Declaration::to_json() const {
  nlohmann::json ax = nlohmann::json::array(), cs = nlohmann::json::array(),
                 ts = nlohmann::json::array(), ss = nlohmann::json::array();
  for (const Axis& a : axes) {
    nlohmann::json j{{"name", a.name}, {"doc", a.doc}};
    if (a.variable) {
      j["kind"] = "var";
      j["min"] = a.min;
      j["max"] = a.max;
    } else {
      j["kind"] = "const";
      j["value"] = a.value;
    }
    ax.push_back(j);
  }
  for (const AxisConstraint& c : constraints)
    cs.push_back(c.text());
  for (const Tensor& t : tensors)
    ts.push_back({{"name", t.name},
                  {"role", role_name(t.role)},
                  {"dtype", t.dtype == DTypeRule::kCall ? "T" : "float32"},
                  {"shape", t.batched ? "batched" : "broadcast"},
                  {"dims", t.dims},
                  {"doc", t.doc}});
  for (const Scalar& s : scalars)
    ss.push_back({{"name", s.name}, {"type", scalar_c_type(s.type)}, {"doc", s.doc}});
  return {{"name", name},
          {"version", version},
          {"axes", ax},
          {"constraints", cs},
          {"tensors", ts},
          {"scalars", ss},
          {"kernel_signature", kernel_signature(*this)}};
}

std::optional<std::string> check_declaration(const Declaration& d) {
  std::set<std::string> names;
  auto fresh = [&](const std::string& n) { return !n.empty() && names.insert(n).second; };
  if (d.name.empty() || d.version < 1) return "the operator needs a name and a version >= 1";
  for (const Axis& a : d.axes) {
    if (!fresh(a.name)) return fmt::format("axis name '{}' is empty or used twice", a.name);
    if (a.variable && (a.min < 1 || a.max < a.min || a.max > 2147483647))
      return fmt::format("axis {}: range [{}, {}] must lie in [1, 2147483647] (int)", a.name, a.min,
                         a.max);
    if (!a.variable && a.value < 1) return fmt::format("fixed axis {} must be >= 1", a.name);
  }
  for (const AxisConstraint& c : d.constraints)
    if (d.axis_index(c.axis) < 0 || d.axis_index(c.of) < 0 || c.factor < 1)
      return fmt::format("constraint '{}' names an unknown axis or a factor < 1", c.text());
  bool output = false;
  for (const Tensor& t : d.tensors) {
    if (!fresh(t.name)) return fmt::format("tensor name '{}' is empty or used twice", t.name);
    if (t.dims.empty()) return fmt::format("tensor {} needs at least one dim", t.name);
    for (const std::string& dim : t.dims)
      if (d.axis_index(dim) < 0) return fmt::format("tensor {}: unknown axis '{}'", t.name, dim);
    if (!t.batched && t.written())
      return fmt::format("tensor {}: a broadcast tensor is read by every row; it cannot be "
                         "written",
                         t.name);
    output = output || t.written();
  }
  if (!output) return "the operator writes no tensor (no output or input_output)";
  for (const Scalar& s : d.scalars)
    if (!fresh(s.name)) return fmt::format("scalar name '{}' is empty or used twice", s.name);
  if (d.has_batch() && !fresh("rows")) return "the name 'rows' is reserved for the batch size";
  for (const Tensor& t : d.tensors)
    if (t.batched && !fresh(t.name + "_row_stride"))
      return fmt::format("the name '{}_row_stride' is reserved for {}'s row stride", t.name,
                         t.name);
  return std::nullopt;
}

std::vector<AbiParam> abi(const Declaration& d) {
  const std::vector<std::string> ptr{".u64", ".b64"}, i64{".u64", ".s64", ".b64"},
      i32{".u32", ".s32", ".b32"}, f32{".f32", ".b32"};
  std::vector<AbiParam> out;
  for (std::size_t i = 0; i < d.tensors.size(); ++i) {
    const Tensor& t = d.tensors[i];
    const std::string elem = t.dtype == DTypeRule::kCall ? "T" : "float";
    out.push_back({t.name, AbiKind::kTensor, static_cast<int>(i),
                   (t.role == Role::kInput ? "const " : "") + elem + "*", 8, ptr});
  }
  if (d.has_batch()) out.push_back({"rows", AbiKind::kRows, -1, "long long", 8, i64});
  for (std::size_t i = 0; i < d.axes.size(); ++i)
    if (d.axes[i].variable)
      out.push_back({d.axes[i].name, AbiKind::kAxis, static_cast<int>(i), "int", 4, i32});
  for (std::size_t i = 0; i < d.tensors.size(); ++i)
    if (d.tensors[i].batched)
      out.push_back({d.tensors[i].name + "_row_stride", AbiKind::kRowStride, static_cast<int>(i),
                     "long long", 8, i64});
  for (std::size_t i = 0; i < d.scalars.size(); ++i) {
    const ScalarType t = d.scalars[i].type;
    out.push_back({d.scalars[i].name, AbiKind::kScalar, static_cast<int>(i),
                   std::string(scalar_c_type(t)), t == ScalarType::kInt64 ? 8u : 4u,
                   t == ScalarType::kFloat32 ? f32
                   : t == ScalarType::kInt32 ? i32
                                             : i64});
  }
  return out;
}

std::string kernel_signature(const Declaration& d) {
  std::string params;
  for (const AbiParam& p : abi(d))
    params += fmt::format("{}{} {}", params.empty() ? "" : ", ", p.c_type, p.name);
  return fmt::format("extern \"C\" __global__ void ENTRY({})", params);
}

} // namespace kloop::op
