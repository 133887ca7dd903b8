// Subcommand registration for the kloop CLI. Each register_* adds one or more subcommands to `app`;
// their callbacks store the process exit code in `exit_code` (see ExitCode).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "store/error.h"

namespace kloop::app {

// Documented exit codes (README.md, DESIGN.md "CLI").
enum ExitCode : int {
  kExitOk = 0,             // promoted / passed / command succeeded
  kExitRejected = 1,       // candidate or session rejected
  kExitUsage = 2,          // usage or contract error (bad flag, bad manifest, bad input file)
  kExitCouldNotFinish = 3, // no device (pending_device_validation), infrastructure fault
};

// Exit code for an exception that reached main(): a session ID that names no session is a usage
// error (2); anything else could not finish (3).
inline int exit_code_of(const std::exception& e) {
  return dynamic_cast<const store::NoSuchSession*>(&e) ? kExitUsage : kExitCouldNotFinish;
}

// Validator for a session ID argument: a positive decimal integer that fits int64
// (1..9223372036854775807). Without it CLI11 would clamp an overflowing value to INT64_MAX and the
// error would name a number the user never typed.
inline CLI::Validator session_id_check() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || ptr != end || v <= 0)
          return "a session ID is a positive integer up to 9223372036854775807 (got '" + text +
                 "'); list the stored sessions with `kloop sessions`";
        return {};
      },
      "SESSION_ID");
}

// Reports an exception that reached main() and returns its exit code (exit_code_of): the message
// goes to stderr as "kloop: <what>"; when the command line has --json, stdout also gets one JSON
// document {"error": <what>, "exit_code": <code>}, so a script that parses stdout sees the error
// instead of empty output.
inline int report_error(const std::exception& e, int argc, const char* const* argv) {
  const int code = exit_code_of(e);
  std::fprintf(stderr, "kloop: %s\n", e.what());
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") break;
    if (std::string_view(argv[i]) == "--json") {
      std::printf("%s\n", nlohmann::json{{"error", e.what()}, {"exit_code", code}}.dump().c_str());
      break;
    }
  }
  return code;
}

void register_optimize(CLI::App& app, int& exit_code);         // cmd_optimize.cpp
void register_evaluate(CLI::App& app, int& exit_code);         // cmd_evaluate.cpp
void register_checker_coverage(CLI::App& app, int& exit_code); // cmd_checker_coverage.cpp
void register_store_commands(CLI::App& app, int& exit_code);   // cmd_store.cpp: sessions, show,
                                                               // compare, replay, report, store,
                                                               // keys, receipt

void register_export_commands(CLI::App& app, int& exit_code); // cmd_export.cpp: export, shadow

// Registers the evaluator that `kloop replay` re-runs stored candidates through (replay_hook.cpp).
void register_replay_evaluator();

} // namespace kloop::app
