// compute-sanitizer report parsing (sanitizer.h): headlines become hazards, the first "at ..."
// frame after a headline gives the kernel symbol and source line.
#include <algorithm>
#include <cctype>
#include <regex>

#include "evaluator/sanitizer.h"

namespace kloop::evaluator::sanitizer {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

// A code location: "rms_bf16+0x1a0 in /tmp/kernel.cu:42", "0x1a0 in kernel.cu:42:rms_bf16",
// "rms_bf16(const float*, ...)+0x1a0 in kernel.cu:42" or "rms_bf16+0x1a0" (no line info).
struct Location {
  std::string function, file;
  int line = 0;
};

Location parse_location(std::string_view text) {
  Location loc;
  std::string s = trim(text);
  // Drop a trailing "[N hazards]" (racecheck).
  if (auto br = s.rfind(" ["); br != std::string::npos && s.back() == ']')
    s = trim(s.substr(0, br));
  std::string where = s;
  if (auto in = s.rfind(" in "); in != std::string::npos) {
    where = s.substr(0, in);
    std::string file = s.substr(in + 4);
    static const std::regex file_line(R"(^(.*?):(\d+)(?::(\S+))?$)");
    std::smatch m;
    if (std::regex_match(file, m, file_line)) {
      loc.file = m[1];
      loc.line = std::stoi(m[2]);
      if (m[3].matched) loc.function = m[3];
    } else {
      loc.file = file;
    }
  }
  // where = "sym+0x1a0", "sym(args)+0x1a0" or "0x1a0".
  static const std::regex hex_only(R"(^0x[0-9a-fA-F]+$)");
  if (!std::regex_match(where, hex_only) && loc.function.empty()) {
    std::string fn = where;
    if (auto plus = fn.rfind("+0x"); plus != std::string::npos) fn = fn.substr(0, plus);
    if (auto paren = fn.find('('); paren != std::string::npos) fn = fn.substr(0, paren);
    loc.function = trim(fn);
  }
  return loc;
}

void place(Hazard& h, const Location& loc) {
  h.function = loc.function;
  h.file = loc.file;
  h.line = loc.line;
}

} // namespace

nlohmann::json Hazard::to_json() const {
  nlohmann::json j{{"tool", tool},         {"kind", kind}, {"message", message},
                   {"function", function}, {"file", file}, {"line", line}};
  if (!file2.empty() || line2 != 0) {
    j["file2"] = file2;
    j["line2"] = line2;
  }
  if (access_size != 0) j["access_size"] = access_size;
  return j;
}

nlohmann::json Report::kind_counts() const {
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& h : hazards)
    counts[h.kind] = counts.value(h.kind, 0) + 1;
  return counts;
}

