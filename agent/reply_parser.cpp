#include "agent/reply_parser.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluator/evidence.h"
#include "kernels/json_read.h"
#include "kernels/manifest.h"
#include "store/text_view.h"

namespace kloop::agent {
namespace {

struct Block {
  std::string lang; // lower-case first word of the info string
  std::string text;
  std::size_t open_line = 0; // 1-based line of the opening fence
  bool closed = false;
};

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  return s;
}

std::string_view trim(std::string_view s) {
  s = trim_left(s);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string without_cr(std::string_view reply) {
  std::string out;
  out.reserve(reply.size());
  for (std::size_t i = 0; i < reply.size(); ++i)
    if (!(reply[i] == '\r' && i + 1 < reply.size() && reply[i + 1] == '\n'))
      out.push_back(reply[i]);
  return out;
}

// Blanks <think>...</think> and <thinking>...</thinking> regions that open at a line start (every
// byte but newlines becomes a space, so line numbers stay those of the reply). An opening tag
// without its close blanks the rest. Returns whether any region was found.
bool blank_reasoning(std::string& text, bool* unclosed) {
  bool found = false;
  *unclosed = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t line_end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = trim_left(std::string_view(text).substr(pos, line_end - pos));
    std::string close;
    if (line.rfind("<think>", 0) == 0) close = "</think>";
    if (line.rfind("<thinking>", 0) == 0) close = "</thinking>";
    if (close.empty()) {
      pos = line_end + 1;
      continue;
    }
    found = true;
    const std::size_t open_at = pos + (line.data() - (text.data() + pos));
    std::size_t end = text.find(close, open_at);
    if (end == std::string::npos) {
      *unclosed = true;
      end = text.size();
    } else {
      end += close.size();
    }
    for (std::size_t i = open_at; i < end; ++i)
      if (text[i] != '\n') text[i] = ' ';
    pos = end;
  }
  return found;
}

// Fenced blocks of `text` (see the header for the fence rules). `outside` receives the text that
// is not inside any fence (for a manifest written in prose).
std::vector<Block> scan_blocks(std::string_view text, std::string* outside) {
  std::vector<Block> blocks;
  Block* open = nullptr;
  char fence_char = 0;
  std::size_t fence_len = 0;
  std::size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string_view t = trim_left(line);
    std::size_t run = 0;
    const char c = t.empty() ? 0 : t.front();
    if (c == '`' || c == '~')
      while (run < t.size() && t[run] == c)
        ++run;
    const bool fence = run >= 3;
    if (open) {
      if (fence && c == fence_char && run >= fence_len && trim(t.substr(run)).empty()) {
        open->closed = true;
        open = nullptr;
      } else {
        open->text.append(line);
        open->text.push_back('\n');
      }
      continue;
    }
    if (!fence || (c == '`' && t.substr(run).find('`') != std::string_view::npos)) {
      if (outside) outside->append(line).push_back('\n');
      continue;
    }
    const std::string_view info = trim(t.substr(run));
    blocks.push_back(Block{lower(info.substr(0, std::min(info.find_first_of(" \t{"), info.size()))),
                           "", line_no, false});
    open = &blocks.back();
    fence_char = c;
    fence_len = run;
  }
  return blocks;
}

