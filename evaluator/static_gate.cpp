// SASS summary (cuobjdump, when installed) and the `static` gate (evaluator/static_inspection.h).
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/core.h>

#include "evaluator/evidence.h"
#include "evaluator/static_inspection.h"
#include "evaluator/subprocess.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

int access_bits(const std::string& opcode) {
  if (opcode.find(".128") != std::string::npos) return 128;
  if (opcode.find(".64") != std::string::npos) return 64;
  if (opcode.find(".U8") != std::string::npos || opcode.find(".S8") != std::string::npos) return 8;
  if (opcode.find(".U16") != std::string::npos || opcode.find(".S16") != std::string::npos)
    return 16;
  return 32;
}

} // namespace

nlohmann::json parse_sass_summary(std::string_view sass) {
  static const std::regex kFunction(R"(Function\s*:\s*([A-Za-z_$][\w$]*))");
  static const std::regex kOpcode(R"(/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*))");
  nlohmann::json out = nlohmann::json::object();
  std::string current;
  std::size_t b = 0;
  while (b < sass.size()) {
    std::size_t e = sass.find('\n', b);
    if (e == std::string_view::npos) e = sass.size();
    const std::string line(sass.substr(b, e - b));
    b = e + 1;
    std::smatch m;
    if (std::regex_search(line, m, kFunction)) {
      current = m[1].str();
      out[current] = {{"local_loads", 0},
                      {"local_stores", 0},
                      {"widest_global_load_bits", 0},
                      {"widest_global_store_bits", 0}};
      continue;
    }
    if (current.empty() || !std::regex_search(line, m, kOpcode)) continue;
    const std::string op = m[1].str();
    auto& f = out[current];
    if (op.rfind("LDL", 0) == 0) f["local_loads"] = f["local_loads"].get<int>() + 1;
    if (op.rfind("STL", 0) == 0) f["local_stores"] = f["local_stores"].get<int>() + 1;
    if (op.rfind("LDG", 0) == 0)
      f["widest_global_load_bits"] =
          std::max(f["widest_global_load_bits"].get<int>(), access_bits(op));
    if (op.rfind("STG", 0) == 0)
      f["widest_global_store_bits"] =
          std::max(f["widest_global_store_bits"].get<int>(), access_bits(op));
  }
  return out;
}

nlohmann::json inspect_sass(const std::string& cubin, const std::string& cuda_root) {
  const std::string tool = cuda_root + "/bin/cuobjdump";
  if (::access(tool.c_str(), X_OK) != 0)
    return {{"status", "not_run"},
            {"reason", "cuobjdump not found at " + tool +
                           "; SASS checks need the CUDA binary "
                           "utilities"}};
  std::string tmpl = (fs::temp_directory_path() / "kloop-sass-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    return {{"status", "not_run"}, {"reason", "cannot create a temporary directory"}};
  const std::string path = tmpl + "/kernel.cubin";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  }
  SubprocessOptions opt;
  opt.deadline = std::chrono::milliseconds(20000);
  opt.output_cap = 16 << 20;
  nlohmann::json out;
  try {
    ToolCall call = run_subprocess({tool, "-sass", path}, opt);
    if (call.exited_ok())
      out = {{"status", "ran"}, {"functions", parse_sass_summary(call.stdout_text)}};
    else
      out = {{"status", "not_run"},
             {"reason",
              fmt::format("cuobjdump exited {} (signal {})", call.exit_code, call.term_signal)}};
    out["tool_call"] = call.to_json();
  } catch (const InfraError& e) {
    out = {{"status", "not_run"}, {"reason", e.what()}};
  }
  std::error_code ec;
  fs::remove_all(tmpl, ec);
  return out;
}

GateResult static_gate(const std::string& nvrtc_log, const std::string& ptx,
                       const std::string& cubin, const op::Declaration& decl,
                       const op::Manifest& manifest, const std::string& cuda_root) {
  const PtxInspection ins = inspect_ptx(ptx, decl, manifest);
  const std::vector<std::pair<DType, std::string>> entry_points = entry_points_of(manifest);
  GateResult g{std::string(kGateStatic), GateStatus::kPass, "", nlohmann::json::object()};
  nlohmann::json resources = nlohmann::json::object();
  for (const auto& [name, r] : parse_ptxas_report(nvrtc_log))
    resources[name] = r.to_json();
  g.evidence["resources"] = resources;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : ins.entries) {
    std::string dtype;
    for (const auto& [d, name] : entry_points)
      if (name == e.name && dtype.empty()) dtype = std::string(dtype_name(d));
    entries.push_back({{"name", e.name},
                       {"ptx_line", e.line},
                       {"params", e.param_types},
                       {"demangled", e.demangled},
                       {"manifest_dtype", dtype}});
  }
  g.evidence["entries"] = entries;
  g.evidence["unlisted_entries"] = ins.unlisted_entries;
  nlohmann::json data = nlohmann::json::array();
  for (const auto& u : ins.module_data)
    data.push_back(u.to_json());
  g.evidence["module_data"] = data;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : ins.findings)
    list.push_back(evidence::static_finding(f, ptx).to_json());
  g.evidence["findings"] = list;
  g.evidence["sass"] = inspect_sass(cubin, cuda_root);
  if (!ins.findings.empty()) {
    g.status = GateStatus::kFail;
    g.reason = ins.findings.front().message;
    if (ins.findings.size() > 1)
      g.reason += fmt::format(" (+{} more findings)", ins.findings.size() - 1);
    return g;
  }
  // A pass says what it rests on when something did not run, and which kernels are never
  // launched.
  std::vector<std::string> notes;
  if (g.evidence["sass"].value("status", "") != "ran")
    notes.push_back("PTX checks passed; SASS summary not run: " +
                    g.evidence["sass"].value("reason", std::string("no reason recorded")));
  if (!ins.unlisted_entries.empty()) {
    std::string names;
    for (std::size_t i = 0; i < ins.unlisted_entries.size() && i < 4; ++i)
      names += (names.empty() ? "" : ", ") + ins.unlisted_entries[i];
    if (ins.unlisted_entries.size() > 4)
      names += fmt::format(" and {} more", ins.unlisted_entries.size() - 4);
    notes.push_back(fmt::format("the module also defines {} kernel(s) the manifest does not "
                                "name, never launched: {}",
                                ins.unlisted_entries.size(), names));
  }
  for (const auto& n : notes)
    g.reason += (g.reason.empty() ? "" : "; ") + n;
  return g;
}

} // namespace kloop::evaluator
