// Turns a model's reply text into the two candidate files, kernel.cu and manifest.json, reading
// replies the way real models write them:
// - CRLF line ends are read as LF; <think>...</think> (and <thinking>) blocks are reasoning, not
//   the answer, and are skipped (reasoning the API returns in a separate field never gets here).
// - Fences are lines starting (after optional spaces) with three or more backticks or tildes; a
//   closing fence repeats the opening character at least as many times. The first word of the info
//   string names the language (case-insensitive).
// - kernel.cu: a code block (cuda, cu, cuh, cpp, c++, cxx, cc, c, or no language) that defines a
//   __global__ function. Blocks without one (a host-side example, a build command) are ignored;
//   identical blocks count once; two different kernel blocks are ambiguous (rejected, naming the
//   lines, so the next prompt can say which).
// - manifest.json: a json block (or an unlabelled block) holding a JSON object; among several, the
//   ones with "entry_points"; when there is no such block, an object with "entry_points" written in
//   the prose itself.
// - A reply the provider reports as cut at the token limit (finish_reason "length", stop_reason
//   "max_tokens") is built only when both files are complete; otherwise the outcome is `truncated`
//   and nothing is built from half a kernel.
// - No code and no fence: `empty`, `refusal` (the model declined) or `explanation_only`.
// Every outcome other than ok is a `format` failure value whose reason the next prompt repeats;
// the parser never throws on reply content.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "evaluator/gate.h"

namespace kloop::agent {

// Cap on a whole reply; larger replies are rejected without scanning (1 MiB).
inline constexpr std::size_t kMaxReplyBytes = 1024 * 1024;

// The instruction appended to every format failure.
inline constexpr std::string_view kFormatInstruction =
    "return exactly one cuda block and one json block";

// How a reply parse ended. Persisted by name (format gate evidence "outcome", iteration notes).
enum class ReplyOutcome {
  kOk,
  kEmpty,           // no text at all (or only reasoning)
  kTruncated,       // cut at the token limit before both files were complete
  kRefusal,         // the model declined (no code; the API's refusal field or refusal wording)
  kExplanationOnly, // text without any code block
  kNoKernel,        // code blocks, but none defines a __global__ function
  kNoManifest,      // a kernel, but no JSON object for manifest.json
  kAmbiguous,       // several different kernel blocks, or several candidate manifests
  kUnclosedFence,   // a fence opened and never closed (reply not reported as truncated)
  kBadManifest,     // the manifest block does not parse to a JSON object
  kTooLarge,        // the reply or one of its files passes its size cap
  kEmptyKernel,     // the kernel block is blank
};
std::string_view reply_outcome_name(ReplyOutcome outcome); // "ok", "empty", "truncated", ...

// What the provider said about the reply besides its text.
struct ReplyContext {
  bool truncated = false;  // the API reported the token limit as the stop reason
  std::string stop_reason; // as the API reported it ("length", "max_tokens", "stop", ...)
  std::string refusal;     // the API's own refusal text (OpenAI message.refusal), "" if none
};

struct ParsedReply {
  bool ok = false;
  ReplyOutcome outcome = ReplyOutcome::kEmpty;
  std::string kernel_source;      // the kernel block (ok only), LF line ends, newline-terminated
  std::string manifest_text;      // the manifest object's text (ok only)
  std::string error;              // "format: <why>; " + kFormatInstruction (!ok only)
  std::string why;                // <why> alone (!ok only)
  int code_blocks = 0;            // code blocks that define a __global__ function (after dedup)
  int json_blocks = 0;            // blocks holding a JSON object
  bool manifest_in_prose = false; // the manifest came from the prose, not a fence
  std::string stop_reason;        // from the context
};

// Parses `reply`. Size caps: the reply `max_reply_bytes`, the kernel op::kMaxSourceBytes, the
// manifest op::kMaxManifestBytes. The manifest is only checked to be a JSON object here; its
// keys are validated by op::parse_manifest (the contract gate).
ParsedReply parse_reply(std::string_view reply, const ReplyContext& context = {},
                        std::size_t max_reply_bytes = kMaxReplyBytes);

// The `format` gate result of a parse: pass when ok, else fail with the error as the reason;
// evidence evaluator::evidence::FormatEvidence (outcome, reason, block counts, reply bytes, stop
// reason).
evaluator::GateResult format_gate_result(const ParsedReply& parsed, std::size_t reply_bytes);

} // namespace kloop::agent