bool is_code_lang(const std::string& lang) {
  for (const char* l : {"", "cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "hpp", "h"})
    if (lang == l) return true;
  return false;
}

bool defines_kernel(std::string_view text) {
  return text.find("__global__") != std::string_view::npos;
}

nlohmann::json parse_object(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json();
}

// Whether a json block holds one object: it parses to one, or it is an object whose number
// overflows a double ("1e999"), which is JSON by the grammar; the contract gate then names the
// field (op::parse_manifest), so the reply is not a format failure (issue 22, item 1).
bool holds_object(std::string_view text) {
  const JsonRead read = read_json(text);
  return read.value ? read.value->is_object() : read.number_overflow && read.top_level_object;
}

// JSON objects written in prose: each balanced {...} (strings respected) that parses to an object
// with "entry_points".
std::vector<std::string> prose_manifests(std::string_view prose) {
  std::vector<std::string> out;
  for (std::size_t start = prose.find('{'); start != std::string_view::npos;
       start = prose.find('{', start + 1)) {
    int depth = 0;
    bool in_string = false, escaped = false;
    std::size_t end = std::string_view::npos;
    for (std::size_t i = start; i < prose.size() && i - start < op::kMaxManifestBytes; ++i) {
      const char ch = prose[i];
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (ch == '\\')
          escaped = true;
        else if (ch == '"')
          in_string = false;
        continue;
      }
      if (ch == '"')
        in_string = true;
      else if (ch == '{')
        ++depth;
      else if (ch == '}' && --depth == 0) {
        end = i;
        break;
      }
    }
    if (end == std::string_view::npos) continue;
    const std::string_view candidate = prose.substr(start, end - start + 1);
    const auto j = parse_object(candidate);
    if (j.is_object() && j.contains("entry_points")) {
      out.emplace_back(candidate);
      start = end; // nested objects of this one are not candidates of their own
    }
  }
  return out;
}

bool reads_as_refusal(std::string_view text) {
  const std::string t = lower(text);
  for (const char* phrase :
       {"i can't help", "i cannot help", "i can't assist", "i cannot assist", "i can't provide",
        "i cannot provide", "i won't be able", "i will not be able", "i'm not able to help",
        "i am not able to help", "i must decline", "i can't comply", "i cannot comply",
        "i'm unable to help", "i am unable to help", "i can’t help"})
    if (t.find(phrase) != std::string::npos) return true;
  return false;
}

std::string lines_of(const std::vector<const Block*>& blocks) {
  std::string out;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    out += (i == 0                   ? ""
            : i + 1 == blocks.size() ? " and "
                                     : ", ") +
           std::to_string(blocks[i]->open_line);
  return out;
}

ParsedReply failure(ParsedReply p, ReplyOutcome outcome, std::string why) {
  p.ok = false;
  p.outcome = outcome;
  p.kernel_source.clear();
  p.manifest_text.clear();
  p.why = std::move(why);
  p.error = fmt::format("format: {}; {}", p.why, kFormatInstruction);
  return p;
}

std::string truncation_text(const ReplyContext& c, const std::string& what) {
  return fmt::format("the reply was cut at the token limit (stop reason {}) before {}; nothing "
                     "was built from a partial reply. Put the two blocks first and keep any "
                     "explanation short, or raise --max-reply-tokens",
                     c.stop_reason.empty() ? "length" : c.stop_reason, what);
}

} // namespace

std::string_view reply_outcome_name(ReplyOutcome o) {
  switch (o) {
  case ReplyOutcome::kOk:
    return "ok";
  case ReplyOutcome::kEmpty:
    return "empty";
  case ReplyOutcome::kTruncated:
    return "truncated";
  case ReplyOutcome::kRefusal:
    return "refusal";
  case ReplyOutcome::kExplanationOnly:
    return "explanation_only";
  case ReplyOutcome::kNoKernel:
    return "no_kernel";
  case ReplyOutcome::kNoManifest:
    return "no_manifest";
  case ReplyOutcome::kAmbiguous:
    return "ambiguous";
  case ReplyOutcome::kUnclosedFence:
    return "unclosed_fence";
  case ReplyOutcome::kBadManifest:
    return "bad_manifest";
  case ReplyOutcome::kTooLarge:
    return "too_large";
  case ReplyOutcome::kEmptyKernel:
    return "empty_kernel";
  }
  return "empty";
}

