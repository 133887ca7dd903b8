// Shared parts of the operator interface (operator.h) and the registry (registry.h).
#include "kernels/operator.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <sodium.h>

#include "kernels/registry.h"

namespace kloop::op {
namespace {

std::string lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

} // namespace

nlohmann::json BenchShape::to_json(const Declaration& decl) const {
  nlohmann::json j{{"rows", rows}, {"dtype", dtype_name(dtype)}};
  for (std::size_t i = 0; i < decl.axes.size() && i < axes.size(); ++i)
    if (decl.axes[i].variable) j[lower(decl.axes[i].name)] = axes[i];
  return j;
}

BenchShape BenchShape::from_json(const Declaration& decl, const nlohmann::json& j) {
  auto integer = [&](const std::string& key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer())
      throw std::invalid_argument(
          fmt::format("benchmark shape {}: '{}' must be an integer", j.dump(), key));
    return j[key].get<std::int64_t>();
  };
  BenchShape s;
  s.rows = integer("rows");
  const auto dt = j.is_object() && j.contains("dtype") && j["dtype"].is_string()
                      ? parse_dtype(j["dtype"].get<std::string>())
                      : std::nullopt;
  if (!dt)
    throw std::invalid_argument(
        fmt::format("benchmark shape {}: 'dtype' must be float32, float16 or bfloat16", j.dump()));
  s.dtype = *dt;
  for (const Axis& a : decl.axes)
    s.axes.push_back(a.variable ? integer(lower(a.name)) : a.value);
  return s;
}

std::int64_t BenchShape::width(const Declaration& decl) const {
  const int a = decl.row_axis();
  return a < 0 ? 1 : axes.at(static_cast<std::size_t>(a));
}

std::string BenchShape::label(const Declaration& decl) const {
  std::string dims = std::to_string(rows);
  for (std::size_t i = 0; i < decl.axes.size() && i < axes.size(); ++i)
    if (decl.axes[i].variable) dims += "x" + std::to_string(axes[i]);
  return fmt::format("{} {}", dims, dtype_name(dtype));
}

std::string sha256_text_hex(std::string_view text) {
  if (sodium_init() < 0) throw std::runtime_error("sha256: libsodium failed to initialise");
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  std::string hex;
  for (unsigned char b : digest)
    hex += fmt::format("{:02x}", b);
  return hex;
}

std::string Operator::contract_sha256() const {
  return sha256_text_hex(contract_canonical_text());
}

const Operator* find_operator(std::string_view name) {
  for (const Operator* o : operators())
    if (o->cli_name() == name || o->name() == name || o->contract_id() == name) return o;
  return nullptr;
}

std::string manifest_contract(std::string_view manifest_text) {
  const nlohmann::json doc = nlohmann::json::parse(manifest_text, nullptr, false);
  const auto it = doc.is_object() ? doc.find("contract") : doc.end();
  return doc.is_object() && it != doc.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string operator_names() {
  std::string out;
  for (const Operator* o : operators())
    out += (out.empty() ? "" : ", ") + std::string(o->cli_name());
  return out;
}

nlohmann::json operators_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const Operator* o : operators()) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const BenchShape& s : o->benchmark_shapes())
      shapes.push_back(s.to_json(o->declaration()));
    out.push_back({{"name", o->cli_name()},
                   {"operator", o->name()},
                   {"contract_id", o->contract_id()},
                   {"contract_sha256", o->contract_sha256()},
                   {"dtypes", o->contract().value("dtypes", nlohmann::json::array())},
                   {"kernel_signature", kernel_signature(o->declaration())},
                   {"folder", o->folder()},
                   {"baseline", o->baseline_folder()},
                   {"summary", o->summary()},
                   {"declaration", o->declaration().to_json()},
                   {"benchmark_shapes", shapes}});
  }
  return out;
}

} // namespace kloop::op
