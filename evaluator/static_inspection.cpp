#include "evaluator/static_inspection.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>

#include <fmt/core.h>

#include "kernels/rmsnorm/operator.h"

namespace kloop::evaluator {
namespace {

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t b = 0;
  while (b < text.size()) {
    std::size_t e = text.find('\n', b);
    if (e == std::string_view::npos) e = text.size();
    lines.emplace_back(text.substr(b, e - b));
    b = e + 1;
  }
  return lines;
}

// The C++ spelling of a mangled name ("_Z7rms_f32PKfS0_Pfxixxf" -> "rms_f32(float const*, ...)"),
// or empty for a name that is not mangled.
std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string s = status == 0 && out ? out : "";
  std::free(out);
  return s;
}

std::vector<PtxEntry> entries_of(const ptx::Module& module) {
  std::vector<PtxEntry> out;
  for (const ptx::Function* f : module.entries()) {
    PtxEntry e{f->name, f->line, {}, demangle(f->name), f->maxntid, f->reqntid};
    for (const auto& p : f->params)
      e.param_types.push_back(p.type);
    out.push_back(std::move(e));
  }
  return out;
}

// "manifest FIELD = "NAME" is not a kernel of the compiled module (the module defines ...)", with a
// hint when a C++ kernel of that name exists (it lacks extern "C"; namespaced kernels included).
// `field`: the manifest path of the entry ("entry_points.float16", or in format 2
// "variants[1].entry_points.float16 (variant 'wide')").
std::string missing_entry_message(const std::vector<PtxEntry>& entries, const std::string& name,
                                  const std::string& field) {
  std::string defined, hint;
  for (const auto& e : entries) {
    defined += (defined.empty() ? "" : ", ") + e.name;
    const bool named =
        !e.demangled.empty() && (e.demangled.rfind(name + "(", 0) == 0 ||
                                 e.demangled.find("::" + name + "(") != std::string::npos);
    if (named)
      hint = fmt::format("; '{}' is there with C++ linkage as {} ({}): declare it extern \"C\" "
                         "(outside any anonymous namespace)",
                         name, e.name, e.demangled);
  }
  return fmt::format("manifest {} = \"{}\" is not a kernel of the compiled module "
                     "(the module defines {}){}; define it as extern \"C\" __global__ void {}(...) "
                     "or name one of the module's kernels",
                     field, name, defined.empty() ? "no kernels" : "the kernels " + defined, hint,
                     name);
}

// An entry point to check, with the manifest field that names it and the block size its variant
// launches it with.
struct EntryRef {
  std::string name;
  std::string field; // "entry_points.float16" or "variants[i].entry_points.float16 (...)"
  int block_threads = 0;
  std::string launch_field; // "launch.block_threads" or "variants[i].launch.block_threads"
};

// Why `e` cannot be launched with blocks of `block_threads` threads (its __launch_bounds__ or
// required block size says otherwise: the launch would fail), or empty.
std::string launch_bounds_problem(const PtxEntry& e, const EntryRef& ref) {
  if (e.maxntid > 0 && e.maxntid < ref.block_threads)
    return fmt::format("PTX line {}: entry '{}' is compiled for at most {} threads per block "
                       "(.maxntid: its __launch_bounds__), but the manifest launches it with "
                       "{} = {}; the launch would fail: raise __launch_bounds__ to at least {} or "
                       "lower {}",
                       e.line, e.name, e.maxntid, ref.launch_field, ref.block_threads,
                       ref.block_threads, ref.launch_field);
  if (e.reqntid > 0 && e.reqntid != ref.block_threads)
    return fmt::format("PTX line {}: entry '{}' requires exactly {} threads per block (.reqntid), "
                       "but the manifest launches it with {} = {}; make them equal",
                       e.line, e.name, e.reqntid, ref.launch_field, ref.block_threads);
  return {};
}

} // namespace

nlohmann::json PtxasResources::to_json() const {
  return {{"registers", registers},
          {"barriers", barriers},
          {"stack_frame_bytes", stack_frame_bytes},
          {"spill_store_bytes", spill_store_bytes},
          {"spill_load_bytes", spill_load_bytes},
          {"smem_bytes", smem_bytes}};
}

