// `kloop shadow`: the exported package's shadow module run in a subprocess (shadow.h).
#include "agent/shadow.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <fmt/core.h>

#include "agent/torch_export.h"
#include "evaluator/gate.h"
#include "evaluator/subprocess.h"
#include "store/store.h"

namespace kloop::agent {
namespace {

using nlohmann::json;

// A temporary directory removed on scope exit.
class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kloop-shadow-XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

void record(store::Store& st, ShadowResult& r, const std::string& inputs, int exit_code) {
  auto step = st.begin_step();
  if (!r.report.is_null()) r.report_sha256 = step.put_blob(r.report.dump(2));
  store::TelemetryRecord t;
  t.candidate_id = r.candidate_id;
  t.kind = "shadow";
  t.data = {{"status", r.status}, {"reason", r.reason},     {"report_sha256", r.report_sha256},
            {"inputs", inputs},   {"exit_code", exit_code}, {"recorded_at", store::now_iso8601()}};
  if (r.report.is_object()) {
    t.data["files"] = r.report.contains("files") ? r.report["files"].size() : 0;
    t.data["specialisations"] = r.report.value("specialisations", 0);
    t.data["device"] = r.report.value("device", "");
  }
  step.add_telemetry(t);
  step.commit();
}

} // namespace

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const auto p = std::filesystem::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return {};
}

ShadowResult run_shadow(store::Store& st, std::int64_t session_id, const ShadowOptions& options) {
  ShadowResult r;
  std::error_code ec;
  if (!std::filesystem::is_directory(options.inputs, ec)) {
    r.status = "error";
    r.exit_code = 2;
    r.reason = fmt::format("--inputs {} is not a directory; pass the folder of .safetensors or "
                           ".x.npy/.weight.npy files",
                           options.inputs.string());
    return r;
  }
  TempDir tmp;
  if (tmp.path().empty()) throw evaluator::InfraError("kloop shadow: cannot create a temp dir");
  TorchExportOptions eo;
  eo.allow_unpromoted = options.allow_unpromoted;
  const auto exp = export_torch_package(st, session_id, tmp.path(), eo);
  if (!exp.ok) {
    r.status = "error";
    r.exit_code = exp.exit_code;
    r.reason = exp.error;
    return r;
  }
  r.candidate_id = exp.candidate_id;
  const std::string package = exp.package_dir.filename().string();
  if (!std::filesystem::exists(exp.package_dir / "shadow.py")) {
    r.status = "error";
    r.exit_code = 2;
    r.reason = fmt::format("session {} is a {} session; its package {} has no shadow module (the "
                           "shadow run reads weighted_rmsnorm/1's captured x and weight); check it "
                           "with `kloop export {} --torch DIR` and the package's own tests",
                           session_id, exp.operator_name, package, session_id);
    return r;
  }
  const std::string inputs = std::filesystem::absolute(options.inputs).string();
  const std::string python = options.python.empty() ? find_on_path("python3") : options.python;
  if (python.empty()) {
    r.status = "not_run";
    r.exit_code = 3;
    r.reason = "python3 is not on PATH; the shadow run needs python3 with torch, numpy and "
               "cuda-python on a CUDA machine";
    record(st, r, inputs, -1);
    return r;
  }
  evaluator::SubprocessOptions so;
  so.deadline = options.deadline;
  so.cwd = tmp.path().string();
  so.env = {{"PYTHONPATH", tmp.path().string()},
            {"PYTHONDONTWRITEBYTECODE", "1"},
            {"PATH", std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"}};
  for (const char* keep : {"HOME", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "TMPDIR",
                           "TORCHINDUCTOR_CACHE_DIR", "VIRTUAL_ENV", "PYTHONHOME"})
    if (const char* v = std::getenv(keep)) so.env[keep] = v;
  const auto call = evaluator::run_subprocess(
      {python, "-m", package + ".shadow", "--inputs", inputs, "--json"}, so);
  std::string last_line;
  {
    std::stringstream ss(call.stdout_text);
    for (std::string line; std::getline(ss, line);)
      if (!line.empty()) last_line = line;
  }
  const json report = json::parse(last_line, nullptr, false);
  if (call.timed_out) {
    r.status = "not_run";
    r.exit_code = 3;
    r.reason = fmt::format("the shadow run exceeded {} s; use fewer or smaller inputs",
                           options.deadline.count());
  } else if (report.is_object() && report.contains("status")) {
    r.report = report;
    r.status = report["status"].get<std::string>();
    r.reason = report.value("reason", "");
    r.exit_code = r.status == "pass" ? 0 : r.status == "fail" ? 1 : 3;
  } else if (call.exit_code == 2) {
    r.status = "error";
    r.exit_code = 2;
    r.reason = "bad input: " + call.stderr_text.substr(0, 2000);
    return r; // nothing ran: not recorded
  } else if (const auto pos = call.stderr_text.find("No module named '");
             pos != std::string::npos) {
    const auto start = pos + 17;
    r.status = "not_run";
    r.exit_code = 3;
    r.reason = fmt::format(
        "{} lacks the Python module {}; the shadow run needs torch, numpy and "
        "cuda-python (cuda.bindings) on a CUDA machine",
        python, call.stderr_text.substr(start, call.stderr_text.find('\'', start) - start));
  } else {
    r.status = "not_run";
    r.exit_code = 3;
    r.reason =
        fmt::format("the shadow module ended with exit {} signal {} without a report: {}",
                    call.exit_code, call.term_signal,
                    call.stderr_text.substr(
                        call.stderr_text.size() > 2000 ? call.stderr_text.size() - 2000 : 0));
  }
  record(st, r, inputs, call.exit_code);
  return r;
}

std::string format_shadow_table(const ShadowResult& r) {
  std::string out;
  if (r.report.is_object() && r.report.contains("files")) {
    out += fmt::format("{:<32} {:<9} {:>16} {:<10} {:>10} {:>10} {:>8} {:>6} {:>12}  {}\n", "file",
                       "dtype", "shape", "route", "max_abs", "max_rel", "rows_bad", "nonfin",
                       "peak_MiB", "result");
    for (const auto& f : r.report["files"]) {
      std::string shape;
      for (const auto& s : f.value("shape", json::array()))
        shape += (shape.empty() ? "" : "x") + std::to_string(s.get<std::int64_t>());
      const double peak = f.value("/device_memory/peak_over_before"_json_pointer, 0.0);
      out += fmt::format(
          "{:<32} {:<9} {:>16} {:<10} {:>10.3g} {:>10.3g} {:>8} {:>6} {:>12.2f}  {}\n",
          f.value("file", "").substr(0, 32), f.value("dtype", ""), shape, f.value("route", ""),
          f.value("max_abs_error", 0.0), f.value("max_rel_error", 0.0), f.value("row_failures", 0),
          f.value("non_finite_mismatches", 0), peak / (1 << 20),
          f.value("pass", false) ? "PASS" : "FAIL");
    }
    out += fmt::format(
        "{} specialisation(s): {}; device {}\n", r.report.value("specialisations", 0),
        r.report.value("specialisation_keys", json::array()).dump(), r.report.value("device", ""));
  }
  out += fmt::format("shadow: {}{}{}\n", r.status, r.reason.empty() ? "" : ": ", r.reason);
  if (!r.report_sha256.empty()) out += fmt::format("report blob {}\n", r.report_sha256);
  return out;
}

} // namespace kloop::agent
