// Manifest parsing, formats 1 and 2 (manifest.h).
#include "kernels/manifest.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kernels/json_read.h"

namespace kloop::op {
namespace {

using nlohmann::json;

class Checker {
public:
  std::vector<ManifestError> errors;

  void fail(std::string field, std::string message) {
    errors.push_back({std::move(field), std::move(message)});
  }

  // Rejects keys of `obj` outside `allowed`; a key of `misplaced` gets its message (where the key
  // belongs and the fix) instead of the list of allowed keys.
  void known_keys(const json& obj, const std::string& where,
                  const std::vector<std::string>& allowed,
                  const std::map<std::string, std::string>& misplaced = {}) {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      if (auto m = misplaced.find(key); m != misplaced.end()) {
        fail(where.empty() ? key : where + "." + key, m->second);
        continue;
      }
      std::string list;
      for (const auto& a : allowed)
        list += (list.empty() ? "" : ", ") + a;
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

  // Integer field in [lo, hi]; nullopt when absent (an error when required) or invalid.
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
                                    const std::vector<std::string>& choices) {
    auto it = parent.find(key);
    std::string list;
    for (const auto& c : choices)
      list += (list.empty() ? "" : ", ") + std::string("\"") + c + "\"";
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
    if (!choices.empty() && std::find(choices.begin(), choices.end(), s) == choices.end()) {
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

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (DType d : kAllDTypes)
    out.emplace_back(dtype_name(d));
  return out;
}

// Batched input tensors: the ones whose row layout a manifest may restrict (`<name>_rows`).
std::vector<int> row_tensors(const Declaration& d) {
  std::vector<int> out;
  for (std::size_t i = 0; i < d.tensors.size(); ++i)
    if (d.tensors[i].batched && d.tensors[i].role != Role::kOutput)
      out.push_back(static_cast<int>(i));
  return out;
}

std::string smem_key(const Declaration& d) {
  const int ra = d.row_axis();
  return "bytes_per_" + (ra < 0 ? std::string("row") : key_name(d.axes[ra].name));
}

// Entry points of one variant (format 1: the manifest's top level). `where` prefixes the paths.
void parse_entries(Checker& c, const json& parent, const std::string& where,
                   std::set<std::string>& seen_in_manifest, Variant& v) {
  const std::string path = where + "entry_points";
  const json* eps = c.object(parent, "entry_points", path, true);
  if (!eps) return;
  c.known_keys(*eps, path, dtype_names());
  if (eps->empty())
    c.fail(path,
           fmt::format("'{}' is empty; name at least one of float32, float16, bfloat16", path));
  std::set<std::string> seen;
  for (const auto& [key, value] : eps->items()) {
    auto dtype = parse_dtype(key);
    if (!dtype) continue; // reported by known_keys
    const std::string p = path + "." + key;
    if (!value.is_string()) {
      c.fail(p, fmt::format("'{}' must be a string naming an extern \"C\" __global__ function, "
                            "got {}",
                            p, value.type_name()));
      continue;
    }
    auto name = value.get<std::string>();
    if (!is_c_identifier(name)) {
      c.fail(p, fmt::format("'{}' = \"{}\" is not a valid C identifier ([A-Za-z_][A-Za-z0-9_]*, "
                            "at most 255 characters)",
                            p, name.substr(0, 64)));
      continue;
    }
    if (!seen.insert(name).second) {
      c.fail(p, fmt::format("'{}' = \"{}\" is used for two dtypes; each dtype needs its own "
                            "extern \"C\" entry point",
                            p, name));
      continue;
    }
    seen_in_manifest.insert(name);
    v.entry_points[*dtype] = name;
  }
}

void parse_launch(Checker& c, const Declaration& d, const json& parent, const std::string& where,
                  LaunchRule& l) {
  const std::string path = where + "launch";
  const json* launch = c.object(parent, "launch", path, true);
  if (!launch) return;
  c.known_keys(*launch, path, {"block_threads", "rows_per_block", "grid", "dynamic_smem"});
  if (auto v = c.integer(*launch, "block_threads", path + ".block_threads", true, 32, 1024,
                         "a multiple of 32 from 32 to 1024")) {
    if (*v % 32 != 0)
      c.fail(path + ".block_threads",
             fmt::format("'{}.block_threads' = {} is not a multiple of 32; allowed: a multiple of "
                         "32 from 32 to 1024",
                         path, *v));
    else
      l.block_threads = static_cast<int>(*v);
  }
  if (auto v = c.integer(*launch, "rows_per_block", path + ".rows_per_block", true, 1, 1 << 20,
                         "an integer from 1 to 1048576"))
    l.rows_per_block = static_cast<int>(*v);
  if (auto g = c.string(*launch, "grid", path + ".grid", true, {"per_rows", "persistent"}))
    l.grid = *g == "per_rows" ? GridKind::kPerRows : GridKind::kPersistent;
  const std::string sp = path + ".dynamic_smem";
  if (const json* smem = c.object(*launch, "dynamic_smem", sp, false)) {
    const std::string per = smem_key(d);
    c.known_keys(*smem, sp, {"fixed_bytes", per});
    const std::string allowed = fmt::format("0 to {} bytes (227 KiB)", kMaxDynamicSmemBytes);
    if (auto v = c.integer(*smem, "fixed_bytes", sp + ".fixed_bytes", true, 0, kMaxDynamicSmemBytes,
                           allowed))
      l.smem_fixed_bytes = *v;
    if (auto v = c.integer(*smem, per, sp + "." + per, true, 0, kMaxDynamicSmemBytes, allowed))
      l.smem_bytes_per_unit = *v;
  }
}

// The dispatch clauses shared by format 1's "dispatch" and format 2's "when" (the object `obj`
// at `path`). `axes_required`: format 1 needs <axis>_min and <axis>_max.
void parse_when(Checker& c, const Declaration& d, const json& obj, const std::string& path,
                bool axes_required, When& w) {
  const std::size_t errors_before = c.errors.size();
  const std::string hr = "an integer from 1 to 2147483647";
  w.axes.assign(d.axes.size(), AxisRange{});
  for (std::size_t i = 0; i < d.axes.size(); ++i) {
    const Axis& a = d.axes[i];
    if (!a.variable) continue;
    const std::string k = key_name(a.name);
    AxisRange& r = w.axes[i];
    r.min = a.min;
    r.max = a.max;
    if (auto v =
            c.integer(obj, k + "_min", path + "." + k + "_min", axes_required, 1, INT32_MAX, hr))
      r.min = *v;
    if (auto v =
            c.integer(obj, k + "_max", path + "." + k + "_max", axes_required, 1, INT32_MAX, hr))
      r.max = *v;
    if (auto v = c.integer(obj, k + "_multiple_of", path + "." + k + "_multiple_of", false, 1,
                           INT32_MAX, hr))
      r.multiple_of = *v;
  }
  for (int t : row_tensors(d)) {
    const std::string k = d.tensors[t].name + "_rows";
    if (auto v = c.string(obj, k, path + "." + k, false, {"any_stride", "contiguous"}))
      w.rows[t] = *v == "any_stride" ? RowLayout::kAnyStride : RowLayout::kContiguous;
  }
  if (auto v = c.integer(obj, "alignment_bytes", path + ".alignment_bytes", false, 1, 16,
                         "a power of two: 1, 2, 4, 8 or 16")) {
    if ((*v & (*v - 1)) != 0)
      c.fail(path + ".alignment_bytes",
             fmt::format("'{}.alignment_bytes' = {} is not a power of two; allowed: 1, 2, 4, 8 "
                         "or 16",
                         path, *v));
    else
      w.alignment_bytes = static_cast<int>(*v);
  }
  const std::string big = "an integer from 1 to 9223372036854775807";
  if (auto v = c.integer(obj, "max_rows", path + ".max_rows", false, 1, INT64_MAX, big))
    w.max_rows = *v;
  if (auto v = c.integer(obj, "max_elements", path + ".max_elements", false, 1, INT64_MAX, big))
    w.max_elements = *v;
  if (c.errors.size() != errors_before) return;
  for (std::size_t i = 0; i < d.axes.size(); ++i) {
    if (!d.axes[i].variable || w.axes[i].min <= w.axes[i].max) continue;
    const std::string k = key_name(d.axes[i].name);
    c.fail(path + "." + k + "_min",
           fmt::format("'{}.{}_min' = {} is greater than '{}.{}_max' = {}; need {}_min <= {}_max",
                       path, k, w.axes[i].min, path, k, w.axes[i].max, k, k));
  }
}

std::vector<std::string> when_keys(const Declaration& d, bool format2) {
  std::vector<std::string> keys;
  if (format2) keys.push_back("dtypes");
  for (const Axis& a : d.axes)
    if (a.variable)
      for (const char* s : {"_min", "_max", "_multiple_of"})
        keys.push_back(key_name(a.name) + s);
  for (int t : row_tensors(d))
    keys.push_back(d.tensors[t].name + "_rows");
  for (const char* k : {"alignment_bytes", "max_rows", "max_elements"})
    keys.emplace_back(k);
  return keys;
}

// Launch smem at the largest row width a variant admits must fit the opt-in limit.
void check_smem(Checker& c, const Declaration& d, const Variant& v, const std::string& where) {
  const int ra = d.row_axis();
  if (ra < 0) return;
  const std::int64_t h_max = v.when.axes[ra].max;
  const LaunchRule& l = v.launch;
  if (l.dynamic_smem_bytes(h_max) <= kMaxDynamicSmemBytes) return;
  const std::string k = key_name(d.axes[ra].name);
  const std::string limits = where.empty() ? "dispatch." : where + "when.";
  c.fail(where + "launch.dynamic_smem",
         fmt::format("'{}launch.dynamic_smem' needs fixed_bytes + {} * {}_max = {} + {} * {} = {} "
                     "bytes, above the sm_90 opt-in limit of {} bytes (227 KiB); lower "
                     "{}{}_max or the shared memory per {}",
                     where, smem_key(d), k, l.smem_fixed_bytes, l.smem_bytes_per_unit, h_max,
                     l.dynamic_smem_bytes(h_max), kMaxDynamicSmemBytes, limits, k,
                     d.axes[ra].name));
}

void parse_format1(Checker& c, const Declaration& d, const json& doc, Manifest& m) {
  Variant v;
  v.name = "default";
  std::set<std::string> names;
  parse_entries(c, doc, "", names, v);
  parse_launch(c, d, doc, "", v.launch);
  if (const json* disp = c.object(doc, "dispatch", "dispatch", true)) {
    c.known_keys(*disp, "dispatch", when_keys(d, false));
    parse_when(c, d, *disp, "dispatch", true, v.when);
  }
  if (c.errors.empty()) check_smem(c, d, v, "");
  m.variants.push_back(std::move(v));
}

// when.dtypes of the variant at `where` ("variants[i]."): each a dtype with an entry point, named
// once, and no entry point for a dtype it leaves out (that entry could never be launched).
void parse_dtypes(Checker& c, const json& when, const std::string& where, Variant& v) {
  const std::string path = where + "when";
  auto it = when.find("dtypes");
  if (it == when.end()) return;
  if (!it->is_array() || it->empty()) {
    c.fail(path + ".dtypes", fmt::format("'{}.dtypes' must be a non-empty array of dtype names "
                                         "(float32, float16, bfloat16)",
                                         path));
    return;
  }
  for (const auto& e : *it) {
    const auto dt = e.is_string() ? parse_dtype(e.get<std::string>()) : std::nullopt;
    if (!dt) {
      c.fail(path + ".dtypes", fmt::format("'{}.dtypes' holds {}; allowed: float32, float16, "
                                           "bfloat16",
                                           path, e.dump()));
      continue;
    }
    if (!v.entry_points.count(*dt))
      c.fail(path + ".dtypes",
             fmt::format("'{}.dtypes' names {} but the variant has no entry point for it; add "
                         "one to its entry_points or drop it",
                         path, dtype_name(*dt)));
    if (std::find(v.when.dtypes.begin(), v.when.dtypes.end(), *dt) != v.when.dtypes.end())
      c.fail(path + ".dtypes", fmt::format("'{}.dtypes' names {} twice; name each dtype once", path,
                                           dtype_name(*dt)));
    v.when.dtypes.push_back(*dt);
  }
  if (v.when.dtypes.empty()) return;
  for (const auto& [dtype, name] : v.entry_points)
    if (std::find(v.when.dtypes.begin(), v.when.dtypes.end(), dtype) == v.when.dtypes.end())
      c.fail(where + "entry_points." + std::string(dtype_name(dtype)),
             fmt::format("'{}entry_points.{}' = \"{}\" could never be launched: '{}.dtypes' "
                         "leaves {} out; add {} to '{}.dtypes' or remove the entry",
                         where, dtype_name(dtype), name, path, dtype_name(dtype), dtype_name(dtype),
                         path));
}

void parse_format2(Checker& c, const Declaration& d, const json& doc, Manifest& m) {
  auto it = doc.find("variants");
  if (it == doc.end() || !it->is_array() || it->empty() ||
      it->size() > static_cast<std::size_t>(kMaxVariants)) {
    c.fail("variants", fmt::format("'variants' must be an array of 1 to {} variant objects (format "
                                   "2)",
                                   kMaxVariants));
    return;
  }
  std::set<std::string> names;
  std::set<std::string> labels;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& vj = (*it)[i];
    const std::string where = fmt::format("variants[{}].", i);
    if (!vj.is_object()) {
      c.fail(where.substr(0, where.size() - 1), "each variant must be a JSON object");
      continue;
    }
    c.known_keys(vj, where.substr(0, where.size() - 1), {"name", "when", "entry_points", "launch"});
    Variant v;
    v.name = c.string(vj, "name", where + "name", false, {}).value_or(fmt::format("variant{}", i));
    if (!labels.insert(v.name).second)
      c.fail(where + "name",
             fmt::format("'{}name' = \"{}\" is used twice; name each variant once", where, v.name));
    parse_entries(c, vj, where, names, v);
    parse_launch(c, d, vj, where, v.launch);
    const std::size_t before = c.errors.size();
    if (const json* when = c.object(vj, "when", where + "when", false)) {
      c.known_keys(*when, where + "when", when_keys(d, true));
      parse_when(c, d, *when, where + "when", false, v.when);
      parse_dtypes(c, *when, where, v);
    } else {
      parse_when(c, d, json::object(), where + "when", false, v.when);
    }
    if (c.errors.size() == before) check_smem(c, d, v, where);
    m.variants.push_back(std::move(v));
  }
}

std::string when_text(const Declaration& d, const Variant& v) {
  std::vector<std::string> dtypes;
  if (v.when.dtypes.empty())
    for (const auto& [dtype, name] : v.entry_points)
      dtypes.emplace_back(dtype_name(dtype));
  else
    for (DType dt : v.when.dtypes)
      dtypes.emplace_back(dtype_name(dt));
  std::string out = fmt::format("dtype in {{{}}}", join(dtypes, ","));
  for (std::size_t i = 0; i < d.axes.size(); ++i) {
    if (!d.axes[i].variable) continue;
    const AxisRange& r = v.when.axes[i];
    const std::string& n = d.axes[i].name;
    out += fmt::format(" && {}<={}<={} && {}%{}==0", r.min, n, r.max, n, r.multiple_of);
  }
  for (int t : row_tensors(d)) {
    const auto it = v.when.rows.find(t);
    const Tensor& tensor = d.tensors[t];
    if (it == v.when.rows.end() || it->second == RowLayout::kAnyStride) {
      out += " && any row stride";
      continue;
    }
    const std::string row = tensor.dims.size() == 1 ? tensor.dims[0] : "row elements";
    out += fmt::format(" && {}_row_stride=={}", tensor.name, row);
  }
  out += fmt::format(" && pointers and row stride {}-byte aligned", v.when.alignment_bytes);
  if (v.when.max_rows) out += fmt::format(" && rows<={}", *v.when.max_rows);
  if (v.when.max_elements) out += fmt::format(" && elements<={}", *v.when.max_elements);
  return out;
}

} // namespace

std::string key_name(std::string_view axis_name) {
  std::string s(axis_name);
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> Manifest::entry_names() const {
  std::vector<std::string> out;
  for (const Variant& v : variants)
    for (const auto& [dtype, name] : v.entry_points)
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  return out;
}

ManifestParse parse_manifest(const Declaration& decl, std::string_view manifest_text) {
  ManifestParse out;
  Checker c;
  auto finish = [&]() {
    out.errors = std::move(c.errors);
    return out;
  };
  if (manifest_text.size() > kMaxManifestBytes) {
    c.fail("manifest.json", fmt::format("manifest.json is {} bytes; the limit is {} bytes",
                                        manifest_text.size(), kMaxManifestBytes));
    return finish();
  }
  // read_json, not json::parse: a number beyond double range ("1e999") is a failed field, named,
  // never an out_of_range exception (kernels/json_read.h).
  JsonRead read = read_json(manifest_text);
  if (read.number_overflow) {
    const std::string field = read.path.empty() ? "manifest.json" : read.path;
    c.fail(field, fmt::format("'{}' holds a number outside the range of a double (JSON number "
                              "overflow); write the value the contract asks for",
                              field));
    return finish();
  }
  if (!read.value) {
    c.fail("manifest.json", fmt::format("manifest.json is not valid JSON ({}); send one JSON "
                                        "object with the contract's keys",
                                        read.error));
    return finish();
  }
  if (!read.duplicate_key.empty()) {
    c.fail(read.duplicate_key,
           fmt::format("'{}' is given twice in manifest.json; JSON readers disagree on which one "
                       "counts, so write each key once",
                       read.duplicate_key));
    return finish();
  }
  json doc = std::move(*read.value);
  if (!doc.is_object()) {
    c.fail("manifest.json",
           "manifest.json must be a JSON object, got " + std::string(doc.type_name()));
    return finish();
  }
  Manifest m;
  const auto format = c.integer(doc, "format", "format", false, 1, 2, "1 or 2");
  m.format = static_cast<int>(format.value_or(1));
  const std::vector<std::string> common = {"contract",     "format",        "target",
                                           "known_limits", "build_command", "claimed_target"};
  // The keys of the other format are named with the fix, not as unknown keys.
  const std::vector<std::string> format1_keys = {"entry_points", "launch", "dispatch"};
  std::vector<std::string> keys = common;
  std::map<std::string, std::string> misplaced;
  if (m.format == 1) {
    keys.insert(keys.end(), format1_keys.begin(), format1_keys.end());
    misplaced["variants"] = "'variants' is a key of manifest format 2: add \"format\": 2 to "
                            "declare per-shape variants (docs/CANDIDATE-FORMAT.md), or write "
                            "format 1's entry_points, launch and dispatch instead";
  } else {
    keys.emplace_back("variants");
    for (const std::string& k : format1_keys)
      misplaced[k] = fmt::format("'{}' is a key of manifest format 1; in format 2 each variant of "
                                 "'variants' has its own entry_points and launch, and its "
                                 "dispatch clauses go in its 'when'",
                                 k);
  }
  c.known_keys(doc, "", keys, misplaced);
  c.string(doc, "contract", "contract", true, {decl.id()});
  if (m.format == 1)
    parse_format1(c, decl, doc, m);
  else
    parse_format2(c, decl, doc, m);
  if (auto t = c.string(doc, "target", "target", true, {"sm_90", "sm_90a"})) m.target = *t;
  if (auto s = c.string(doc, "known_limits", "known_limits", false, {})) m.known_limits = *s;
  if (auto s = c.string(doc, "build_command", "build_command", false, {})) m.build_command = *s;
  if (auto s = c.string(doc, "claimed_target", "claimed_target", false, {})) m.claimed_target = *s;
  if (!c.errors.empty()) return finish();
  out.manifest = std::move(m);
  return out;
}

std::string dispatch_predicate_text(const Declaration& decl, const Manifest& manifest) {
  if (manifest.format == 1 && manifest.variants.size() == 1)
    return when_text(decl, manifest.variants[0]);
  std::string out;
  for (std::size_t i = 0; i < manifest.variants.size(); ++i)
    out += fmt::format("v{} {}: {}; ", i, manifest.variants[i].name,
                       when_text(decl, manifest.variants[i]));
  return out + "else reference";
}

nlohmann::json format1_schema(const Declaration& d) {
  json dispatch = json::object();
  for (const Axis& a : d.axes) {
    if (!a.variable) continue;
    const std::string k = key_name(a.name);
    dispatch[k + "_min"] = "int >= 1";
    dispatch[k + "_max"] = "int >= " + k + "_min";
    dispatch[k + "_multiple_of"] = "int >= 1";
  }
  for (int t : row_tensors(d))
    dispatch[d.tensors[t].name + "_rows"] = "any_stride | contiguous";
  dispatch["alignment_bytes"] = "power of two 1..16";
  return json{{"contract", d.id()},
              {"entry_points", "object: dtype name -> extern \"C\" symbol, at least one"},
              {"launch",
               {{"block_threads", "int, multiple of 32, 32..1024"},
                {"rows_per_block", "int >= 1"},
                {"grid", "per_rows | persistent"},
                {"dynamic_smem", {{"fixed_bytes", "int >= 0"}, {smem_key(d), "int >= 0"}}}}},
              {"dispatch", dispatch},
              {"target", "sm_90 | sm_90a"},
              {"known_limits", "string"}};
}

} // namespace kloop::op
