// kloop-build-worker: compiles BUILD_DIR/kernel.cu with NVRTC to an sm_90 (or sm_90a) cubin and to
// PTX, inside the sandbox that evaluator/sandbox.cpp builds around it. It trusts nothing in the
// source: before reading it, it lowers its own rlimits (address space, CPU, file size, open files,
// processes) and installs a seccomp filter that refuses network, exec, ptrace and namespace
// syscalls. Results go to BUILD_DIR/result.json (never stdout); artifacts to kernel.cubin and
// kernel.ptx.
//
// Usage: kloop-build-worker --build-dir DIR --include DIR [--include DIR ...] [--arch sm_90|sm_90a]
//          [--as-mib N]
//          [--cpu-s N] [--fsize-mib N] [--nofile N] [--nproc N] [--no-seccomp]
// Each --include becomes one -I, in order (build.cpp passes the toolkit's include/ and then
// include/cccl/, nvcc's search order).
// Exit codes: 0 built; 1 compile error (log in result.json); 2 usage or I/O error; 3 memory limit;
//             4 NVRTC API failure.
#include <nvrtc.h>
#include <seccomp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

enum Exit { kBuilt = 0, kCompileError = 1, kUsage = 2, kMemoryLimit = 3, kNvrtcFailure = 4 };

struct Args {
  std::string build_dir, arch = "sm_90";
  std::vector<std::string> include_dirs;
  long as_mib = 4096, cpu_s = 30, fsize_mib = 64, nofile = 64, nproc = 256;
  bool seccomp = true;
};

// Owns an nvrtcProgram.
class Program {
public:
  Program(const std::string& source, const char* name) {
    if (nvrtcCreateProgram(&prog_, source.c_str(), name, 0, nullptr, nullptr) != NVRTC_SUCCESS)
      prog_ = nullptr;
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram get() const { return prog_; }

private:
  nvrtcProgram prog_ = nullptr;
};

struct CompileOut {
  nvrtcResult result = NVRTC_SUCCESS;
  std::string log, binary, api_error;
  std::vector<std::string> options;
  double ms = 0;
};

// One NVRTC compile. The log is read before the result is checked (STYLE.md).
CompileOut compile(const std::string& source, const std::vector<std::string>& options,
                   bool want_cubin) {
  CompileOut out;
  out.options = options;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Program prog(source, "kernel.cu");
    if (!prog.get()) {
      out.result = NVRTC_ERROR_PROGRAM_CREATION_FAILURE;
      out.api_error = "nvrtcCreateProgram failed";
      return out;
    }
    std::vector<const char*> opts;
    for (const auto& o : options)
      opts.push_back(o.c_str());
    out.result = nvrtcCompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
    size_t log_size = 0;
    if (nvrtcGetProgramLogSize(prog.get(), &log_size) == NVRTC_SUCCESS && log_size > 1) {
      out.log.resize(log_size);
      nvrtcGetProgramLog(prog.get(), out.log.data());
      out.log.resize(log_size - 1);
    }
    if (out.result == NVRTC_SUCCESS) {
      size_t size = 0;
      nvrtcResult r =
          want_cubin ? nvrtcGetCUBINSize(prog.get(), &size) : nvrtcGetPTXSize(prog.get(), &size);
      if (r == NVRTC_SUCCESS) {
        out.binary.resize(size);
        r = want_cubin ? nvrtcGetCUBIN(prog.get(), out.binary.data())
                       : nvrtcGetPTX(prog.get(), out.binary.data());
        if (!want_cubin && !out.binary.empty() && out.binary.back() == '\0') out.binary.pop_back();
      }
      if (r != NVRTC_SUCCESS) {
        out.result = r;
        out.api_error = std::string(want_cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX") + ": " +
                        nvrtcGetErrorString(r);
      }
    }
  } catch (const std::bad_alloc&) {
    out.result = NVRTC_ERROR_OUT_OF_MEMORY;
  }
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&](std::string& v) {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    std::string v;
    if (k == "--no-seccomp") {
      a.seccomp = false;
      continue;
    }
    if (!next(v)) return false;
    try {
      if (k == "--build-dir")
        a.build_dir = v;
      else if (k == "--include")
        a.include_dirs.push_back(v);
      else if (k == "--arch")
        a.arch = v;
      else if (k == "--as-mib")
        a.as_mib = std::stol(v);
      else if (k == "--cpu-s")
        a.cpu_s = std::stol(v);
      else if (k == "--fsize-mib")
        a.fsize_mib = std::stol(v);
      else if (k == "--nofile")
        a.nofile = std::stol(v);
      else if (k == "--nproc")
        a.nproc = std::stol(v);
      else
        return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  return !a.build_dir.empty() && !a.include_dirs.empty() &&
         (a.arch == "sm_90" || a.arch == "sm_90a");
}

void set_limit(int resource, rlim_t value) {
  rlimit rl{value, value};
  setrlimit(resource, &rl);
}

// Refuses (EPERM) syscalls a compiler never needs: network, exec, tracing, namespaces, mounts.
bool install_seccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return false;
  const char* denied[] = {"socket",          "socketpair", "connect",          "bind",
                          "listen",          "accept",     "accept4",          "execve",
                          "execveat",        "ptrace",     "process_vm_readv", "process_vm_writev",
                          "mount",           "umount2",    "unshare",          "setns",
                          "keyctl",          "add_key",    "request_key",      "bpf",
                          "perf_event_open", "pivot_root", "chroot",           "kexec_load"};
  bool ok = true;
  for (const char* name : denied) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) == 0;
  }
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

