// Turns a model's reply text into the two candidate files: exactly one fenced ```cuda (or ```cu,
// ```cpp, ```c++) block becomes kernel.cu and exactly one fenced ```json block becomes
// manifest.json. Fences are lines that start with three backticks (after optional spaces); the
// first word after the opening backticks names the language (case-insensitive); fenced blocks in
// other languages are ignored. No block, several blocks, an unterminated fence, JSON that does not
// parse to an object, or a reply/file over its size cap is a `format` failure value whose message
// is fed back to the model; the parser never throws on reply content.
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

struct ParsedReply {
  bool ok = false;
  std::string kernel_source; // contents of the cuda block (ok only), newline-terminated
  std::string manifest_text; // contents of the json block (ok only)
  std::string error;         // ends with kFormatInstruction (!ok only)
  int code_blocks = 0;       // cuda/cu/cpp/c++ blocks found
  int json_blocks = 0;       // json blocks found
};

// Parses `reply`. Size caps: the reply `max_reply_bytes`, the kernel rmsnorm::kMaxSourceBytes, the
// manifest rmsnorm::kMaxManifestBytes. The manifest is only checked to be a JSON object here; its
// keys are validated by rmsnorm::parse_manifest (the contract gate).
ParsedReply parse_reply(std::string_view reply, std::size_t max_reply_bytes = kMaxReplyBytes);

// The `format` gate result of a parse: pass when ok, else fail with the error as the reason and
// evidence {"code_blocks", "json_blocks", "reply_bytes"}.
evaluator::GateResult format_gate_result(const ParsedReply& parsed, std::size_t reply_bytes);

} // namespace kloop::agent
