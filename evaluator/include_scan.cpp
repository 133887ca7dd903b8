// #include pre-scan, path redaction and diagnostic reduction (declared in evaluator/build.h).
#include <filesystem>
#include <regex>

#include <fmt/core.h>

#include "evaluator/build.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

struct LogicalLine {
  int line;
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
      out.push_back({start, std::move(cur)});
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
  out.push_back({start, std::move(cur)});
  return out;
}

std::string shorten(const std::string& s) {
  return s.size() > 120 ? s.substr(0, 120) + "..." : s;
}

// Why `path` may not be included, or empty when it is a regular file inside `inc`.
std::string check_path(const std::string& path, const fs::path& inc) {
  if (path.empty()) return "empty include path";
  if (path[0] == '/') return "absolute paths are not allowed";
  for (const auto& part : fs::path(path))
    if (part == "..") return "'..' path components are not allowed";
  if (path.find('\\') != std::string::npos) return "backslashes are not allowed";
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(inc / path, ec);
  const std::string root = inc.string() + "/";
  if (ec || resolved.string().compare(0, root.size(), root) != 0)
    return "it resolves outside the CUDA include directory";
  if (!fs::is_regular_file(resolved, ec)) return "no such CUDA toolkit header";
  return {};
}

} // namespace

std::vector<IncludeProblem> scan_includes(std::string_view source,
                                          const std::string& cuda_include_dir) {
  static const std::regex kDirective(R"(^\s*(#|%:)\s*(include_next|include|import)\b\s*(.*)$)");
  static const std::regex kPathToken(R"re(^(<([^>]*)>|"([^"]*)")\s*$)re");
  static const std::regex kHasInclude(R"re(__has_include(_next)?\s*\(\s*(<([^>]*)>|"([^"]*)"))re");
  std::error_code ec;
  const fs::path inc = fs::weakly_canonical(cuda_include_dir, ec);
  std::vector<IncludeProblem> problems;
  for (const auto& ll : logical_lines(source)) {
    std::smatch m;
    if (std::regex_search(ll.text, m, kDirective)) {
      const std::string directive = m[2].str();
      const std::string rest = m[3].str();
      std::smatch p;
      if (!std::regex_match(rest, p, kPathToken)) {
        problems.push_back({ll.line, fmt::format("line {}: #{} must name a CUDA toolkit header as "
                                                 "<name.h> or \"name.h\"; computed includes are "
                                                 "not allowed",
                                                 ll.line, directive)});
        continue;
      }
      const std::string path = p[2].matched ? p[2].str() : p[3].str();
      if (auto why = check_path(path, inc); !why.empty())
        problems.push_back({ll.line, fmt::format("line {}: #{} \"{}\" rejected: {}; only CUDA "
                                                 "toolkit headers (cuda_fp16.h, cuda_bf16.h, ...) "
                                                 "may be included",
                                                 ll.line, directive, shorten(path), why)});
    }
    for (auto it = std::sregex_iterator(ll.text.begin(), ll.text.end(), kHasInclude);
         it != std::sregex_iterator(); ++it) {
      const std::string path = (*it)[3].matched ? (*it)[3].str() : (*it)[4].str();
      if (auto why = check_path(path, inc); !why.empty() && why != "no such CUDA toolkit header")
        problems.push_back({ll.line, fmt::format("line {}: __has_include(\"{}\") rejected: {}",
                                                 ll.line, shorten(path), why)});
    }
  }
  return problems;
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