namespace {

// The blocks of a reply sorted by what they can be.
struct Candidates {
  std::vector<Block> blocks;
  std::string prose;                   // text outside every fence
  std::vector<const Block*> kernels;   // distinct code blocks that define a __global__ function
  std::vector<const Block*> objects;   // distinct blocks holding a JSON object
  std::vector<const Block*> bad_json;  // json blocks that do not hold an object
  const Block* unclosed = nullptr;     // a fence never closed
  int code_blocks = 0, blank_code = 0; // code-language blocks, and blank ones among them
};

Candidates sort_blocks(std::string_view text) {
  Candidates c;
  c.blocks = scan_blocks(text, &c.prose);
  for (const auto& b : c.blocks) {
    if (!b.closed) {
      c.unclosed = &b;
      continue;
    }
    if (is_code_lang(b.lang)) {
      ++c.code_blocks;
      if (trim(b.text).empty()) ++c.blank_code;
      if (defines_kernel(b.text)) {
        if (std::none_of(c.kernels.begin(), c.kernels.end(),
                         [&](const Block* k) { return k->text == b.text; }))
          c.kernels.push_back(&b);
        continue;
      }
    }
    if (b.lang == "json" || b.lang.empty()) {
      if (holds_object(b.text)) {
        const auto j = parse_object(b.text); // null for an object whose number overflows
        if (std::none_of(c.objects.begin(), c.objects.end(), [&](const Block* o) {
              return o->text == b.text || (j.is_object() && parse_object(o->text) == j);
            }))
          c.objects.push_back(&b);
      } else if (b.lang == "json") {
        c.bad_json.push_back(&b);
      }
    }
  }
  return c;
}

// The failure of a reply without any text but reasoning.
ParsedReply no_answer(ParsedReply p, const ReplyContext& ctx, bool had_reasoning,
                      bool reasoning_unclosed) {
  if (ctx.truncated)
    return failure(p, ReplyOutcome::kTruncated,
                   truncation_text(ctx, had_reasoning ? "the reasoning ended and any answer began"
                                                      : "any answer was written"));
  if (!ctx.refusal.empty())
    return failure(p, ReplyOutcome::kRefusal,
                   "the model declined: " + std::string(trim(ctx.refusal).substr(0, 200)));
  return failure(p, ReplyOutcome::kEmpty,
                 had_reasoning ? (reasoning_unclosed
                                      ? "the reply is only reasoning (an unclosed <think> block)"
                                      : "the reply holds reasoning but no answer after it")
                               : "the reply is empty");
}

// kernel.cu: the one kernel block, or the failure saying why there is none.
std::optional<ParsedReply> no_single_kernel(const ParsedReply& p, const Candidates& c,
                                            const ReplyContext& ctx) {
  if (c.kernels.size() == 1) return std::nullopt;
  if (c.kernels.size() > 1)
    return failure(p, ReplyOutcome::kAmbiguous,
                   fmt::format("found {} different cuda blocks that define __global__ kernels "
                               "(opened on lines {}); keep only the one to evaluate",
                               c.kernels.size(), lines_of(c.kernels)));
  if (ctx.truncated)
    return failure(p, ReplyOutcome::kTruncated, truncation_text(ctx, "the cuda block came"));
  if (c.blocks.empty()) {
    if (!ctx.refusal.empty() || reads_as_refusal(c.prose))
      return failure(p, ReplyOutcome::kRefusal,
                     "the reply declines the task and holds no code" +
                         (ctx.refusal.empty()
                              ? std::string()
                              : ": " + std::string(trim(ctx.refusal).substr(0, 200))));
    return failure(p, ReplyOutcome::kExplanationOnly,
                   "the reply explains but holds no fenced code block (found 0 cuda blocks)");
  }
  if (c.blank_code > 0 && c.blank_code == c.code_blocks)
    return failure(p, ReplyOutcome::kEmptyKernel, "the cuda block is empty");
  return failure(p, ReplyOutcome::kNoKernel,
                 fmt::format("found {} code block{} but none defines a __global__ kernel (found 0 "
                             "cuda blocks with a kernel)",
                             c.code_blocks, c.code_blocks == 1 ? "" : "s"));
}

// Why a json block that holds no object is not a manifest.
std::string bad_json_text(const Block& b) {
  const JsonRead read = read_json(b.text);
  if (read.value)
    return fmt::format("the json block (line {}) is a JSON {}, not an object", b.open_line,
                       read.value->type_name());
  if (read.number_overflow)
    return fmt::format("the json block (line {}) is not a JSON object", b.open_line);
  return fmt::format("the json block (line {}) does not parse: {}", b.open_line, read.error);
}

// manifest.json: its text, or the failure saying why there is none.
std::optional<ParsedReply> choose_manifest(ParsedReply& p, const Candidates& c,
                                           const ReplyContext& ctx, std::string& manifest) {
  std::vector<const Block*> objects = c.objects;
  if (objects.size() > 1) {
    std::vector<const Block*> with_entries;
    for (const Block* o : objects)
      if (parse_object(o->text).contains("entry_points")) with_entries.push_back(o);
    if (with_entries.size() != 1)
      return failure(p, ReplyOutcome::kAmbiguous,
                     fmt::format("found {} different json objects for manifest.json (opened on "
                                 "lines {}); keep only one",
                                 objects.size(), lines_of(objects)));
    objects = with_entries;
  }
  if (objects.size() == 1) {
    manifest = objects.front()->text;
    return std::nullopt;
  }
  if (!c.bad_json.empty()) {
    const std::string why = bad_json_text(*c.bad_json.front());
    return failure(p, ctx.truncated ? ReplyOutcome::kTruncated : ReplyOutcome::kBadManifest,
                   ctx.truncated ? truncation_text(ctx, why) : why);
  }
  const std::vector<std::string> in_prose = prose_manifests(c.prose);
  if (in_prose.size() == 1) {
    manifest = in_prose.front();
    p.manifest_in_prose = true;
    return std::nullopt;
  }
  if (ctx.truncated)
    return failure(p, ReplyOutcome::kTruncated, truncation_text(ctx, "the json block came"));
  if (in_prose.size() > 1)
    return failure(p, ReplyOutcome::kAmbiguous,
                   fmt::format("found {} different manifest objects in the text and no json "
                               "block; put one in a json block",
                               in_prose.size()));
  return failure(p, ReplyOutcome::kNoManifest,
                 "found the kernel but no json block holding manifest.json (found 0 json blocks)");
}

} // namespace

