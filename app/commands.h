// Subcommand registration for the kloop CLI. Each register_* adds one or more subcommands to `app`;
// their callbacks store the process exit code in `exit_code` (see ExitCode).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "kernels/operator.h"
#include "store/chain.h"
#include "store/error.h"

namespace kloop::app {

// Documented exit codes (README.md, DESIGN.md "CLI").
enum ExitCode : int {
  kExitOk = 0,             // promoted / passed / command succeeded
  kExitRejected = 1,       // a hard gate failed (a malformed manifest is a failed contract gate)
  kExitUsage = 2,          // usage error (bad flag or value, unreadable input file, ...)
  kExitCouldNotFinish = 3, // no device (pending_device_validation), damaged store, infrastructure
};

// A file or folder named on the command line that cannot be read or written, or whose content is
// not what the option takes: the caller's mistake (exit 2). The message names the option.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Exit code for an exception that reached main() (README "Exit codes"): a session ID that names no
// session, a --store that is no store, a request the session cannot meet (store::Refused: signing
// or exporting a session that was not promoted) or a UsageError is a usage error (2); anything
// else, a damaged store included, could not finish (3).
inline int exit_code_of(const std::exception& e) {
  const bool usage = dynamic_cast<const store::NoSuchSession*>(&e) ||
                     dynamic_cast<const store::NoSuchStore*>(&e) ||
                     dynamic_cast<const store::Refused*>(&e) || dynamic_cast<const UsageError*>(&e);
  return usage ? kExitUsage : kExitCouldNotFinish;
}

// Parses all of `text` as one T with std::from_chars (decimal, no sign other than '-', no
// whitespace); false when empty, malformed, out of range or followed by anything.
template <typename T> bool parse_whole(const std::string& text, T& v) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  return !text.empty() && ec == std::errc() && ptr == end;
}

// Validator for a session ID argument: a positive decimal integer that fits int64
// (1..9223372036854775807), without leading zeros. Without it CLI11 would clamp an overflowing
// value to INT64_MAX, and read "010" as octal 8: either way the command would act on a session the
// user never typed.
inline CLI::Validator session_id_check() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        std::int64_t v = 0;
        if (!parse_whole(text, v) || v <= 0 || text[0] == '0')
          return "a session ID is a positive decimal integer up to 9223372036854775807, without "
                 "leading zeros (got '" +
                 text + "'); list the stored sessions with `kloop sessions` and the same --store";
        return {};
      },
      "SESSION_ID");
}

// Validator for a seed: a decimal integer in 0..9223372036854775807. The store keeps the seed as
// a signed 64-bit value (sessions.seed), so a larger uint64 would be recorded as negative; without
// this check CLI11 also wraps "-5" to 2^64 - 5, recorded as -5.
inline CLI::Validator seed_check() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        std::int64_t v = 0;
        if (!parse_whole(text, v) || v < 0)
          return "a seed is a decimal integer from 0 to 9223372036854775807 (got '" + text + "')";
        return {};
      },
      "UINT64");
}

// The one validator of every floating-point option (seconds, dollars, prices): a finite decimal
// number in [lo, hi] (`lo_open`: lo itself excluded), as std::from_chars reads it. CLI11's own
// Range and NonNegativeNumber let "nan" through (every comparison with NaN is false); NaN, the
// infinities, hex floats, out-of-range text ("1e999") and trailing bytes are refused here, naming
// the range and the text given. `what` says what the number is ("seconds", "US dollars; 0: no
// limit").
inline CLI::Validator finite_number_check(double lo, double hi, const std::string& what,
                                          bool lo_open = false) {
  const std::string range = fmt::format("{}{}, {}]", lo_open ? "(" : "[", lo, hi);
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        double v = 0;
        if (!parse_whole(text, v) || !std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
          return fmt::format("expected a finite number in {} ({}), got '{}'", range, what, text);
        return {};
      },
      "NUMBER in " + range);
}

// Validator for `--devices` (agent::check_devices_syntax: all, none, or a comma list of device
// indices and GPU UUIDs); whether the devices exist is checked when they are probed.
CLI::Validator devices_check();

// Whether the command line asks for JSON output (--json before any "--").
inline bool json_requested(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") return false;
    if (std::string_view(argv[i]) == "--json") return true;
  }
  return false;
}

// Prints {"error": <message>, "exit_code": <code>} on stdout when --json was given, so a script
// that parses stdout sees the error instead of empty output. Bytes that are not UTF-8 (a path
// argument, say) are replaced by U+FFFD instead of making the serializer throw.
inline void print_json_error(const std::string& message, int code) {
  const nlohmann::json doc{{"error", message}, {"exit_code", code}};
  std::printf("%s\n", doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}
inline void print_json_error(int argc, const char* const* argv, const std::string& message,
                             int code) {
  if (json_requested(argc, argv)) print_json_error(message, code);
}

// Reports an exception that reached main() and returns its exit code (exit_code_of): the message
// goes to stderr as "kloop: <what>", and to stdout as JSON with --json (print_json_error).
inline int report_error(const std::exception& e, int argc, const char* const* argv) {
  const int code = exit_code_of(e);
  std::fprintf(stderr, "kloop: %s\n", e.what());
  print_json_error(argc, argv, e.what(), code);
  return code;
}

// Reports a command-line parse error (CLI11 prints it and the help hint on stderr) and returns 2;
// with --json stdout also gets the JSON error document.
inline int report_usage_error(CLI::App& app, const CLI::ParseError& e, int argc,
                              const char* const* argv) {
  app.exit(e);
  print_json_error(argc, argv, e.what(), kExitUsage);
  return kExitUsage;
}

// The operator a command names: its cli name ("rmsnorm"), contract name ("weighted_rmsnorm") or
// contract id ("weighted_rmsnorm/1"). Throws UsageError listing the registered operators
// (cmd_operators.cpp).
const op::Operator& resolve_operator(const std::string& name);

void register_operators(CLI::App& app, int& exit_code);        // cmd_operators.cpp
void register_optimize(CLI::App& app, int& exit_code);         // cmd_optimize.cpp
void register_evaluate(CLI::App& app, int& exit_code);         // cmd_evaluate.cpp
void register_checker_coverage(CLI::App& app, int& exit_code); // cmd_checker_coverage.cpp
void register_store_commands(CLI::App& app, int& exit_code);   // cmd_store.cpp: sessions, show,
                                                               // compare, replay, report, store,
                                                               // keys, receipt

void register_export_commands(CLI::App& app, int& exit_code); // cmd_export.cpp: export, shadow

// cmd_merge.cpp: `kloop store merge OUT STORE...` under the `store` subcommand.
void register_store_merge(CLI::App* store_cmd, int& exit_code);
// cmd_merge.cpp: `kloop compare --by generator [--operator OP] [--html FILE]`.
struct GeneratorCompareArgs {
  std::string by, op, html;
};
void add_generator_compare_flags(CLI::App* compare, GeneratorCompareArgs& args);
// The comparison (store/generator_compare.h) of the store at `store_dir`; UsageError for a --by
// other than "generator".
nlohmann::json generator_comparison(const std::string& store_dir, const GeneratorCompareArgs& args);
// cmd_merge.cpp: the row-chain lines of `kloop store verify` (store/chain.h).
std::string verify_chain_text(const store::ChainReport& chains);

void register_sweep_commands(CLI::App& app, int& exit_code);   // cmd_sweep.cpp
void register_contract_command(CLI::App& app, int& exit_code); // cmd_contract.cpp

// Registers the evaluator that `kloop replay` re-runs stored candidates through (replay_hook.cpp).
void register_replay_evaluator();

} // namespace kloop::app
