// Holdout lines and UTF-8 replacement shared by `kloop show` and the HTML report.
#include "store/text_view.h"

#include <fmt/core.h>

#include "store/store.h"

namespace kloop::store {

std::string replace_invalid_utf8(std::string_view s) {
  // nlohmann's serializer validates UTF-8; error_handler_t::replace writes U+FFFD for invalid
  // bytes, and parsing the JSON string back gives the repaired text.
  const nlohmann::json text = std::string(s);
  return nlohmann::json::parse(text.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

std::string shell_word(std::string_view text) {
  const bool safe = !text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl"
                                                            "mnopqrstuvwxyz0123456789_./:=@%+-") ==
                                         std::string::npos;
  if (safe) return std::string(text);
  std::string out = "'";
  for (const char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string kloop_command(std::string_view args, const std::string& store_dir) {
  return fmt::format("kloop {} --store {}", args, shell_word(store_dir));
}

std::string terminal_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string clip_text(std::string_view raw, std::size_t max_bytes) {
  const std::string safe = terminal_text(raw);
  const std::string_view s = safe;
  if (s.size() <= max_bytes) return safe;
  std::size_t cut = max_bytes;
  // Not inside a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  const std::size_t space = s.rfind(' ', cut);
  if (space != std::string_view::npos && space > 0 && space >= cut - cut / 3) cut = space;
  std::string out(s.substr(0, cut));
  while (!out.empty() && (out.back() == ' ' || out.back() == ',' || out.back() == ';' ||
                          out.back() == ':' || out.back() == '('))
    out.pop_back();
  return out + "...";
}

std::vector<HoldoutLine> holdout_lines(const SessionDetail& d) {
  std::vector<HoldoutLine> out;
  const auto fill_commitment = [](HoldoutLine& line, const HoldoutCommitmentRecord* c) {
    if (!c) return;
    line.commitment_recorded = true;
    line.commitment_sha256 = c->commitment_sha256;
    line.suite_version = c->suite_version;
  };
  for (const auto& r : d.holdout_runs) {
    HoldoutLine line;
    line.candidate_id = r.candidate_id;
    fill_commitment(line, d.find_commitment(r.commitment_id));
    line.status = std::string(name(r.status));
    const auto count = [&](const char* key) -> std::optional<std::int64_t> {
      // Case counts in [0, 2^31): anything else (a hand-edited row) is not shown as a count.
      if (r.result.is_object() && r.result.contains(key) && r.result[key].is_number_integer()) {
        const std::int64_t v = r.result[key].get<std::int64_t>();
        if (v >= 0 && v < (std::int64_t{1} << 31)) return v;
      }
      return std::nullopt;
    };
    if (const auto passed = count("passed"), failed = count("failed"); passed && failed) {
      line.passed = *passed;
      line.total = *passed + *failed;
    }
    const auto verified = r.result.is_object()
                              ? r.result.value("commitment_verified", nlohmann::json())
                              : nlohmann::json();
    if (verified.is_boolean()) line.commitment_verified = verified.get<bool>();
    line.retired = r.retired;
    out.push_back(std::move(line));
  }
  for (const auto& c : d.holdout_commitments) {
    bool ran = false;
    for (const auto& r : d.holdout_runs)
      ran |= r.commitment_id == c.id;
    if (ran) continue;
    HoldoutLine line;
    fill_commitment(line, &c);
    line.status = "not run";
    out.push_back(std::move(line));
  }
  return out;
}

std::string holdout_text(const SessionDetail& d) {
  const auto lines = holdout_lines(d);
  if (lines.empty()) return "holdout: none recorded\n";
  std::string out;
  for (const auto& l : lines) {
    const std::string commitment =
        l.commitment_recorded
            ? fmt::format("commitment {} (suite {})", l.commitment_sha256.substr(0, 12),
                          l.suite_version.empty() ? "?" : l.suite_version)
            : std::string("commitment not recorded");
    if (!l.candidate_id) {
      out += fmt::format("holdout: {}, {}\n", commitment, l.status);
      continue;
    }
    std::string line =
        fmt::format("holdout: candidate {}, {}, {}", *l.candidate_id, commitment, l.status);
    if (l.passed && l.total) line += fmt::format(", {}/{} cases passed", *l.passed, *l.total);
    line += l.commitment_verified
                ? (*l.commitment_verified ? ", commitment verified" : ", commitment MISMATCH")
                : ", commitment not checked";
    line += l.retired.value_or(false) ? ", suite retired" : ", suite NOT retired";
    out += line + "\n";
  }
  return out;
}

std::string json_string(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {
// The integer at `key` of `j` as text, "?" when absent or not an integer (an edited row).
std::string count_at(const nlohmann::json& j, const char* key) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  return j.is_object() && it != j.end() && it->is_number_integer() ? it->dump() : "?";
}
std::string score_at(const nlohmann::json& j) {
  const auto it = j.is_object() ? j.find("score") : j.end();
  return j.is_object() && it != j.end() && it->is_number()
             ? fmt::format("{:.3f}", it->get<double>())
             : "n/a";
}
} // namespace

std::string checker_coverage_text(const SessionDetail& d) {
  const nlohmann::json* summary = nullptr;
  for (const auto& it : d.iterations)
    if (it.iteration.notes.is_object() && it.iteration.notes.contains("checker_coverage"))
      summary = &it.iteration.notes["checker_coverage"];
  if (summary == nullptr || !summary->is_object()) return "checker coverage: no summary recorded\n";
  const auto& c = *summary;
  const auto complete = c.find("complete");
  std::string out = fmt::format(
      "checker coverage: {} mutants, {} killed of {} admissible (score {}), {} admissible "
      "missed, {} not shown killable, {} not run; {}\n",
      count_at(c, "mutant_count"), count_at(c, "killed"), count_at(c, "admissible"), score_at(c),
      count_at(c, "admissible_missed"), count_at(c, "not_shown_killable"), count_at(c, "not_run"),
      complete != c.end() && complete->is_boolean() && complete->get<bool>()
          ? "complete"
          : "incomplete (mutants not run: no device)");
  if (const auto ops = c.find("per_operator"); ops != c.end() && ops->is_object())
    for (const auto& [op, t] : ops->items())
      out += fmt::format("  {:<22} {} killed of {} admissible, {} not run (score {})\n",
                         replace_invalid_utf8(op), count_at(t, "killed"), count_at(t, "admissible"),
                         count_at(t, "not_run"), score_at(t));
  std::string gaps;
  if (const auto g = c.find("gaps"); g != c.end() && g->is_array())
    for (const auto& gap : *g)
      gaps += (gaps.empty() ? "" : ", ") +
              json_string(gap.is_object() ? gap.value("id", nlohmann::json()) : gap);
  out += fmt::format("  gaps (admissible mutants no gate killed): {}\n",
                     gaps.empty() ? "none" : replace_invalid_utf8(gaps));
  return out;
}

} // namespace kloop::store
