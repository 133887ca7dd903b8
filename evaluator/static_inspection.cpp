#include "evaluator/static_inspection.h"

#include <algorithm>
#include <regex>

#include <fmt/core.h>

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

std::string strip_ptx_comment(const std::string& line) {
  const auto pos = line.find("//");
  return pos == std::string::npos ? line : line.substr(0, pos);
}

// Accepted PTX parameter types for each of the contract's eight parameters
// (x, weight, y, rows, H, x_row_stride, y_row_stride, eps).
const std::vector<std::vector<std::string>>& contract_param_types() {
  static const std::vector<std::vector<std::string>> kTypes = {
      {".u64", ".b64"},         {".u64", ".b64"},         {".u64", ".b64"},
      {".u64", ".s64", ".b64"}, {".u32", ".s32", ".b32"}, {".u64", ".s64", ".b64"},
      {".u64", ".s64", ".b64"}, {".f32", ".b32"}};
  return kTypes;
}

std::string_view dtype_name_for_messages(DType d) {
  switch (d) {
  case DType::kFloat32:
    return "float32";
  case DType::kFloat16:
    return "float16";
  case DType::kBFloat16:
    return "bfloat16";
  }
  return "?";
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

std::vector<PtxEntry> parse_ptx_entries(std::string_view ptx) {
  static const std::regex kEntry(R"(\.entry\s+([A-Za-z_$][\w$]*)\s*\(?)");
  static const std::regex kParam(R"(\.param\s+(\.[a-z]+\d+))");
  std::vector<PtxEntry> entries;
  const auto lines = split_lines(ptx);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string line = strip_ptx_comment(lines[i]);
    std::smatch m;
    if (!std::regex_search(line, m, kEntry)) continue;
    PtxEntry e{m[1].str(), static_cast<int>(i + 1), {}};
    // Parameters run until the closing ')' of the parameter list.
    std::string rest = m.suffix().str();
    for (std::size_t k = i; k < lines.size(); ++k) {
      const std::string l = k == i ? rest : strip_ptx_comment(lines[k]);
      for (auto it = std::sregex_iterator(l.begin(), l.end(), kParam); it != std::sregex_iterator();
           ++it)
        e.param_types.push_back((*it)[1].str());
      if (l.find(')') != std::string::npos) break;
      if (l.find('{') != std::string::npos) break;
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

std::vector<PtxFinding> check_ptx(std::string_view ptx, const rmsnorm::Manifest& manifest) {
  static const std::regex kModuleGlobal(
      R"(^\s*((\.visible|\.extern|\.weak|\.common)\s+)*\.global\s+(.*?)([A-Za-z_$][\w$]*)\s*(\[|=|;))");
  static const std::regex kTimer(R"(%globaltimer(_lo|_hi)?\b)");
  static const std::regex kClock(R"(%clock(64|_hi)?\b)");
  static const std::regex kCallee(R"(\b(malloc|free|vprintf|__nv_cudaMalloc|__cudaCDP2Malloc)\b)");
  static const std::regex kTrap(R"(^\s*(@!?%\w+\s+)?(trap|brkpt)\s*;)");
  std::vector<PtxFinding> out;
  const auto lines = split_lines(ptx);
  int depth = 0; // brace depth: 0 is module scope
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string line = strip_ptx_comment(lines[i]);
    const int n = static_cast<int>(i + 1);
    std::smatch m;
    // NVRTC's own string literals ($str, from printf/assert) are initialised read-only data.
    if (depth == 0 && std::regex_search(line, m, kModuleGlobal) && m[4].str().rfind("$str", 0) != 0)
      out.push_back({n, "module_state",
                     fmt::format("PTX line {}: writable module-scope variable '{}' (.global); "
                                 "__device__ variables carry state across calls and are "
                                 "forbidden: keep state in registers or shared memory",
                                 n, m[4].str())});
    if (std::regex_search(line, kTimer))
      out.push_back({n, "globaltimer",
                     fmt::format("PTX line {}: reads %globaltimer; timer reads are forbidden", n)});
    else if (std::regex_search(line, kClock))
      out.push_back(
          {n, "clock",
           fmt::format("PTX line {}: reads %clock/%clock64; clock reads are forbidden", n)});
    if (std::regex_search(line, m, kCallee) &&
        (line.find("call") != std::string::npos || line.find(".func") != std::string::npos)) {
      const std::string callee = m[1].str();
      const std::string kind = callee == "vprintf" ? "printf"
                               : callee == "free"  ? "free"
                                                   : "malloc";
      out.push_back({n, kind,
                     fmt::format("PTX line {}: uses device {} ({}); device heap and printf are "
                                 "forbidden in candidates",
                                 n, kind, callee)});
    }
    if (std::regex_search(line, m, kTrap))
      out.push_back({n, m[2].str(),
                     fmt::format("PTX line {}: '{}' instruction (from __trap/__brkpt/asm); "
                                 "forbidden: a kernel must not abort the context",
                                 n, m[2].str())});
    for (char c : line)
      depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (depth < 0) depth = 0;
  }
  // Signatures.
  const auto entries = parse_ptx_entries(ptx);
  const auto& want = contract_param_types();
  for (const auto& [dtype, name] : manifest.entry_points) {
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&name = name](const PtxEntry& e) { return e.name == name; });
    if (it == entries.end()) {
      out.push_back({0, "missing_entry",
                     fmt::format("entry point '{}' ({}) is not a kernel in the PTX; declare it "
                                 "extern \"C\" __global__",
                                 name, dtype_name_for_messages(dtype))});
      continue;
    }
    bool ok = it->param_types.size() == want.size();
    for (std::size_t p = 0; ok && p < want.size(); ++p)
      ok = std::find(want[p].begin(), want[p].end(), it->param_types[p]) != want[p].end();
    if (!ok) {
      std::string got;
      for (const auto& t : it->param_types)
        got += (got.empty() ? "" : ",") + t;
      out.push_back({it->line, "signature",
                     fmt::format("PTX line {}: entry '{}' has parameters ({}); the contract needs "
                                 "(const T* x, const T* weight, T* y, long long rows, int H, "
                                 "long long x_row_stride, long long y_row_stride, float eps)",
                                 it->line, name, got)});
    }
  }
  return out;
}

} // namespace kloop::evaluator