std::map<std::string, PtxasResources> parse_ptxas_report(std::string_view log) {
  static const std::regex kFunc(
      R"((?:Compiling entry function|Function properties for) '?([A-Za-z_$][\w$]*)'?)");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kBarriers(R"(used (\d+) barriers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  std::map<std::string, PtxasResources> out;
  std::string current;
  for (const auto& line : split_lines(log)) {
    if (line.find("ptxas") == std::string::npos) continue;
    std::smatch m;
    if (std::regex_search(line, m, kFunc)) {
      current = m[1].str();
      out[current];
      continue;
    }
    if (current.empty()) continue;
    auto& r = out[current];
    if (std::regex_search(line, m, kFrame)) {
      r.stack_frame_bytes = std::stol(m[1].str());
      r.spill_store_bytes = std::stol(m[2].str());
      r.spill_load_bytes = std::stol(m[3].str());
    }
    if (std::regex_search(line, m, kUsed)) r.registers = std::stoi(m[1].str());
    if (std::regex_search(line, m, kBarriers)) r.barriers = std::stoi(m[1].str());
    if (std::regex_search(line, m, kSmem)) r.smem_bytes = std::stol(m[1].str());
  }
  return out;
}

nlohmann::json ModuleDataUse::to_json() const {
  return {{"name", name},         {"ptx_line", line},         {"linkage", linkage},
          {"writable", writable}, {"write_line", write_line}, {"how", how}};
}

std::vector<PtxEntry> parse_ptx_entries(std::string_view ptx) {
  return entries_of(ptx::parse_module(ptx));
}

std::string contract_signature_problem(const PtxEntry& entry, const op::Declaration& decl) {
  const std::vector<op::AbiParam> want = op::abi(decl);
  // The first difference, in the contract's terms; none: the parameter classes match.
  std::string first;
  if (entry.param_types.size() != want.size()) {
    first = fmt::format("{} parameters where the contract has {}", entry.param_types.size(),
                        want.size());
  } else {
    for (std::size_t p = 0; p < want.size() && first.empty(); ++p)
      if (std::find(want[p].ptx_types.begin(), want[p].ptx_types.end(), entry.param_types[p]) ==
          want[p].ptx_types.end())
        first = fmt::format("parameter {} ('{} {}') is {} in the PTX", p + 1, want[p].c_type,
                            want[p].name, entry.param_types[p]);
  }
  if (first.empty()) return {};
  std::string got, need;
  for (const auto& t : entry.param_types)
    got += (got.empty() ? "" : ",") + t;
  for (const op::AbiParam& p : want)
    need += (need.empty() ? "" : ", ") + p.c_type + " " + p.name;
  return fmt::format("PTX line {}: entry '{}' has parameters ({}); the contract needs ({}): {}",
                     entry.line, entry.name, got, need, first);
}

std::string contract_signature_problem(const PtxEntry& entry) {
  return contract_signature_problem(entry, rmsnorm::declaration());
}

namespace {

PtxInspection inspect(std::string_view ptx, const op::Declaration& decl,
                      const std::vector<EntryRef>& entry_points) {
  PtxInspection out;
  const ptx::Module module = ptx::parse_module(ptx);
  out.entries = entries_of(module);
  out.module_data = module_data_uses(module);
  for (const auto& u : out.module_data) {
    if (!u.writable) continue;
    const std::string cxx = demangle(u.name);
    out.findings.push_back(
        {u.write_line, "module_state",
         fmt::format("PTX line {}: module-scope variable '{}'{} (.global, PTX line {}) is "
                     "writable: {}; writable module data carries state across calls and is "
                     "forbidden: keep state in registers or shared memory, and declare tables "
                     "const or __constant__",
                     u.write_line, cxx.empty() ? u.name : cxx,
                     cxx.empty() ? "" : " (" + u.name + ")", u.line, u.how)});
  }
  for (auto& f : forbidden_constructs(module))
    out.findings.push_back(std::move(f));
  std::stable_sort(out.findings.begin(), out.findings.end(),
                   [](const PtxFinding& a, const PtxFinding& b) { return a.line < b.line; });
  // Signatures and missing entries, in dtype order after the construct findings.
  std::set<std::string> named;
  for (const EntryRef& ref : entry_points) {
    const std::string& name = ref.name;
    auto it = std::find_if(out.entries.begin(), out.entries.end(),
                           [&name](const PtxEntry& e) { return e.name == name; });
    if (it != out.entries.end())
      if (auto why = launch_bounds_problem(*it, ref); !why.empty())
        out.findings.push_back({it->line, "launch_bounds", why}); // per variant
    if (!named.insert(name).second) continue;                     // one check per entry point
    if (it == out.entries.end()) {
      out.findings.push_back(
          {0, "missing_entry", missing_entry_message(out.entries, name, ref.field)});
      continue;
    }
    if (auto why = contract_signature_problem(*it, decl); !why.empty())
      out.findings.push_back({it->line, "signature", why});
  }
  for (const auto& e : out.entries)
    if (!named.contains(e.name)) out.unlisted_entries.push_back(e.name);
  return out;
}

} // namespace

std::vector<std::pair<DType, std::string>> entry_points_of(const op::Manifest& manifest) {
  std::vector<std::pair<DType, std::string>> out;
  for (const op::Variant& v : manifest.variants)
    for (const auto& [dtype, name] : v.entry_points)
      out.emplace_back(dtype, name);
  return out;
}

PtxInspection inspect_ptx(std::string_view ptx, const op::Declaration& decl,
                          const op::Manifest& manifest) {
  std::vector<EntryRef> refs;
  for (std::size_t i = 0; i < manifest.variants.size(); ++i) {
    const op::Variant& v = manifest.variants[i];
    const std::string where = manifest.format == 1 ? "" : fmt::format("variants[{}].", i);
    const std::string which = manifest.format == 1 ? "" : fmt::format(" (variant '{}')", v.name);
    for (const auto& [dtype, name] : v.entry_points)
      refs.push_back({name, where + "entry_points." + std::string(dtype_name(dtype)) + which,
                      v.launch.block_threads, where + "launch.block_threads"});
  }
  return inspect(ptx, decl, refs);
}

std::vector<PtxFinding> check_ptx(std::string_view ptx, const op::Declaration& decl,
                                  const op::Manifest& manifest) {
  return inspect_ptx(ptx, decl, manifest).findings;
}

} // namespace kloop::evaluator
