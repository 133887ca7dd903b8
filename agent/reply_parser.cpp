#include "agent/reply_parser.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/json_read.h"
#include "kernels/rmsnorm/manifest.h"

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
  return s;
}

std::vector<Block> scan_blocks(std::string_view reply) {
  std::vector<Block> blocks;
  Block* open = nullptr;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < reply.size()) {
    std::size_t end = reply.find('\n', pos);
    if (end == std::string_view::npos) end = reply.size();
    std::string_view line = reply.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    std::string_view t = trim_left(line);
    const bool fence = t.substr(0, 3) == "```";
    if (open) {
      if (fence && trim(t.substr(3)).empty()) {
        open->closed = true;
        open = nullptr;
      } else {
        open->text.append(line);
        open->text.push_back('\n');
      }
      continue;
    }
    if (!fence) continue;
    std::string_view info = trim(t.substr(3));
    std::string lang(info.substr(0, std::min(info.find_first_of(" \t{"), info.size())));
    std::transform(lang.begin(), lang.end(), lang.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    blocks.push_back(Block{lang, "", line_no, false});
    open = &blocks.back();
  }
  return blocks;
}

bool is_code_lang(const std::string& lang) {
  return lang == "cuda" || lang == "cu" || lang == "cpp" || lang == "c++";
}

ParsedReply failure(ParsedReply p, std::string why) {
  p.ok = false;
  p.kernel_source.clear();
  p.manifest_text.clear();
  p.error = fmt::format("format: {}; {}", why, kFormatInstruction);
  return p;
}

} // namespace

ParsedReply parse_reply(std::string_view reply, std::size_t max_reply_bytes) {
  ParsedReply p;
  if (reply.size() > max_reply_bytes)
    return failure(p, fmt::format("the reply is {} bytes, over the {} byte limit", reply.size(),
                                  max_reply_bytes));
  std::vector<Block> blocks = scan_blocks(reply);
  const Block* code = nullptr;
  const Block* json = nullptr;
  for (const auto& b : blocks) {
    if (!b.closed)
      return failure(
          p, fmt::format("the ```{} fence opened on line {} is never closed", b.lang, b.open_line));
    if (is_code_lang(b.lang)) {
      ++p.code_blocks;
      code = &b;
    } else if (b.lang == "json") {
      ++p.json_blocks;
      json = &b;
    }
  }
  if (p.code_blocks != 1 || p.json_blocks != 1)
    return failure(p, fmt::format("found {} cuda block{} and {} json block{}", p.code_blocks,
                                  p.code_blocks == 1 ? "" : "s", p.json_blocks,
                                  p.json_blocks == 1 ? "" : "s"));
  if (code->text.size() > rmsnorm::kMaxSourceBytes)
    return failure(p, fmt::format("the cuda block is {} bytes, over the {} byte limit of kernel.cu",
                                  code->text.size(), rmsnorm::kMaxSourceBytes));
  if (json->text.size() > rmsnorm::kMaxManifestBytes)
    return failure(p, fmt::format("the json block is {} bytes, over the {} byte limit of "
                                  "manifest.json",
                                  json->text.size(), rmsnorm::kMaxManifestBytes));
  if (trim(code->text).empty()) return failure(p, "the cuda block is empty");
  // An object whose number overflows a double ("1e999") is JSON by the grammar: the contract gate
  // names the field (rmsnorm::parse_manifest), so it is not a format failure here.
  const JsonRead read = read_json(json->text);
  if (read.number_overflow && !read.top_level_object)
    return failure(p, "the json block is not a JSON object");
  if (!read.value && !read.number_overflow)
    return failure(
        p, fmt::format("the json block (line {}) does not parse: {}", json->open_line, read.error));
  if (read.value && !read.value->is_object())
    return failure(
        p, fmt::format("the json block is a JSON {}, not an object", read.value->type_name()));
  p.ok = true;
  p.kernel_source = code->text;
  p.manifest_text = json->text;
  return p;
}

evaluator::GateResult format_gate_result(const ParsedReply& parsed, std::size_t reply_bytes) {
  evaluator::GateResult g;
  g.name = std::string(evaluator::kGateFormat);
  g.status = parsed.ok ? evaluator::GateStatus::kPass : evaluator::GateStatus::kFail;
  g.reason = parsed.ok ? "" : parsed.error;
  g.evidence = {{"code_blocks", parsed.code_blocks},
                {"json_blocks", parsed.json_blocks},
                {"reply_bytes", reply_bytes}};
  return g;
}

} // namespace kloop::agent
