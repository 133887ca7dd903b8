// Child processes the way ../shared/docs/STYLE.md asks: posix_spawn with an argv vector (no shell),
// the child in its own process group, an allow-listed environment, stdin from /dev/null, stdout and
// stderr captured up to a cap, a wall-clock deadline that sends SIGTERM and then SIGKILL to the
// whole group, and wait4 for resource usage. Every call is described by a ToolCall that the caller
// hands to the store. A child that cannot be started is an InfraError; everything the child does
// (non-zero exit, signal, deadline) is a value in ToolCall.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::evaluator {

// One recorded tool invocation (store: tool_calls table).
struct ToolCall {
  std::vector<std::string> argv;
  std::string cwd;
  int exit_code = -1;     // WEXITSTATUS, or -1 when killed by a signal
  int term_signal = 0;    // signal that ended the child, 0 if it exited
  bool timed_out = false; // the deadline fired (SIGTERM, then SIGKILL after the grace period)
  // With a progress watch whose deadline_cap exceeds the deadline: the deadline that fired was
  // deadline_cap (the child was still making progress), not a stall; progress_changes counts the
  // changes of the progress file seen.
  bool deadline_capped = false;
  int progress_changes = 0;
  double wall_ms = 0;
  // steady_clock time of the spawn in ms (evaluator/phases.h); not in to_json
  double started_ms = 0;
  double user_cpu_ms = 0; // rusage of the child and its reaped descendants (wait4)
  double sys_cpu_ms = 0;
  long max_rss_kib = 0;
  std::string stdout_text; // at most SubprocessOptions::output_cap bytes
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::string stdout_sha256; // of the captured (possibly truncated) bytes
  std::string stderr_sha256;
  // What the caller learnt about the run beyond rusage, for the store (e.g. a GPU worker batch:
  // {"tool": "kloop-gpu-worker", "mode", "status", "device_memory": {...}}); an object.
  nlohmann::json detail = nlohmann::json::object();

  bool exited_ok() const { return exit_code == 0 && term_signal == 0 && !timed_out; }
  nlohmann::json to_json() const; // every field except the stdout/stderr text itself
};

struct SubprocessOptions {
  std::string cwd;                        // empty: inherit
  std::map<std::string, std::string> env; // the complete environment (empty by default)
  std::chrono::milliseconds deadline{20000};
  std::chrono::milliseconds kill_grace{500}; // SIGTERM -> SIGKILL delay
  // Progress watch (optional): with a progress_file, `deadline` is the time the child may go
  // without progress. Each change of the file (its size or modification time, checked about every
  // 200-250 ms) restarts that allowance, up to deadline_cap from the spawn (which must be at
  // least `deadline`). A hung child is still stopped `deadline` after its last progress; a child
  // that is slow only because the device is shared with other processes keeps going.
  std::string progress_file;
  std::chrono::milliseconds deadline_cap{0};
  std::size_t output_cap = 1 << 20; // bytes kept per stream; the rest is drained
};

// Runs argv[0] (an absolute path; no PATH search) to completion or deadline. Throws InfraError
// when the child cannot be spawned (missing executable, pipe/spawn failure).
ToolCall run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options);

// Peak resident set size of the calling process alone (getrusage(RUSAGE_SELF).ru_maxrss, KiB on
// Linux; children excluded), e.g. kloop's own host-memory peak (issue 8: under 1 GiB).
long self_max_rss_kib();

// Directory of the running executable (/proc/self/exe); throws InfraError if unreadable.
std::string self_exe_dir();

// Path of a kloop worker executable installed next to the running binary (same bin dir), e.g.
// worker_path("kloop-build-worker"). The environment variable KLOOP_WORKER_DIR overrides the
// directory (tests run from their own folder). Throws InfraError when the file is not executable,
// naming the path and the fix (build the target).
std::string worker_path(const std::string& name);

// Path of `relative` (e.g. "kernels/rmsnorm/baseline") in kloop's data folder, found relative to
// the running executable: <exe dir>/../share/kloop, the layout `cmake --install` writes and the
// build tree stages (build/share/kloop), so an installed kloop never reads its source tree. The
// environment variable KLOOP_DATA_DIR overrides the folder. Throws InfraError naming the path and
// the fix when it does not exist.
std::string data_path(const std::string& relative);

} // namespace kloop::evaluator
