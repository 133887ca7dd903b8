#include "evaluator/build.h"

#include <signal.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "evaluator/evidence.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

// Removes the build directory when the build is done (unless asked to keep it).
class TempDir {
public:
  TempDir(const std::string& parent, bool keep) : keep_(keep) {
    std::string tmpl = (fs::path(parent) / "kloop-build-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw InfraError(fmt::format("build: cannot create a build directory under {}: {}; set a "
                                   "writable work directory",
                                   parent, std::strerror(errno)));
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!keep_) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
  bool keep_;
};

std::string read_file(const fs::path& p, std::size_t cap) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  std::string s(ec ? 0 : std::min<std::uintmax_t>(size, cap), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string cuda_root(const BuildOptions& o) {
  if (!o.cuda_root.empty()) return o.cuda_root;
  if (const char* env = std::getenv("KLOOP_CUDA_ROOT"); env && *env) return env;
  return "/usr/local/cuda";
}

std::string canonical(const std::string& p) {
  std::error_code ec;
  auto c = fs::canonical(p, ec);
  return ec ? p : c.string();
}

// A hint for the <math.h> macros a kernel written for nvcc uses and NVRTC lacks (INFINITY, NAN):
// libcu++'s <cuda/std/cmath> defines both under NVRTC (cccl/cuda/std/detail/libcxx/include/cmath).
std::string math_macro_hint(const std::string& diagnostics) {
  for (const char* macro : {"INFINITY", "NAN"})
    if (diagnostics.find(fmt::format("identifier \"{}\" is undefined", macro)) != std::string::npos)
      return fmt::format(" ({} is a <math.h> macro, and NVRTC has no <math.h>: #include "
                         "<cuda/std/cmath>, which defines INFINITY and NAN under NVRTC, or use "
                         "cuda::std::numeric_limits<float>)",
                         macro);
  return {};
}

// The first neutralised directive whose #error the compiler reported (it was reached), if any.
const IncludeProblem* reached_include(const std::string& log,
                                      const std::vector<IncludeProblem>& neutralised) {
  const IncludeProblem* first = nullptr;
  for (const auto& p : neutralised) {
    const std::string at = fmt::format("kernel.cu({}): ", p.line);
    for (std::size_t pos = 0; (pos = log.find(at, pos)) != std::string::npos; pos += at.size()) {
      const std::size_t eol = log.find('\n', pos);
      if (log.substr(pos, eol - pos).find(kNeutralisedIncludeMarker) != std::string::npos) {
        if (!first || p.line < first->line) first = &p;
        break;
      }
    }
  }
  return first;
}

GateResult gate(GateStatus status, std::string reason, nlohmann::json evidence) {
  return {std::string(kGateBuild), status, std::move(reason), std::move(evidence)};
}

} // namespace

std::string cuda_include_dir(const BuildOptions& options) {
  return canonical(cuda_root(options) + "/include");
}

BuildResult build_candidate(std::string_view source, const op::Manifest& manifest,
                            const BuildOptions& options) {
  return build_candidate(source, manifest.target, options);
}