Report parse_report(std::string_view tool, std::string_view text) {
  static const std::regex invalid(
      R"(^Invalid (__global__|__shared__|__local__|__generic__|global|shared|local)? ?(read|write|atomic)\w* of size (\d+) bytes?)");
  static const std::regex uninit(
      R"(^Uninitialized (__global__|__shared__|__local__)? ?memory (read|write) of size (\d+) bytes?)");
  static const std::regex race(
      R"(^(Error|Warning): Race reported between (\w+) access at (.*?)(?:\s+and (\w+) access at (.*))?$)");
  static const std::regex race_and(R"(^and (\w+) access at (.*)$)");
  static const std::regex old_hazard(
      R"(^(ERROR|WARNING): Potential (RAW|WAR|WAW) hazard detected)");
  static const std::regex barrier(R"(^Barrier error detected\.?\s*(.*)$)");
  static const std::regex api(R"(^Program hit (\w+) \(error (\d+)\))");
  static const std::regex summary(R"(^ERROR SUMMARY: (\d+) errors?)");
  static const std::regex leak(R"(^Leaked (\d+) bytes)");
  static const std::regex at(R"(^at (.*)$)");

  Report report;
  bool need_location = false; // the last hazard has no frame yet
  bool need_race_partner = false;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    if (!raw.starts_with("=========")) {
      if (end == text.size()) break;
      continue;
    }
    const std::size_t body = raw.find_first_not_of('=');
    const std::string line =
        body == std::string_view::npos ? std::string() : trim(raw.substr(body));
    std::smatch m;
    auto add = [&](std::string kind, int size) {
      Hazard h;
      h.tool = std::string(tool);
      h.kind = std::move(kind);
      h.message = line;
      h.access_size = size;
      report.hazards.push_back(std::move(h));
      need_location = true;
      need_race_partner = false;
    };
    if (std::regex_search(line, m, invalid)) {
      std::string space = lower(m[1].str());
      space.erase(std::remove(space.begin(), space.end(), '_'), space.end());
      if (space.empty()) space = "generic";
      add("invalid_" + space + "_" + lower(m[2]), std::stoi(m[3]));
    } else if (std::regex_search(line, m, uninit)) {
      std::string space = lower(m[1].str());
      space.erase(std::remove(space.begin(), space.end(), '_'), space.end());
      add("uninitialized_" + (space.empty() ? std::string("global") : space) + "_" + lower(m[2]),
          std::stoi(m[3]));
    } else if (std::regex_search(line, m, race)) {
      add("race_" + lower(m[2]), 0);
      place(report.hazards.back(), parse_location(m[3].str()));
      need_location = false;
      if (m[4].matched) {
        report.hazards.back().kind += "_" + lower(m[4]);
        const Location second = parse_location(m[5].str());
        report.hazards.back().file2 = second.file;
        report.hazards.back().line2 = second.line;
      } else {
        need_race_partner = true;
      }
    } else if (need_race_partner && std::regex_search(line, m, race_and)) {
      Hazard& h = report.hazards.back();
      h.kind += "_" + lower(m[1]);
      const Location second = parse_location(m[2].str());
      h.file2 = second.file;
      h.line2 = second.line;
      need_race_partner = false;
    } else if (std::regex_search(line, m, old_hazard)) {
      add("race_" + lower(m[2]), 0);
    } else if (std::regex_search(line, m, barrier)) {
      std::string detail = lower(m[1]);
      std::string kind = "barrier_error";
      if (detail.find("divergent") != std::string::npos) {
        kind = detail.find("warp") != std::string::npos ? "barrier_divergent_warp"
                                                        : "barrier_divergent_block";
      } else if (detail.find("invalid") != std::string::npos) {
        kind = "barrier_invalid_arguments";
      }
      add(kind, 0);
    } else if (std::regex_search(line, m, api)) {
      add("api_error", 0);
      need_location = false;
    } else if (std::regex_search(line, m, leak)) {
      add("leak", 0);
      need_location = false;
    } else if (line.starts_with("Misaligned") || line.starts_with("Out-of-range") ||
               line.starts_with("Malloc/Free error") || line.starts_with("Invalid ")) {
      add(line.starts_with("Misaligned")     ? "misaligned_address"
          : line.starts_with("Out-of-range") ? "out_of_range_address"
          : line.starts_with("Malloc")       ? "heap_error"
                                             : "invalid_access",
          0);
    } else if (std::regex_search(line, m, summary)) {
      report.error_summary = std::stoi(m[1]);
    } else if (need_location && std::regex_search(line, m, at)) {
      place(report.hazards.back(), parse_location(m[1].str()));
      need_location = false;
    } else if (line.starts_with("Error:") || line.starts_with("Internal Sanitizer Error") ||
               line.find("unrecognised option") != std::string::npos ||
               line.find("unrecognized option") != std::string::npos) {
      report.tool_errors.push_back(line);
    }
    if (end == text.size()) break;
  }
  return report;
}

std::string parse_version(std::string_view version_output) {
  static const std::regex version(R"(Version\s+([0-9][0-9.]*))");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(version_output.begin(), version_output.end(), m, version)) return m[1];
  return {};
}

} // namespace kloop::evaluator::sanitizer
