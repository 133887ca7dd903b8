// Feedback sections from gate evidence (keys listed in feedback/feedback.h).
#include "feedback/sections.h"

#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace kloop::feedback::detail {

using nlohmann::json;

const json* member(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string text_of(const json& j, std::string_view key, std::string fallback) {
  const json* m = member(j, key);
  if (!m || m->is_null()) return fallback;
  if (m->is_string()) return m->get<std::string>();
  if (m->is_number_float()) return num(m->get<double>());
  if (m->is_number() || m->is_boolean()) return m->dump();
  return fallback;
}

double number_of(const json& j, std::string_view key) {
  const json* m = member(j, key);
  return m && m->is_number() ? m->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::string num(double v) {
  if (std::isnan(v)) return "n/a";
  return fmt::format("{:.3g}", v);
}

std::string source_line(std::string_view source, long line) {
  if (line <= 0) return "";
  std::size_t pos = 0;
  for (long l = 1; l < line; ++l) {
    pos = source.find('\n', pos);
    if (pos == std::string_view::npos) return "";
    ++pos;
  }
  if (pos >= source.size()) return "";
  std::string_view text = source.substr(pos, source.find('\n', pos) - pos);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r'))
    text.remove_suffix(1);
  return std::string(text.substr(0, 160));
}

std::string summary_section(const evaluator::PublicReport& report) {
  std::string out = fmt::format("verdict: {}\n", evaluator::verdict_name(report.verdict));
  for (const auto& g : report.gates) {
    out += fmt::format("- {}: {}", g.name, evaluator::gate_status_name(g.status));
    if (!g.reason.empty()) out += " - " + g.reason.substr(0, 400);
    out += "\n";
  }
  return out;
}

std::string build_section(const evaluator::GateResult& g) {
  if (g.status == evaluator::GateStatus::kPass) return "compiled without errors\n";
  std::string out;
  if (const json* probs = member(g.evidence, "include_problems"); probs && probs->is_array()) {
    for (const auto& p : *probs)
      out += fmt::format("kernel.cu({}): {}\n", text_of(p, "line", "?"), text_of(p, "message"));
  }
  const std::string diag = text_of(g.evidence, "diagnostics");
  if (!diag.empty()) out += diag + (diag.back() == '\n' ? "" : "\n");
  if (out.empty()) out = g.reason + "\n";
  return out;
}

std::string static_section(const evaluator::GateResult& g) {
  std::string out;
  if (const json* res = member(g.evidence, "resources"); res && res->is_object()) {
    for (const auto& [fn, r] : res->items()) {
      out += fmt::format("{}: {} registers, spill stores {} B, spill loads {} B, stack {} B, "
                         "static smem {} B\n",
                         fn, text_of(r, "registers", "?"), text_of(r, "spill_store_bytes", "?"),
                         text_of(r, "spill_load_bytes", "?"), text_of(r, "stack_frame_bytes", "?"),
                         text_of(r, "smem_bytes", "?"));
    }
  }
  if (const json* sass = member(g.evidence, "sass"); sass && sass->is_object()) {
    for (const auto& [fn, s] : sass->items()) {
      if (!s.is_object() || !member(s, "local_loads")) continue;
      out += fmt::format("{}: local-memory loads {}, stores {} (SASS)\n", fn,
                         text_of(s, "local_loads", "?"), text_of(s, "local_stores", "?"));
    }
  }
  if (const json* f = member(g.evidence, "findings"); f && f->is_array()) {
    for (const auto& x : *f)
      out += fmt::format("forbidden/{} (PTX line {}): {}\n", text_of(x, "kind", "?"),
                         text_of(x, "ptx_line", "?"), text_of(x, "message"));
  }
  if (out.empty() && !g.reason.empty()) out = g.reason + "\n";
  return out;
}

namespace {

std::string describe_case(const json& c) {
  const json* spec = member(c, "case_spec");
  const json empty = json::object();
  const json& s = spec && spec->is_object() ? *spec : empty;
  std::string shape = "[";
  if (const json* outer = member(s, "outer"); outer && outer->is_array()) {
    for (const auto& d : *outer)
      shape += d.dump() + ", ";
  }
  shape += text_of(s, "h", "?") + "]";
  std::string out =
      fmt::format("family {} dtype {} shape {} layout {} values {} weight {}",
                  text_of(s, "family", "?"), text_of(s, "dtype", "?"), shape,
                  text_of(s, "layout", "?"), text_of(s, "values", "?"), text_of(s, "weight", "?"));
  if (const json* eps = member(s, "eps"); eps && eps->is_object())
    out += " eps " + text_of(*eps, "text", text_of(*eps, "value", "?"));
  out += ": " + text_of(c, "reason", "failed");
  if (const json* cmp = member(c, "comparison"); cmp && cmp->is_object()) {
    out += fmt::format(" (max abs err {}, max rel err {}, worst row ratio {}, {} tolerance "
                       "violations, {} non-finite mismatches)",
                       num(number_of(*cmp, "max_abs_err")), num(number_of(*cmp, "max_rel_err")),
                       num(number_of(*cmp, "worst_row_ratio")),
                       text_of(*cmp, "tolerance_violations", "?"),
                       text_of(*cmp, "nonfinite_mismatches", "?"));
  }
  return out;
}

} // namespace

std::string correctness_section(const evaluator::GateResult& g) {
  std::string out;
  if (member(g.evidence, "passed") || member(g.evidence, "failed"))
    out += fmt::format("public cases: {} passed, {} failed\n", text_of(g.evidence, "passed", "?"),
                       text_of(g.evidence, "failed", "?"));
  int shown = 0;
  if (const json* cases = member(g.evidence, "cases"); cases && cases->is_array()) {
    for (const auto& c : *cases) {
      const json* pass = member(c, "pass");
      if (!c.is_object() || !pass || !pass->is_boolean() || pass->get<bool>()) continue;
      out += "- " + describe_case(c) + "\n";
      ++shown;
    }
  }
  if (shown == 0) {
    if (const json* first = member(g.evidence, "first_failure"); first && first->is_object())
      out += "- " + describe_case(*first) + "\n";
  }
  if (out.empty()) out = g.reason.empty() ? "all public cases passed\n" : g.reason + "\n";
  return out;
}

std::string sanitizer_section(const evaluator::GateResult& g, std::string_view kernel_source) {
  std::string out;
  if (const json* tools = member(g.evidence, "tools"); tools && tools->is_array()) {
    for (const auto& t : *tools) {
      out += fmt::format("{}: {}", text_of(t, "tool", "?"), text_of(t, "outcome", "?"));
      if (const std::string r = text_of(t, "reason"); !r.empty()) out += " - " + r;
      out += "\n";
      const json* hazards = member(t, "hazards");
      if (!hazards || !hazards->is_array()) continue;
      for (const auto& h : *hazards) {
        out += fmt::format("  {} in {}: {}", text_of(h, "kind", "?"), text_of(h, "function", "?"),
                           text_of(h, "message"));
        const double line = number_of(h, "line");
        if (line > 0) {
          out += fmt::format(" at kernel.cu:{}", static_cast<long>(line));
          if (auto src = source_line(kernel_source, static_cast<long>(line)); !src.empty())
            out += " `" + src + "`";
        }
        if (const double l2 = number_of(h, "line2"); l2 > 0) {
          out += fmt::format(" and kernel.cu:{}", static_cast<long>(l2));
          if (auto src = source_line(kernel_source, static_cast<long>(l2)); !src.empty())
            out += " `" + src + "`";
        }
        out += "\n";
      }
    }
  }
  if (const json* poison = member(g.evidence, "poison"); poison && poison->is_object()) {
    if (text_of(*poison, "status") == "fail")
      out += "shared-memory poisoning: " + text_of(*poison, "reason") + "\n";
  }
  if (out.empty()) out = g.reason.empty() ? "no findings\n" : g.reason + "\n";
  return out;
}

std::string benchmark_section(const evaluator::GateResult* bench,
                              const evaluator::GateResult* roof) {
  std::string out;
  if (bench) {
    if (const json* s = member(bench->evidence, "summary"); s && s->is_object())
      out +=
          fmt::format("vs baseline: geomean speedup {}; faster on {} shapes, slower on {}, "
                      "indistinguishable on {}\n",
                      num(number_of(*s, "geomean_speedup_vs_baseline")), text_of(*s, "faster", "?"),
                      text_of(*s, "slower", "?"), text_of(*s, "indistinguishable", "?"));
    if (const json* shapes = member(bench->evidence, "shapes"); shapes && shapes->is_array()) {
      for (const auto& sh : *shapes) {
        const json* states = member(sh, "states");
        if (!states || !states->is_array()) continue;
        for (const auto& st : *states) {
          out += fmt::format(
              "{} [{}, {}] {}: candidate {} ms, baseline {} ms ({})\n", text_of(sh, "dtype", "?"),
              text_of(sh, "rows", "?"), text_of(sh, "h", "?"), text_of(st, "state", "?"),
              num(number_of(st, "candidate_kernel_median_ms")),
              num(number_of(st, "baseline_kernel_median_ms")), text_of(st, "decision", "?"));
        }
      }
    }
    if (out.empty() && !bench->reason.empty()) out += "benchmark: " + bench->reason + "\n";
  }
  if (roof) {
    const double ceiling = number_of(roof->evidence, "copy_ceiling_tbps");
    if (!std::isnan(ceiling)) out += fmt::format("copy ceiling {} TB/s\n", num(ceiling));
    if (const json* cls = member(roof->evidence, "by_class"); cls && cls->is_object()) {
      for (const auto& [name, c] : cls->items())
        out += fmt::format("roofline {}: median {} of the copy ceiling\n", name,
                           num(number_of(c, "fraction_of_ceiling_median")));
    }
    if (!roof->reason.empty()) out += "roofline: " + roof->reason + "\n";
  }
  return out;
}

std::string profile_section(const json& stalls, std::string_view kernel_source) {
  std::string out;
  if (const json* hist = member(stalls, "histogram"); hist && hist->is_object()) {
    double total = 0;
    std::multimap<double, std::string, std::greater<>> by_count;
    for (const auto& [reason, n] : hist->items()) {
      if (!n.is_number()) continue;
      total += n.get<double>();
      by_count.emplace(n.get<double>(), reason);
    }
    out += "stall reasons (CUPTI PC sampling):";
    for (const auto& [n, reason] : by_count)
      out += fmt::format(" {} {}%;", reason, num(total > 0 ? 100.0 * n / total : 0.0));
    out += "\n";
  }
  if (const json* top = member(stalls, "top_lines"); top && top->is_array()) {
    for (const auto& t : *top) {
      const double line = number_of(t, "line");
      out += fmt::format("kernel.cu:{} {} ({} samples)", line > 0 ? static_cast<long>(line) : 0,
                         text_of(t, "reason", "?"), text_of(t, "samples", "?"));
      if (auto src = source_line(kernel_source, static_cast<long>(line)); line > 0 && !src.empty())
        out += " `" + src + "`";
      out += "\n";
    }
  }
  return out;
}

} // namespace kloop::feedback::detail
