// #include pre-scan, path redaction and diagnostic reduction (declared in evaluator/build.h).
#include <filesystem>
#include <map>
#include <regex>

#include <fmt/core.h>

#include "evaluator/build.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

struct LogicalLine {
  int line;     // first physical line
  int end_line; // last physical line (continuations and block comments join lines)
  std::string text;
};

// Splits source into logical lines: comments become a space, backslash-newline joins lines,
// string and character literals are kept (an include path is a "..." token).
std::vector<LogicalLine> logical_lines(std::string_view src) {
  std::vector<LogicalLine> out;
  std::string cur;
  int line = 1, start = 1;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    if (c == '\\' && i + 1 < src.size() && src[i + 1] == '\n') {
      ++i;
      ++line;
    } else if (c == '\n') {
      out.push_back({start, line, std::move(cur)});
      cur.clear();
      start = ++line;
    } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
      while (i + 1 < src.size() && src[i + 1] != '\n') {
        if (src[i + 1] == '\\' && i + 2 < src.size() && src[i + 2] == '\n') {
          i += 2;
          ++line;
        } else {
          ++i;
        }
      }
    } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '*') {
      i += 2;
      while (i < src.size() && !(src[i] == '*' && i + 1 < src.size() && src[i + 1] == '/')) {
        if (src[i] == '\n') ++line;
        ++i;
      }
      ++i;
      cur += ' ';
    } else if (c == '"' || c == '\'') {
      cur += c;
      for (++i; i < src.size() && src[i] != c && src[i] != '\n'; ++i) {
        cur += src[i];
        if (src[i] == '\\' && i + 1 < src.size()) cur += src[++i];
      }
      if (i < src.size() && src[i] == c)
        cur += c;
      else if (i < src.size())
        --i; // unterminated: let the newline be handled
    } else {
      cur += c;
    }
  }
  out.push_back({start, line, std::move(cur)});
  return out;
}

std::string shorten(const std::string& s) {
  return s.size() > 120 ? s.substr(0, 120) + "..." : s;
}

enum class PathClass { kToolkit, kEscape, kUnavailable };

struct PathCheck {
  PathClass cls = PathClass::kToolkit;
  std::string why; // empty for kToolkit
};

// A header NVRTC cannot compile although the toolkit ships it, with what to include instead.
std::string unsupported_toolkit_header(const std::string& path) {
  if (path == "cub/cub.cuh")
    return "cub/cub.cuh also pulls cub's device-wide algorithms and thrust, host code that NVRTC "
           "refuses (\"__host__ function is not allowed in JIT mode\"); a candidate has no host "
           "code, so include the per-algorithm headers it uses instead: <cub/block/"
           "block_reduce.cuh>, <cub/warp/warp_reduce.cuh>, <cub/block/block_load.cuh>, ...";
  if (path.rfind("cub/device/", 0) == 0)
    return "cub's device-wide algorithms are launched from host code, which a candidate does not "
           "have; use the block- or warp-level headers (<cub/block/...>, <cub/warp/...>)";
  if (path.rfind("thrust/", 0) == 0)
    return "thrust is host-side C++ that NVRTC cannot compile; use libcu++ (<cuda/std/...>) or "
           "cub's block- and warp-level headers in device code";
  if (path == "cuda.h")
    return "cuda.h is the driver API, host code that NVRTC cannot compile; a candidate needs no "
           "host API (cuda_runtime.h's device-side declarations are available without it)";
  return {};
}

// What to include instead of a C or C++ standard header, or empty when there is no libcu++ twin.
std::string standard_header_replacement(const std::string& path, const fs::path& cccl) {
  static const std::map<std::string, std::string> kCHeaders = {
      {"stdint.h", "cstdint"}, {"stddef.h", "cstddef"}, {"limits.h", "climits"},
      {"float.h", "cfloat"},   {"math.h", "cmath"},     {"assert.h", "cassert"}};
  std::string name = path;
  if (auto it = kCHeaders.find(path); it != kCHeaders.end()) name = it->second;
  std::error_code ec;
  if (name.find('/') != std::string::npos || !fs::is_regular_file(cccl / "cuda/std" / name, ec))
    return {};
  std::string note = fmt::format("<{}> is a C/C++ standard library header, which NVRTC does not "
                                 "provide; include <cuda/std/{}> (libcu++, the toolkit's standard "
                                 "library) and spell its names cuda::std::",
                                 path, name);
  if (name == "cmath")
    note += "; CUDA's math functions (sqrtf, rsqrtf, fmaf, ...) need no include at all";
  if (name == "cassert")
    note += "; NVRTC predefines assert, which kloop's release build (-DNDEBUG) compiles out";
  return note;
}