ParsedReply parse_reply(std::string_view reply, const ReplyContext& ctx,
                        std::size_t max_reply_bytes) {
  ParsedReply p;
  p.stop_reason = ctx.stop_reason;
  if (reply.size() > max_reply_bytes)
    return failure(p, ReplyOutcome::kTooLarge,
                   fmt::format("the reply is {} bytes, over the {} byte limit", reply.size(),
                               max_reply_bytes));
  std::string text = without_cr(reply);
  bool reasoning_unclosed = false;
  const bool had_reasoning = blank_reasoning(text, &reasoning_unclosed);
  if (trim(text).empty()) return no_answer(p, ctx, had_reasoning, reasoning_unclosed);
  const Candidates c = sort_blocks(text);
  p.code_blocks = static_cast<int>(c.kernels.size());
  p.json_blocks = static_cast<int>(c.objects.size());
  if (c.unclosed && ctx.truncated)
    return failure(p, ReplyOutcome::kTruncated,
                   truncation_text(ctx, fmt::format("the ```{} block opened on line {} was closed",
                                                    c.unclosed->lang, c.unclosed->open_line)));
  if (c.unclosed)
    return failure(p, ReplyOutcome::kUnclosedFence,
                   fmt::format("the ```{} fence opened on line {} is never closed",
                               c.unclosed->lang, c.unclosed->open_line));
  if (auto why = no_single_kernel(p, c, ctx)) return *why;
  const Block& kernel = *c.kernels.front();
  if (kernel.text.size() > op::kMaxSourceBytes)
    return failure(p, ReplyOutcome::kTooLarge,
                   fmt::format("the cuda block is {} bytes, over the {} byte limit of kernel.cu",
                               kernel.text.size(), op::kMaxSourceBytes));
  std::string manifest;
  if (auto why = choose_manifest(p, c, ctx, manifest)) return *why;
  if (manifest.size() > op::kMaxManifestBytes)
    return failure(p, ReplyOutcome::kTooLarge,
                   fmt::format("the json block is {} bytes, over the {} byte limit of "
                               "manifest.json",
                               manifest.size(), op::kMaxManifestBytes));
  p.ok = true;
  p.outcome = ReplyOutcome::kOk;
  p.kernel_source = kernel.text;
  p.manifest_text = manifest;
  return p;
}

evaluator::GateResult format_gate_result(const ParsedReply& parsed, std::size_t reply_bytes) {
  evaluator::GateResult g;
  g.name = std::string(evaluator::kGateFormat);
  g.status = parsed.ok ? evaluator::GateStatus::kPass : evaluator::GateStatus::kFail;
  // The reasons quote the reply, whose bytes need not be UTF-8; the evidence is JSON text.
  g.reason = parsed.ok ? "" : store::replace_invalid_utf8(parsed.error);
  evaluator::evidence::FormatEvidence e;
  e.outcome = std::string(reply_outcome_name(parsed.outcome));
  e.reason = store::replace_invalid_utf8(parsed.why);
  e.code_blocks = parsed.code_blocks;
  e.json_blocks = parsed.json_blocks;
  e.reply_bytes = static_cast<std::int64_t>(reply_bytes);
  e.stop_reason = store::replace_invalid_utf8(parsed.stop_reason);
  g.evidence = e.to_json();
  if (parsed.manifest_in_prose) g.evidence["manifest_in_prose"] = true;
  return g;
}

} // namespace kloop::agent