BuildResult build_candidate(std::string_view source, const std::string& target,
                            const BuildOptions& options) {
  BuildResult r;
  const std::string root = cuda_root(options);
  const std::string inc = cuda_include_dir(options);
  r.redactions = {{inc + "/", "<cuda-include>/"},
                  {root + "/include/", "<cuda-include>/"},
                  {canonical(root) + "/", "<cuda>/"},
                  {root + "/", "<cuda>/"}};
  nlohmann::json evidence = {{"target", target}};

  // 1. Pre-scan: nothing outside the toolkit headers ever reaches the compiler; directives that
  // name no compilable toolkit header become #error lines, which fail only where the
  // preprocessor reaches them.
  const IncludeScan scan = scan_includes(source, inc);
  if (!scan.rejected.empty()) {
    evaluator::evidence::BuildEvidence found;
    for (const auto& p : scan.rejected)
      found.include_problems.push_back(p.message);
    found.write_to(evidence);
    r.gate = gate(GateStatus::kFail, "kernel.cu " + scan.rejected.front().message, evidence);
    return r;
  }
  if (!scan.neutralised.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : scan.neutralised)
      list.push_back({{"line", p.line}, {"header", p.header}, {"message", p.message}});
    evidence["neutralised_includes"] = list;
  }

  // 2. Sandbox and build directory.
  const SandboxKind kind = resolve_sandbox(options.sandbox);
  r.sandbox = std::string(sandbox_kind_name(kind));
  evidence["sandbox"] = r.sandbox;
  const std::string worker = canonical(
      options.worker_exe.empty() ? worker_path("kloop-build-worker") : options.worker_exe);
  TempDir dir(options.work_root.empty() ? fs::temp_directory_path().string() : options.work_root,
              options.keep_build_dir);
  const std::string build_dir = canonical(dir.path());
  r.redactions.insert(r.redactions.begin(), {build_dir + "/", ""});
  {
    std::ofstream f(build_dir + "/kernel.cu", std::ios::binary);
    const std::string& text = scan.source_to_compile;
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!f) throw InfraError("build: cannot write kernel.cu into " + build_dir);
  }
  const auto deadline_s = std::chrono::duration<double>(options.deadline).count();
  const long cpu_s =
      options.cpu_seconds > 0 ? options.cpu_seconds : 2 * static_cast<long>(deadline_s) + 5;
  std::vector<std::string> inner = {worker,
                                    "--build-dir",
                                    build_dir,
                                    "--include",
                                    inc,
                                    "--include",
                                    inc + "/cccl",
                                    "--arch",
                                    target,
                                    "--as-mib",
                                    std::to_string(options.address_space_mib),
                                    "--cpu-s",
                                    std::to_string(cpu_s),
                                    "--fsize-mib",
                                    "64",
                                    "--nofile",
                                    "64",
                                    "--nproc",
                                    "256"};
  SandboxSpec spec{worker, build_dir, {inc, root + "/lib64"}};
  SubprocessOptions sp;
  sp.cwd = build_dir;
  sp.deadline = options.deadline;
  sp.output_cap = 64 * 1024;
  ToolCall call = run_subprocess(sandbox_argv(kind, spec, inner), sp);
  r.tool_calls.push_back(call);
  evidence["wall_ms"] = call.wall_ms;
  evidence["worker_exit_code"] = call.exit_code;
  evidence["worker_signal"] = call.term_signal;

  // 3. Outcome. The deadline wins over anything the worker may have half-written.
  if (call.timed_out) {
    r.gate = gate(GateStatus::kTimeout,
                  fmt::format("build: deadline {:g} s exceeded; the compiler was stopped "
                              "(exponential template instantiation or a huge unrolled loop?)",
                              deadline_s),
                  evidence);
    return r;
  }
  nlohmann::json res;
  try {
    res = nlohmann::json::parse(read_file(fs::path(build_dir) / "result.json", 16 << 20));
  } catch (const nlohmann::json::exception&) {
    res = nullptr;
  }
  if (!res.is_object()) {
    // No result file: the worker died. SIGKILL/SIGSEGV/SIGABRT under RLIMIT_AS is the memory
    // limit; SIGXCPU is the CPU limit.
    const int sig =
        call.term_signal ? call.term_signal : (call.exit_code > 128 ? call.exit_code - 128 : 0);
    if (sig == SIGXCPU) {
      r.gate =
          gate(GateStatus::kTimeout,
               fmt::format("build: CPU time limit {} s exceeded; the compiler was stopped", cpu_s),
               evidence);
    } else if (sig == SIGSEGV || sig == SIGABRT || sig == SIGKILL || sig == SIGBUS) {
      r.gate = gate(GateStatus::kFail,
                    fmt::format("build: memory limit ({} MiB address space) exceeded; the "
                                "compiler died with signal {}",
                                options.address_space_mib, sig),
                    evidence);
    } else {
      throw InfraError(fmt::format("build worker ended (exit {}, signal {}) without writing "
                                   "result.json; stderr: {}",
                                   call.exit_code, call.term_signal,
                                   redact_paths(call.stderr_text.substr(0, 500), r.redactions)));
    }
    return r;
  }
  r.log = res.value("log", "");
  r.log_ptx = res.value("log_ptx", "");
  r.nvrtc_version = res.value("nvrtc_version", "");
  r.options_cubin = res.value("options_cubin", std::vector<std::string>{});
  r.options_ptx = res.value("options_ptx", std::vector<std::string>{});
  evidence["nvrtc_version"] = r.nvrtc_version;
  evidence["options_cubin"] = r.options_cubin;
  evidence["flags"] = r.options_cubin; // the receipt's target.compiler_flags
  evidence["options_ptx"] = r.options_ptx;
  evidence["seccomp"] = res.value("seccomp", false);
  const std::string status = res.value("status", "");
  if (status == "built") {
    r.cubin = read_file(fs::path(build_dir) / "kernel.cubin", 64 << 20);
    r.ptx = read_file(fs::path(build_dir) / "kernel.ptx", 64 << 20);
    if (r.cubin.empty() || r.ptx.empty())
      throw InfraError("build worker reported success but kernel.cubin or kernel.ptx is missing");
    r.gate = gate(GateStatus::kPass, "", evidence);
  } else if (status == "memory_limit" ||
             (status == "compile_error" &&
              (r.log + r.log_ptx).find("error: out of memory") != std::string::npos)) {
    r.gate = gate(GateStatus::kFail,
                  fmt::format("build: memory limit ({} MiB address space) exceeded while "
                              "compiling (exponential templates or a huge unrolled loop?)",
                              options.address_space_mib),
                  evidence);
  } else if (status == "compile_error") {
    const std::string reduced = redact_paths(
        reduce_diagnostics(r.log.find("error") != std::string::npos ? r.log : r.log_ptx),
        r.redactions);
    if (const IncludeProblem* reached = reached_include(r.log + r.log_ptx, scan.neutralised)) {
      evaluator::evidence::BuildEvidence{{reached->message}, reduced}.write_to(evidence);
      r.gate = gate(GateStatus::kFail, "kernel.cu " + reached->message, evidence);
    } else {
      evaluator::evidence::BuildEvidence{{}, reduced}.write_to(evidence);
      const std::string first = reduced.substr(0, reduced.find('\n'));
      r.gate = gate(GateStatus::kFail,
                    "build: NVRTC compile error: " + first + math_macro_hint(reduced), evidence);
    }
  } else {
    throw InfraError("build worker failed: " +
                     redact_paths(res.value("message", std::string("no message")), r.redactions));
  }
  return r;
}

} // namespace kloop::evaluator
