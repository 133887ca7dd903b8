// Views of store content shared by the text output of `kloop show` (app/cmd_store.cpp) and the
// HTML report (store/html_report.cpp): the holdout lines, and stored text made valid UTF-8.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/json_at.h"

namespace kloop::store {

struct SessionDetail;

// `s` with every byte that does not belong to a valid UTF-8 sequence replaced by U+FFFD (stored
// text from an edited or damaged row); valid text is returned unchanged.
std::string replace_invalid_utf8(std::string_view s);

// `text` as one POSIX shell word: unchanged when it is only safe characters (letters, digits and
// _./:=@%+-), else single-quoted (a ' inside written '\''), so a printed command runs as shown.
std::string shell_word(std::string_view text);

// A kloop command line a message can print for the user to run as is: "kloop ARGS --store DIR"
// (`args` e.g. "show 3" or "store verify"; DIR shell-quoted). Every hint that names a store
// command carries the --store it needs, so it never acts on another (default) store.
std::string kloop_command(std::string_view args, const std::string& store_dir);

// `s` made safe to print on a terminal: C0 control bytes other than newline and tab, DEL and the
// C1 controls (U+0080..U+009F) are written as "\xNN" / "\u00NN", so text that came from a
// candidate, a compiler or a model (an ESC sequence in a diagnostic, say) cannot move the cursor,
// recolour or clear what kloop prints. Other bytes are unchanged.
std::string terminal_text(std::string_view s);

// terminal_text(s) shortened for one line of terminal output: unchanged when it has at most
// `max_bytes` bytes, else cut at the last space within its first `max_bytes` bytes (or at
// `max_bytes` when a word is longer than a third of that), never inside a UTF-8 sequence, with
// "..." appended.
std::string clip_text(std::string_view s, std::size_t max_bytes);

// A stored JSON value as text: a string's own text, anything else as compact JSON (with U+FFFD
// for invalid UTF-8), "" for null. For values an edited row may hold in any type.
std::string json_string(const nlohmann::json& value);

// `kloop show`'s summary of a checker-coverage session (session_kind "checker-coverage"), from its
// iteration's notes "checker_coverage" (mutation/store_report.h): mutants, killed of admissible,
// score, gaps, and one line per operator; "checker coverage: no summary recorded\n" without one.
std::string checker_coverage_text(const SessionDetail& d);

// One sealed-holdout entry of a session: a run of a candidate, or a commitment without a run.
struct HoldoutLine {
  std::optional<std::int64_t> candidate_id; // nullopt: a commitment that never ran
  bool commitment_recorded = false;         // false: the run names no recorded commitment
  std::string commitment_sha256, suite_version;
  std::string status;                        // "pass", "fail", ...; "not run" without a run
  std::optional<std::int64_t> passed, total; // case counts when the result records sane ones
  std::optional<bool> commitment_verified;   // nullopt: not checked (or no run)
  std::optional<bool> retired;               // nullopt without a run
};

// The holdout entries of `d`: one per run (in run order), then one per commitment without a run.
std::vector<HoldoutLine> holdout_lines(const SessionDetail& d);

// `kloop show`'s holdout text, one "holdout: ..." line per entry of holdout_lines (commitment
// shortened to 12 hex characters), or "holdout: none recorded"; each line ends in '\n'.
std::string holdout_text(const SessionDetail& d);

} // namespace kloop::store