// Classifies an include path against the toolkit tree `inc` (searched as `inc`, then
// `inc`/cccl).
PathCheck check_path(const std::string& path, const fs::path& inc) {
  if (path.empty()) return {PathClass::kEscape, "empty include path"};
  if (path[0] == '/') return {PathClass::kEscape, "absolute paths are not allowed"};
  for (const auto& part : fs::path(path))
    if (part == "..") return {PathClass::kEscape, "'..' path components are not allowed"};
  if (path.find('\\') != std::string::npos)
    return {PathClass::kEscape, "backslashes are not allowed"};
  const std::string root = inc.string() + "/";
  for (const fs::path& dir : {inc, inc / "cccl"}) {
    std::error_code ec;
    if (!fs::exists(dir / path, ec)) continue;
    const fs::path resolved = fs::weakly_canonical(dir / path, ec);
    if (ec || resolved.string().compare(0, root.size(), root) != 0)
      return {PathClass::kEscape, "it resolves outside the CUDA include directory"};
    if (!fs::is_regular_file(resolved, ec)) continue;
    if (auto why = unsupported_toolkit_header(path); !why.empty())
      return {PathClass::kUnavailable, why};
    return {};
  }
  if (auto why = standard_header_replacement(path, inc / "cccl"); !why.empty())
    return {PathClass::kUnavailable, why};
  return {PathClass::kUnavailable, "no such CUDA toolkit header"};
}

// A replacement of the text `from` by `to` on one physical line.
struct LineEdit {
  int line;
  std::string from, to;
};

// `source` with each logical line of `replaced` (first physical line -> {last physical line,
// replacement}) turned into its replacement followed by empty lines (line numbers kept), and each
// edit applied to its physical line.
std::string rewrite(std::string_view source,
                    const std::map<int, std::pair<int, std::string>>& replaced,
                    const std::vector<LineEdit>& edits) {
  std::vector<std::string> lines;
  for (std::size_t b = 0;;) {
    const std::size_t e = source.find('\n', b);
    lines.emplace_back(source.substr(b, e == std::string_view::npos ? e : e - b));
    if (e == std::string_view::npos) break;
    b = e + 1;
  }
  for (const auto& [first, repl] : replaced) {
    for (int k = first; k <= repl.first && k <= static_cast<int>(lines.size()); ++k)
      lines[k - 1].clear();
    if (first <= static_cast<int>(lines.size())) lines[first - 1] = repl.second;
  }
  for (const auto& ed : edits) {
    std::string& text = lines[ed.line - 1];
    for (std::size_t p = 0; (p = text.find(ed.from, p)) != std::string::npos; p += ed.to.size())
      text.replace(p, ed.from.size(), ed.to);
  }
  std::string out;
  for (std::size_t k = 0; k < lines.size(); ++k)
    out += (k ? "\n" : "") + lines[k];
  return out;
}

} // namespace

