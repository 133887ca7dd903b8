// Public report -> feedback payload for the next prompt. The builder reads only an
// evaluator::PublicReport (plus, optionally, the candidate's own kernel.cu to quote source lines):
// holdout results are a different type, and the deleted template overload below makes passing any
// other type a compile error, so holdout data cannot reach a prompt through this module.
//
// Sections, in order, each cut to its byte budget (a cut section ends with a marker naming how
// many bytes were dropped): summary (verdict and every gate's status and reason), format (a reply
// that gave no candidate: truncated, refused, empty, ambiguous, ...), contract (manifest errors),
// build, static, correctness, sanitizer, benchmark (with roofline), profile (CUPTI stalls). A
// section is present only when its gate is in the report and ran (a gate that did not run appears
// in the summary only). The payload is a pure function of its inputs (no clock, no randomness;
// JSON objects iterate in sorted key order), so the same report always gives the same bytes.
//
// The evidence is read through the typed schema of evaluator/evidence.h (one reader per gate,
// shared with the producers); a part present but malformed is named at the end of its section
// ("kloop could not read ..."), never silently dropped. Within a section the most useful facts
// come first, so a cut keeps them: the failing case before the figures, the slower benchmark
// states before the rest. Case seeds are never shown.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"

namespace kloop::feedback {

// Byte budget of each section (the section text, marker included, never exceeds it).
struct FeedbackBudgets {
  std::size_t summary = 2048;
  std::size_t format = 1024;
  std::size_t contract = 2048;
  std::size_t build = 4096;
  std::size_t static_inspection = 2048;
  std::size_t correctness = 4096;
  std::size_t sanitizer = 4096;
  std::size_t benchmark = 3072;
  std::size_t profile = 2048;
};

struct FeedbackOptions {
  FeedbackBudgets budgets;
  // The candidate's kernel.cu, to quote the source lines that sanitizer findings and stall
  // samples point at ("" = quote nothing). It is the model's own code, never evaluator data.
  std::string kernel_source;
};

struct FeedbackSection {
  std::string name; // "summary", "format", "contract", "build", "static", "correctness",
                    // "sanitizer", "benchmark", "profile"
  std::string text; // at most the section's budget in bytes
  bool truncated = false;
};

struct FeedbackPayload {
  std::string verdict; // verdict_name of the report
  std::vector<FeedbackSection> sections;
  // Sections as "## name\ntext" blocks separated by blank lines (what the prompt embeds).
  std::string render() const;
  nlohmann::json to_json() const; // {"verdict", "sections":[{"name","text","truncated"}]}
};

// Builds the payload from a public report (see the file comment).
FeedbackPayload build_feedback(const evaluator::PublicReport& report,
                               const FeedbackOptions& options = {});

// One candidate of an iteration that produced several (`--candidates-per-iteration`, issue 26):
// its public report and its own kernel.cu (quoted as in FeedbackOptions::kernel_source).
struct BatchEntry {
  const evaluator::PublicReport* report = nullptr;
  std::string kernel_source;
};

// The feedback on every candidate of one iteration, in their order: each candidate's payload
// (build_feedback with its own source and every section budget divided by the number of
// candidates, at least kMinBatchSectionBytes), its sections renamed "candidate K of N: NAME".
// Verdict: "pass" when a candidate passed, else the first candidate's. One entry: the same bytes
// as build_feedback. Entries without a report are skipped.
inline constexpr std::size_t kMinBatchSectionBytes = 512;
FeedbackPayload build_batch_feedback(const std::vector<BatchEntry>& entries,
                                     const FeedbackBudgets& budgets = {});

// Anything that is not a PublicReport (a holdout result above all) does not compile.
template <class T> FeedbackPayload build_feedback(const T&, const FeedbackOptions& = {}) = delete;

// `text` cut to at most `budget` bytes at a line (else UTF-8) boundary, with a marker
// "[... N bytes cut]" appended inside the budget. Returns text unchanged when it fits.
std::string fit_to_budget(std::string_view text, std::size_t budget, bool* truncated = nullptr);

// Replaces absolute host paths (a '/' starting a token, with at least two components) by "<path>",
// keeping a trailing "kernel.cu" name when the path ends in it.
std::string redact_host_paths(std::string_view text);

} // namespace kloop::feedback
