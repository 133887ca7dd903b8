// Commands in tests: one way to run a command line and capture what it prints, for the end-to-end
// tests of the kloop executables (no popen loop per file).
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <string>

namespace kloop::test_support {

// What a command printed and how it ended.
struct CommandResult {
  int rc = -1;     // exit status; -1 when it could not start or did not exit normally
  std::string out; // everything it wrote to stdout
};

// Runs `command_line` through /bin/sh (popen) and reads its stdout to the end. Stderr is the
// caller's to route: append " 2>&1" to capture it too, " 2>/dev/null" to drop it.
inline CommandResult run_command(const std::string& command_line) {
  CommandResult r;
  FILE* p = ::popen(command_line.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = ::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The path of executable `name` of this build (KLOOP_BINARY_DIR/bin/NAME; the test target defines
// KLOOP_BINARY_DIR).
inline std::string binary_path(const std::string& name) {
  return std::string(KLOOP_BINARY_DIR) + "/bin/" + name;
}

} // namespace kloop::test_support
