// The build gate driver: checks every #include of the candidate against the CUDA include tree
// (before any compiler sees it; scan_includes below), creates one private build directory, runs
// kloop-build-worker (NVRTC, evaluator/build_worker/) inside the sandbox (evaluator/sandbox.h)
// under a deadline, reads the worker's result.json and artifacts, and turns the outcome into the
// `build` gate. The verbatim NVRTC log is kept for the store; feedback gets only a reduced,
// path-redacted copy.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/gate.h"
#include "evaluator/sandbox.h"
#include "evaluator/subprocess.h"
#include "kernels/manifest.h"

namespace kloop::evaluator {

struct BuildOptions {
  SandboxRequest sandbox = SandboxRequest::kAuto;
  // Wall clock for the whole worker (compile bombs). cub and cooperative-groups headers cost 2-8 s
  // of compile time each on this project's 2-core machines, several times that under load.
  std::chrono::milliseconds deadline{60000};
  long address_space_mib = 4096; // worker RLIMIT_AS (no CUDA context there)
  long cpu_seconds = 0;          // worker RLIMIT_CPU; 0: 2 x deadline + 5 s
  std::string cuda_root;         // empty: $KLOOP_CUDA_ROOT or /usr/local/cuda
  std::string work_root;         // parent of the build directory; empty: the system temp dir
  std::string worker_exe;        // empty: worker_path("kloop-build-worker")
  bool keep_build_dir = false;
};

// One #include (or __has_include) the pre-scan did not let through as it is.
struct IncludeProblem {
  int line = 0;        // 1-based line in kernel.cu
  std::string header;  // the path as written (shortened), empty for a computed include
  std::string message; // names the directive and why; never contains file contents
};

// The pre-scan of kernel.cu's own #include, #include_next, #import and __has_include directives
// against the CUDA toolkit's include tree (`cuda_include_dir` and its cccl/ subfolder, searched
// in that order as nvcc does). Three outcomes per directive:
// - a toolkit header (a regular file inside the tree, symlinks resolved): compiled as written;
// - an escape (absolute path, `..` component, backslash, a symlink out of the tree): never
//   legitimate, so the build fails before any compiler starts (`rejected`);
// - a header that is not in the toolkit (a C++ standard header, another vendor's header), one
//   NVRTC cannot compile (cub/cub.cuh, cub/device/, thrust/, cuda.h), or a computed include:
//   neutralised. `source_to_compile` has that directive replaced by an #error line (same line
//   numbers), so the compiler itself decides whether it is reached: a header in an inactive
//   #if/#else branch is no error, one in an active branch fails the build with `message` (which
//   names the replacement where there is one), and no file outside the toolkit is ever opened.
//   A neutralised __has_include evaluates to 0, as it would inside the sandbox.
// Comments, line continuations and the `%:` digraph are handled.
struct IncludeScan {
  std::vector<IncludeProblem> rejected;
  std::vector<IncludeProblem> neutralised;
  std::string source_to_compile; // `source` with neutralised directives replaced
};
IncludeScan scan_includes(std::string_view source, const std::string& cuda_include_dir);

// The #error text that stands for a neutralised directive in `source_to_compile`; the build gate
// finds it in the compiler's log to name the directive the preprocessor reached.
inline constexpr std::string_view kNeutralisedIncludeMarker = "kloop_include_not_available";

// Replaces each `from` prefix with its `to` and then every remaining absolute path with "<path>".
std::string redact_paths(std::string_view text,
                         const std::vector<std::pair<std::string, std::string>>& prefixes);

// The first `max_errors` errors of an NVRTC log with up to 3 context lines each, as
// "kernel.cu(LINE): error: ..." (lines are relative to kernel.cu), followed by "(N more errors)".
// Returns the input's first lines when it has no recognisable error line. Does not redact.
std::string reduce_diagnostics(std::string_view log, int max_errors = 5);

struct BuildResult {
  GateResult gate;           // the `build` gate
  std::string cubin;         // sm_90/sm_90a cubin bytes; empty unless built
  std::string ptx;           // PTX text; empty unless built
  std::string log;           // verbatim NVRTC log of the cubin compile (has the ptxas report)
  std::string log_ptx;       // verbatim NVRTC log of the PTX compile
  std::string nvrtc_version; // "13.0"
  std::vector<std::string> options_cubin, options_ptx; // exact NVRTC options
  std::string sandbox;                                 // sandbox_kind_name of what was used
  std::vector<ToolCall> tool_calls;
  std::vector<std::pair<std::string, std::string>> redactions; // host path -> placeholder
};

// CUDA include directory for `options` (canonical path).
std::string cuda_include_dir(const BuildOptions& options);

// Builds `source` for `target` ("sm_90" or "sm_90a", the manifest's). Expected outcomes (rejected
// include, compile error, deadline, memory limit) are gate values; a missing worker or an
// unusable sandbox throws InfraError (the caller records infra_error / not_run).
BuildResult build_candidate(std::string_view source, const std::string& target,
                            const BuildOptions& options);
BuildResult build_candidate(std::string_view source, const op::Manifest& manifest,
                            const BuildOptions& options);

} // namespace kloop::evaluator
