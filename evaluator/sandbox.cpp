#include "evaluator/sandbox.h"

#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "evaluator/gate.h"
#include "evaluator/subprocess.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBwrap = "/usr/bin/bwrap";
constexpr const char* kUnshare = "/usr/bin/unshare";

// System library locations ld.so searches; bound read-only when they exist.
constexpr const char* kSystemLibDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                                          "/usr/lib/aarch64-linux-gnu"};

bool probe(const std::vector<std::string>& argv) {
  if (::access(argv[0].c_str(), X_OK) != 0) return false;
  SubprocessOptions opt;
  opt.deadline = std::chrono::milliseconds(5000);
  try {
    return run_subprocess(argv, opt).exited_ok();
  } catch (const InfraError&) {
    return false;
  }
}

std::string canonical_or_same(const std::string& p) {
  std::error_code ec;
  auto c = fs::canonical(p, ec);
  return ec ? p : c.string();
}

} // namespace

std::string_view sandbox_kind_name(SandboxKind kind) {
  switch (kind) {
  case SandboxKind::kBubblewrap:
    return "bubblewrap";
  case SandboxKind::kUnshare:
    return "unshare";
  case SandboxKind::kNone:
    return "none";
  }
  return "none";
}

bool bubblewrap_available() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    ok = probe({kBwrap,          "--unshare-user", "--unshare-net",
                "--unshare-pid", "--unshare-ipc",  "--die-with-parent",
                "--ro-bind",     "/usr",           "/usr",
                "--symlink",     "usr/lib",        "/lib",
                "--symlink",     "usr/lib64",      "/lib64",
                "--symlink",     "usr/bin",        "/bin",
                "--proc",        "/proc",          "--dev",
                "/dev",          "--tmpfs",        "/tmp",
                "--clearenv",    "/usr/bin/true"});
  });
  return ok;
}

bool unshare_available() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    ok = probe({kUnshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--ipc",
                "--mount", "--kill-child", "/usr/bin/true"});
  });
  return ok;
}

SandboxKind resolve_sandbox(SandboxRequest request) {
  switch (request) {
  case SandboxRequest::kNoSandbox:
    return SandboxKind::kNone;
  case SandboxRequest::kBubblewrap:
    if (bubblewrap_available()) return SandboxKind::kBubblewrap;
    throw InfraError("sandbox: bubblewrap (/usr/bin/bwrap) is missing or cannot create "
                     "namespaces here; install bubblewrap or pass --no-sandbox to build "
                     "without isolation (recorded)");
  case SandboxRequest::kUnshare:
    if (unshare_available()) return SandboxKind::kUnshare;
    throw InfraError("sandbox: unshare (/usr/bin/unshare) cannot create user/net/pid "
                     "namespaces here; pass --no-sandbox to build without isolation (recorded)");
  case SandboxRequest::kAuto:
    if (bubblewrap_available()) return SandboxKind::kBubblewrap;
    if (unshare_available()) return SandboxKind::kUnshare;
    throw InfraError("sandbox: neither bubblewrap nor unshare can isolate the build worker on "
                     "this machine, so untrusted code is not built; install bubblewrap or pass "
                     "--no-sandbox to build without isolation (recorded)");
  }
  return SandboxKind::kNone;
}

std::vector<std::string> sandbox_argv(SandboxKind kind, const SandboxSpec& spec,
                                      const std::vector<std::string>& inner_argv) {
  std::vector<std::string> argv;
  if (kind == SandboxKind::kNone) return inner_argv;
  if (kind == SandboxKind::kUnshare) {
    argv = {kUnshare, "--user", "--map-root-user", "--net",       "--pid",
            "--fork", "--ipc",  "--mount",         "--kill-child"};
    argv.insert(argv.end(), inner_argv.begin(), inner_argv.end());
    return argv;
  }
  argv = {kBwrap,          "--unshare-user",    "--unshare-net", "--unshare-pid", "--unshare-ipc",
          "--unshare-uts", "--die-with-parent", "--new-session", "--clearenv"};
  auto ro = [&](const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return;
    const std::string real = canonical_or_same(path);
    argv.insert(argv.end(), {"--ro-bind", real, real});
  };
  for (const char* dir : kSystemLibDirs)
    ro(dir);
  argv.insert(argv.end(), {"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"});
  // ld.so's cache is the only file of /etc the worker needs (it names the CUDA library folder).
  ro("/etc/ld.so.cache");
  argv.insert(argv.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  for (const auto& dir : spec.readonly_dirs) {
    ro(dir);
    // Keep a symlinked spelling (e.g. /usr/local/cuda/lib64 -> cuda-13.0/lib) valid inside.
    const std::string real = canonical_or_same(dir);
    if (real != dir) argv.insert(argv.end(), {"--symlink", real, dir});
  }
  // The worker's bundled libraries ($ORIGIN/../lib) travel with it on the GPU machine.
  const std::string exe_real = canonical_or_same(spec.worker_exe);
  ro(exe_real);
  ro((fs::path(exe_real).parent_path().parent_path() / "lib").string());
  argv.insert(argv.end(), {"--bind", spec.build_dir, spec.build_dir, "--chdir", spec.build_dir});
  argv.insert(argv.end(), inner_argv.begin(), inner_argv.end());
  return argv;
}

} // namespace kloop::evaluator
