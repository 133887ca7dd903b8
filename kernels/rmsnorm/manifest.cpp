// Manifest parsing for contract weighted_rmsnorm/1. Every check names the JSON path of the field,
// the value found and the allowed values, so a generator can fix the manifest from the message
// alone. All problems are collected (not just the first) so one feedback round fixes them all.
#include "kernels/rmsnorm/manifest.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kernels/json_read.h"

namespace kloop::rmsnorm {
namespace {

using nlohmann::json;

// Local spelling table (kernels/dtype.h): keeps this file independent of dtype.cpp's progress.
std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "float32") return DType::kFloat32;
  if (name == "float16") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  return std::nullopt;
}
std::string_view name_of(DType d) {
  switch (d) {
  case DType::kFloat32:
    return "float32";
  case DType::kFloat16:
    return "float16";
  case DType::kBFloat16:
    return "bfloat16";
  }
  return "float32";
}

class Checker {
public:
  std::vector<ManifestError> errors;

  void fail(std::string field, std::string message) {
    errors.push_back({std::move(field), std::move(message)});
  }

  // Rejects keys of `obj` outside `allowed`.
  void known_keys(const json& obj, const std::string& where,
                  std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string list;
      for (auto a : allowed)
        list += (list.empty() ? "" : ", ") + std::string(a);
      fail(where.empty() ? key : where + "." + key,
           fmt::format("unknown key '{}'{}; allowed keys: {}", key,
                       where.empty() ? "" : " in '" + where + "'", list));
    }
  }

  const json* object(const json& parent, const std::string& key, const std::string& path,
                     bool required) {
    auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(path, fmt::format("missing required object '{}'", path));
      return nullptr;
    }
    if (!it->is_object()) {
      fail(path, fmt::format("'{}' must be a JSON object, got {}", path, it->type_name()));
      return nullptr;
    }
    return &*it;
  }

  // Integer field in [lo, hi]; returns the default when absent and optional.
  std::optional<std::int64_t> integer(const json& parent, const std::string& key,
                                      const std::string& path, bool required, std::int64_t lo,
                                      std::int64_t hi, const std::string& allowed) {
    auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(path, fmt::format("missing required field '{}' ({})", path, allowed));
      return std::nullopt;
    }
    if (!it->is_number_integer()) {
      fail(path, fmt::format("'{}' must be an integer ({}), got {} {}", path, allowed,
                             it->type_name(), it->dump()));
      return std::nullopt;
    }
    std::int64_t v = 0;
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
      v = INT64_MAX;
    } else {
      v = it->get<std::int64_t>();
    }
    if (v < lo || v > hi) {
      fail(path, fmt::format("'{}' = {} is out of range; allowed: {}", path, v, allowed));
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::string> string(const json& parent, const std::string& key,
                                    const std::string& path, bool required,
                                    std::initializer_list<std::string_view> choices) {
    auto it = parent.find(key);
    std::string list;
    for (auto c : choices)
      list += (list.empty() ? "" : ", ") + std::string("\"") + std::string(c) + "\"";
    if (it == parent.end()) {
      if (required)
        fail(path, fmt::format("missing required field '{}'{}", path,
                               list.empty() ? "" : " (one of " + list + ")"));
      return std::nullopt;
    }
    if (!it->is_string()) {
      fail(path, fmt::format("'{}' must be a string{}, got {}", path,
                             list.empty() ? "" : " (one of " + list + ")", it->type_name()));
      return std::nullopt;
    }
    auto s = it->get<std::string>();
    if (choices.size() != 0 && std::find(choices.begin(), choices.end(), s) == choices.end()) {
      fail(path, fmt::format("'{}' = \"{}\" is not allowed; allowed: {}", path, s, list));
      return std::nullopt;
    }
    return s;
  }
};

bool is_c_identifier(const std::string& s) {
  if (s.empty() || s.size() > 255) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

} // namespace