bool write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

int finish(const Args& a, nlohmann::json result, int code) {
  result["exit_code"] = code;
  const std::string tmp = a.build_dir + "/result.json.tmp";
  if (!write_file(tmp, result.dump()) ||
      std::rename(tmp.c_str(), (a.build_dir + "/result.json").c_str()) != 0)
    return kUsage;
  return code;
}

} // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) {
    std::fprintf(
        stderr,
        "usage: kloop-build-worker --build-dir DIR --include DIR "
        "[--include DIR ...] [--arch sm_90|sm_90a] [--as-mib N] [--cpu-s N] [--fsize-mib N] "
        "[--nofile N] [--nproc N] [--no-seccomp]\n");
    return kUsage;
  }
  // Limits first: nothing of the candidate is read before they hold.
  set_limit(RLIMIT_AS, static_cast<rlim_t>(a.as_mib) << 20);
  set_limit(RLIMIT_CPU, static_cast<rlim_t>(a.cpu_s));
  set_limit(RLIMIT_FSIZE, static_cast<rlim_t>(a.fsize_mib) << 20);
  set_limit(RLIMIT_NOFILE, static_cast<rlim_t>(a.nofile));
  set_limit(RLIMIT_NPROC, static_cast<rlim_t>(a.nproc));
  set_limit(RLIMIT_CORE, 0);
  nlohmann::json result = {{"status", "internal_error"}};
  // NVRTC's line info (.file, -lineinfo) names the program "kernel.cu" relative to the working
  // directory, so a build inside a random temporary directory gave a different PTX and cubin
  // hash on every build of the same source. Build from "/" (paths below are absolute), so the
  // same source, options and toolkit give the same bytes.
  {
    std::error_code ec_build, ec_include;
    const auto build_dir = std::filesystem::absolute(a.build_dir, ec_build);
    for (auto& dir : a.include_dirs)
      if (!ec_include) dir = std::filesystem::absolute(dir, ec_include).string();
    if (ec_build || ec_include || ::chdir("/") != 0) {
      result["message"] = "cannot make --build-dir and --include absolute or change to /";
      return finish(a, result, kUsage); // a.build_dir unchanged: the result lands where asked
    }
    a.build_dir = build_dir.string();
  }
  if (a.seccomp && !install_seccomp()) {
    result["message"] = "seccomp filter could not be installed";
    return finish(a, result, kUsage);
  }
  result["seccomp"] = a.seccomp;
  try {
    std::ifstream in(a.build_dir + "/kernel.cu", std::ios::binary);
    if (!in) {
      result["message"] = "kernel.cu not readable in the build directory";
      return finish(a, result, kUsage);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string source = ss.str();

    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    result["nvrtc_version"] = std::to_string(major) + "." + std::to_string(minor);
    const std::string virt = "compute_" + a.arch.substr(3);
    // -DNDEBUG: candidates are built as release code, as production kernels are, so assert()
    // compiles to nothing (NVRTC's prelude defines assert before kernel.cu is read, so a
    // `#define NDEBUG` in the source would come too late). The directory of each source stays
    // on the include path (no --no-source-include): toolkit headers include siblings by
    // relative name (cooperative_groups/details/*.h), and kernel.cu's own directives reach the
    // compiler only when they name a toolkit header (evaluator/build.h, scan_includes).
    std::vector<std::string> cubin_opts = {"--gpu-architecture=" + a.arch, "-lineinfo",
                                           "--ptxas-options=-v", "--std=c++17", "-DNDEBUG"};
    std::vector<std::string> ptx_opts = {"--gpu-architecture=" + virt, "-lineinfo", "--std=c++17",
                                         "-DNDEBUG"};
    for (const auto& dir : a.include_dirs) {
      cubin_opts.push_back("-I" + dir);
      ptx_opts.push_back("-I" + dir);
    }
    // The two compiles are independent: run them side by side.
    CompileOut ptx;
    std::thread ptx_thread([&] { ptx = compile(source, ptx_opts, false); });
    CompileOut cubin = compile(source, cubin_opts, true);
    ptx_thread.join();

    result["options_cubin"] = cubin.options;
    result["options_ptx"] = ptx.options;
    result["log"] = cubin.log;
    result["log_ptx"] = ptx.log;
    result["compile_ms"] = cubin.ms;
    result["compile_ptx_ms"] = ptx.ms;
    if (cubin.result == NVRTC_ERROR_OUT_OF_MEMORY || ptx.result == NVRTC_ERROR_OUT_OF_MEMORY) {
      result["status"] = "memory_limit";
      result["message"] = "NVRTC ran out of memory under the address-space limit of " +
                          std::to_string(a.as_mib) + " MiB";
      return finish(a, result, kMemoryLimit);
    }
    if (cubin.result == NVRTC_ERROR_COMPILATION || ptx.result == NVRTC_ERROR_COMPILATION) {
      result["status"] = "compile_error";
      return finish(a, result, kCompileError);
    }
    if (cubin.result != NVRTC_SUCCESS || ptx.result != NVRTC_SUCCESS) {
      const auto& bad = cubin.result != NVRTC_SUCCESS ? cubin : ptx;
      result["message"] = bad.api_error.empty() ? nvrtcGetErrorString(bad.result) : bad.api_error;
      return finish(a, result, kNvrtcFailure);
    }
    if (!write_file(a.build_dir + "/kernel.cubin", cubin.binary) ||
        !write_file(a.build_dir + "/kernel.ptx", ptx.binary)) {
      result["message"] = "cannot write artifacts to the build directory (file size limit?)";
      return finish(a, result, kUsage);
    }
    result["status"] = "built";
    return finish(a, result, kBuilt);
  } catch (const std::bad_alloc&) {
    result["status"] = "memory_limit";
    result["message"] =
        "out of memory under the address-space limit of " + std::to_string(a.as_mib) + " MiB";
    return finish(a, result, kMemoryLimit);
  } catch (const std::system_error& e) {
    result["message"] = std::string("worker thread failure: ") + e.what();
    return finish(a, result, kNvrtcFailure);
  }
}
