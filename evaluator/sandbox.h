// The build sandbox: wraps a worker command line so that it runs in its own user, mount, network,
// PID and IPC namespaces with an empty environment. With bubblewrap the worker sees only a
// read-only view of the system libraries ld.so needs, the CUDA include and library directories,
// the worker executable, and one writable build directory (/tmp is an empty tmpfs; /work, /etc
// beyond ld.so.cache, the store and holdout folders do not exist inside). Without bubblewrap,
// `unshare` gives the namespaces but not the file-system view; the worker's own seccomp filter and
// the #include pre-scan (evaluator/build.h) then carry the file-system defence. With neither,
// untrusted code is not built unless the user asked for --no-sandbox, which is recorded.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::evaluator {

enum class SandboxKind { kBubblewrap, kUnshare, kNone };
std::string_view sandbox_kind_name(SandboxKind kind); // "bubblewrap", "unshare", "none"

// Which isolation the caller wants: kAuto picks the strongest that works on this machine.
enum class SandboxRequest { kAuto, kBubblewrap, kUnshare, kNoSandbox };

struct SandboxSpec {
  std::string worker_exe;                 // absolute path; bound read-only at the same path
  std::string build_dir;                  // the one writable directory (also the cwd)
  std::vector<std::string> readonly_dirs; // e.g. the CUDA include and lib directories
};

// Probes (once per process, cached) whether `bwrap` / `unshare` can create the namespaces here.
bool bubblewrap_available();
bool unshare_available();

// Resolves a request to the kind that will be used. Returns kNone only for kNoSandbox; throws
// InfraError when the requested (or, for kAuto, any) isolation is unavailable, naming the
// missing tool and that --no-sandbox is the explicit opt-out.
SandboxKind resolve_sandbox(SandboxRequest request);

// The full argv that runs `inner_argv` under `kind` per `spec` (inner_argv unchanged for kNone).
std::vector<std::string> sandbox_argv(SandboxKind kind, const SandboxSpec& spec,
                                      const std::vector<std::string>& inner_argv);

} // namespace kloop::evaluator