IncludeScan scan_includes(std::string_view source, const std::string& cuda_include_dir) {
  static const std::regex kDirective(R"(^\s*(#|%:)\s*(include_next|include|import)\b\s*(.*)$)");
  static const std::regex kPathToken(R"re(^(<([^>]*)>|"([^"]*)")\s*$)re");
  static const std::regex kHasInclude(
      R"re(__has_include(_next)?\s*\(\s*(<([^>]*)>|"([^"]*)")\s*\))re");
  std::error_code ec;
  const fs::path inc = fs::weakly_canonical(cuda_include_dir, ec);
  IncludeScan scan;
  std::map<int, std::pair<int, std::string>> replaced;
  std::vector<LineEdit> edits;
  const std::string error_line = "#error " + std::string(kNeutralisedIncludeMarker);
  for (const auto& ll : logical_lines(source)) {
    std::smatch m;
    if (std::regex_search(ll.text, m, kDirective)) {
      const std::string directive = m[2].str();
      std::smatch p;
      const std::string rest = m[3].str();
      if (!std::regex_match(rest, p, kPathToken)) {
        scan.neutralised.push_back(
            {ll.line, "",
             fmt::format("line {}: #{} must name a CUDA toolkit header as <name.h> or \"name.h\"; "
                         "computed includes are not allowed",
                         ll.line, directive)});
        replaced[ll.line] = {ll.end_line, error_line};
        continue;
      }
      const std::string path = p[2].matched ? p[2].str() : p[3].str();
      const PathCheck c = check_path(path, inc);
      if (c.cls == PathClass::kEscape)
        scan.rejected.push_back({ll.line, shorten(path),
                                 fmt::format("line {}: #{} \"{}\" rejected: {}; only CUDA toolkit "
                                             "headers (cuda_fp16.h, cuda_bf16.h, ...) may be "
                                             "included",
                                             ll.line, directive, shorten(path), c.why)});
      if (c.cls == PathClass::kUnavailable) {
        scan.neutralised.push_back(
            {ll.line, shorten(path),
             fmt::format("line {}: #{} <{}> rejected: {}; only CUDA toolkit headers (cuda_fp16.h, "
                         "cuda_bf16.h, cuda/std/..., cub/block/..., cooperative_groups.h, ...) "
                         "may be included",
                         ll.line, directive, shorten(path), c.why)});
        replaced[ll.line] = {ll.end_line, error_line};
      }
    }
    for (auto it = std::sregex_iterator(ll.text.begin(), ll.text.end(), kHasInclude);
         it != std::sregex_iterator(); ++it) {
      const std::string path = (*it)[3].matched ? (*it)[3].str() : (*it)[4].str();
      const PathCheck c = check_path(path, inc);
      if (c.cls == PathClass::kToolkit) continue;
      if (c.cls == PathClass::kEscape || ll.end_line != ll.line) {
        scan.rejected.push_back(
            {ll.line, shorten(path),
             fmt::format("line {}: __has_include(\"{}\") rejected: {}", ll.line, shorten(path),
                         c.cls == PathClass::kEscape ? c.why : "it is split over lines")});
        continue;
      }
      edits.push_back({ll.line, it->str(), "0"});
    }
  }
  scan.source_to_compile =
      replaced.empty() && edits.empty() ? std::string(source) : rewrite(source, replaced, edits);
  return scan;
}

std::string redact_paths(std::string_view text,
                         const std::vector<std::pair<std::string, std::string>>& prefixes) {
  std::string s(text);
  for (const auto& [from, to] : prefixes) {
    if (from.empty()) continue;
    for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
      s.replace(pos, from.size(), to);
  }
  static const std::regex kAbsPath(R"re((^|[\s"'(<=:,\[])/[A-Za-z0-9._+\-/@~%]+)re");
  return std::regex_replace(s, kAbsPath, "$1<path>");
}

std::string reduce_diagnostics(std::string_view log, int max_errors) {
  static const std::regex kError(R"(^(.*)\((\d+)\): (catastrophic )?error\b.*$|^.*\berror\b.*$)");
  static const std::regex kAnyDiag(R"(^.*\(\d+\): (warning|error|remark)|^\S+: (error|warning))");
  static const std::regex kSummary(R"(errors? detected in the compilation)");
  std::vector<std::string> lines;
  std::size_t b = 0;
  while (b <= log.size()) {
    std::size_t e = log.find('\n', b);
    if (e == std::string_view::npos) e = log.size();
    lines.emplace_back(log.substr(b, e - b));
    b = e + 1;
  }
  std::string out;
  int shown = 0, total = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (std::regex_search(lines[i], kSummary) || !std::regex_match(lines[i], kError)) continue;
    if (lines[i].find("ptxas info") != std::string::npos) continue;
    ++total;
    if (shown >= max_errors) continue;
    ++shown;
    out += lines[i] + "\n";
    for (std::size_t k = i + 1; k < lines.size() && k <= i + 3; ++k) {
      if (lines[k].empty() || std::regex_search(lines[k], kAnyDiag) ||
          std::regex_search(lines[k], kSummary))
        break;
      out += lines[k] + "\n";
    }
  }
  if (total == 0) {
    for (std::size_t i = 0; i < lines.size() && i < 10; ++i)
      if (!lines[i].empty()) out += lines[i] + "\n";
  } else if (total > shown) {
    out += fmt::format("({} more errors)\n", total - shown);
  }
  return out;
}

} // namespace kloop::evaluator