ManifestParse parse_manifest(std::string_view manifest_text) {
  ManifestParse out;
  Checker c;
  if (manifest_text.size() > kMaxManifestBytes) {
    c.fail("manifest.json", fmt::format("manifest.json is {} bytes; the limit is {} bytes",
                                        manifest_text.size(), kMaxManifestBytes));
    out.errors = std::move(c.errors);
    return out;
  }
  // read_json, not json::parse: a number beyond double range ("1e999") is a failed field, named,
  // never an out_of_range exception.
  JsonRead read = read_json(manifest_text);
  if (read.number_overflow) {
    const std::string field = read.path.empty() ? "manifest.json" : read.path;
    c.fail(field, fmt::format("'{}' holds a number outside the range of a double (JSON number "
                              "overflow); write the value the contract asks for",
                              field));
    out.errors = std::move(c.errors);
    return out;
  }
  if (!read.value) {
    c.fail("manifest.json", fmt::format("manifest.json is not valid JSON ({}); send one JSON "
                                        "object with the contract's keys",
                                        read.error));
    out.errors = std::move(c.errors);
    return out;
  }
  json doc = std::move(*read.value);
  if (!doc.is_object()) {
    c.fail("manifest.json",
           "manifest.json must be a JSON object, got " + std::string(doc.type_name()));
    out.errors = std::move(c.errors);
    return out;
  }
  Manifest m;
  c.known_keys(doc, "",
               {"contract", "entry_points", "launch", "dispatch", "target", "known_limits",
                "build_command", "claimed_target"});
  c.string(doc, "contract", "contract", true, {kContractId});

  if (const json* eps = c.object(doc, "entry_points", "entry_points", true)) {
    c.known_keys(*eps, "entry_points", {"float32", "float16", "bfloat16"});
    if (eps->empty())
      c.fail("entry_points", "'entry_points' is empty; name at least one of float32, float16, "
                             "bfloat16");
    std::set<std::string> seen;
    for (const auto& [key, value] : eps->items()) {
      auto dtype = dtype_from_name(key);
      if (!dtype) continue; // reported by known_keys
      const std::string path = "entry_points." + key;
      if (!value.is_string()) {
        c.fail(path, fmt::format("'{}' must be a string naming an extern \"C\" __global__ "
                                 "function, got {}",
                                 path, value.type_name()));
        continue;
      }
      auto name = value.get<std::string>();
      if (!is_c_identifier(name)) {
        c.fail(path, fmt::format("'{}' = \"{}\" is not a valid C identifier "
                                 "([A-Za-z_][A-Za-z0-9_]*, at most 255 characters)",
                                 path, name.substr(0, 64)));
        continue;
      }
      if (!seen.insert(name).second) {
        c.fail(path, fmt::format("'{}' = \"{}\" is used for two dtypes; each dtype needs its own "
                                 "extern \"C\" entry point",
                                 path, name));
        continue;
      }
      m.entry_points[*dtype] = name;
    }
  }

  if (const json* launch = c.object(doc, "launch", "launch", true)) {
    c.known_keys(*launch, "launch", {"block_threads", "rows_per_block", "grid", "dynamic_smem"});
    if (auto v = c.integer(*launch, "block_threads", "launch.block_threads", true, 32, 1024,
                           "a multiple of 32 from 32 to 1024")) {
      if (*v % 32 != 0)
        c.fail("launch.block_threads",
               fmt::format("'launch.block_threads' = {} is not a multiple of 32; allowed: a "
                           "multiple of 32 from 32 to 1024",
                           *v));
      else
        m.launch.block_threads = static_cast<int>(*v);
    }
    if (auto v = c.integer(*launch, "rows_per_block", "launch.rows_per_block", true, 1, 1 << 20,
                           "an integer from 1 to 1048576"))
      m.launch.rows_per_block = static_cast<int>(*v);
    if (auto g = c.string(*launch, "grid", "launch.grid", true, {"per_rows", "persistent"}))
      m.launch.grid = *g == "per_rows" ? GridKind::kPerRows : GridKind::kPersistent;
    if (const json* smem = c.object(*launch, "dynamic_smem", "launch.dynamic_smem", false)) {
      c.known_keys(*smem, "launch.dynamic_smem", {"fixed_bytes", "bytes_per_h"});
      const std::string allowed = fmt::format("0 to {} bytes (227 KiB)", kMaxDynamicSmemBytes);
      if (auto v = c.integer(*smem, "fixed_bytes", "launch.dynamic_smem.fixed_bytes", true, 0,
                             kMaxDynamicSmemBytes, allowed))
        m.launch.smem_fixed_bytes = *v;
      if (auto v = c.integer(*smem, "bytes_per_h", "launch.dynamic_smem.bytes_per_h", true, 0,
                             kMaxDynamicSmemBytes, allowed))
        m.launch.smem_bytes_per_h = *v;
    }
  }

  const std::size_t errors_before_dispatch = c.errors.size();
  if (const json* d = c.object(doc, "dispatch", "dispatch", true)) {
    c.known_keys(*d, "dispatch", {"h_min", "h_max", "h_multiple_of", "x_rows", "alignment_bytes"});
    const std::string hr = "an integer from 1 to 2147483647";
    if (auto v = c.integer(*d, "h_min", "dispatch.h_min", true, 1, INT32_MAX, hr))
      m.dispatch.h_min = *v;
    if (auto v = c.integer(*d, "h_max", "dispatch.h_max", true, 1, INT32_MAX, hr))
      m.dispatch.h_max = *v;
    if (auto v = c.integer(*d, "h_multiple_of", "dispatch.h_multiple_of", false, 1, INT32_MAX, hr))
      m.dispatch.h_multiple_of = *v;
    if (auto v = c.string(*d, "x_rows", "dispatch.x_rows", false, {"any_stride", "contiguous"}))
      m.dispatch.x_rows = *v == "any_stride" ? RowLayout::kAnyStride : RowLayout::kContiguous;
    if (auto v = c.integer(*d, "alignment_bytes", "dispatch.alignment_bytes", false, 1, 16,
                           "a power of two: 1, 2, 4, 8 or 16")) {
      if ((*v & (*v - 1)) != 0)
        c.fail("dispatch.alignment_bytes",
               fmt::format("'dispatch.alignment_bytes' = {} is not a power of two; allowed: 1, "
                           "2, 4, 8 or 16",
                           *v));
      else
        m.dispatch.alignment_bytes = static_cast<int>(*v);
    }
    if (c.errors.size() == errors_before_dispatch && m.dispatch.h_min > m.dispatch.h_max)
      c.fail("dispatch.h_min", fmt::format("'dispatch.h_min' = {} is greater than "
                                           "'dispatch.h_max' = {}; need h_min <= h_max",
                                           m.dispatch.h_min, m.dispatch.h_max));
  }
  if (c.errors.empty() && m.launch.dynamic_smem_bytes(m.dispatch.h_max) > kMaxDynamicSmemBytes) {
    c.fail("launch.dynamic_smem",
           fmt::format("'launch.dynamic_smem' needs fixed_bytes + bytes_per_h * h_max = {} + {} * "
                       "{} = {} bytes, above the sm_90 opt-in limit of {} bytes (227 KiB); lower "
                       "dispatch.h_max or the shared memory per H",
                       m.launch.smem_fixed_bytes, m.launch.smem_bytes_per_h, m.dispatch.h_max,
                       m.launch.dynamic_smem_bytes(m.dispatch.h_max), kMaxDynamicSmemBytes));
  }

  if (auto t = c.string(doc, "target", "target", true, {"sm_90", "sm_90a"})) m.target = *t;
  if (auto s = c.string(doc, "known_limits", "known_limits", false, {})) m.known_limits = *s;
  if (auto s = c.string(doc, "build_command", "build_command", false, {})) m.build_command = *s;
  if (auto s = c.string(doc, "claimed_target", "claimed_target", false, {})) m.claimed_target = *s;

  if (c.errors.empty())
    out.manifest = std::move(m);
  else
    out.errors = std::move(c.errors);
  return out;
}

std::string dispatch_predicate_text(const Manifest& manifest) {
  std::string dtypes;
  for (const auto& [dtype, name] : manifest.entry_points)
    dtypes += (dtypes.empty() ? "" : ",") + std::string(name_of(dtype));
  const auto& d = manifest.dispatch;
  return fmt::format(
      "dtype in {{{}}} && {}<=H<={} && H%{}==0 && {} && pointers and row stride {}-byte aligned",
      dtypes, d.h_min, d.h_max, d.h_multiple_of,
      d.x_rows == RowLayout::kAnyStride ? "any row stride" : "x_row_stride==H", d.alignment_bytes);
}

} // namespace kloop::rmsnorm
