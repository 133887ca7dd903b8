#include "store/html_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/core.h>

#include "store/phase_view.h"
#include "store/store.h"
#include "store/text_view.h"

namespace kloop::store {
namespace {

// HTML-escapes `raw`; bytes that are not valid UTF-8 (an edited or damaged row) become U+FFFD,
// never raw bytes in a page that declares charset utf-8.
std::string esc(std::string_view raw) {
  const std::string s = replace_invalid_utf8(raw);
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out.push_back(c);
    }
  }
  return out;
}

const char* color(GateCode s) {
  switch (s) {
  case GateCode::kPass:
    return "#2e7d32";
  case GateCode::kFail:
    return "#c62828";
  case GateCode::kTimeout:
    return "#ef6c00";
  case GateCode::kCrashed:
    return "#6a1b9a";
  case GateCode::kNotRun:
    return "#9e9e9e";
  case GateCode::kInfraError:
    return "#1565c0";
  }
  return "#000";
}

std::string missing(const char* id, const std::string& why) {
  return fmt::format("<p class=\"missing\" id=\"{}-missing\">{}</p>\n", id, esc(why));
}

std::string no_device_reason(const SessionDetail& d) {
  return d.session.device_name.empty() ? "not run: no device" : "not recorded";
}

std::string timeline(const SessionDetail& d) {
  if (d.iterations.empty()) return missing("timeline", "no iterations recorded");
  double total = 0;
  for (const auto& it : d.iterations)
    total += std::max(it.iteration.wall_ms, 1.0);
  std::string s = "<svg id=\"timeline\" width=\"1000\" height=\"70\" role=\"img\">\n";
  double x = 0;
  for (const auto& it : d.iterations) {
    const double w = 1000.0 * std::max(it.iteration.wall_ms, 1.0) / total;
    bool pass = false;
    for (const auto& c : it.candidates)
      pass |= c.candidate.verdict == VerdictCode::kPass;
    s += fmt::format(
        "<rect class=\"iteration\" x=\"{:.1f}\" y=\"10\" width=\"{:.1f}\" height=\"30\" "
        "fill=\"{}\" stroke=\"#fff\"><title>iteration {} ({:.1f} s)</title></rect>"
        "<text x=\"{:.1f}\" y=\"58\" font-size=\"11\">#{}</text>\n",
        x, w, pass ? "#2e7d32" : "#c62828", it.iteration.index + 1, it.iteration.wall_ms / 1000,
        x + 2, it.iteration.index + 1);
    x += w;
  }
  return s + "</svg>\n";
}

std::string gates(const SessionDetail& d) {
  std::vector<std::string> names;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates)
      for (const auto& g : c.gates)
        if (std::find(names.begin(), names.end(), g.name) == names.end()) names.push_back(g.name);
  if (names.empty()) return missing("gates", "no gate results recorded");
  int rows = 0;
  for (const auto& it : d.iterations)
    rows += static_cast<int>(it.candidates.size());
  std::string s = fmt::format("<svg id=\"gates\" width=\"{}\" height=\"{}\" role=\"img\">\n",
                              120 + 100 * names.size(), 40 + 22 * rows);
  for (std::size_t k = 0; k < names.size(); ++k)
    s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"11\">{}</text>\n", 120 + 100 * k,
                     esc(names[k]));
  int r = 0;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates) {
      const int y = 30 + 22 * r++;
      s += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"11\">iter {} cand {}</text>\n", y + 14,
                       it.iteration.index + 1, c.candidate.id);
      for (std::size_t k = 0; k < names.size(); ++k) {
        const GateRecord* g = c.gate(names[k]);
        s += fmt::format(
            "<rect class=\"gate {}\" x=\"{}\" y=\"{}\" width=\"94\" height=\"18\" fill=\"{}\">"
            "<title>{}: {} {}</title></rect>\n",
            g ? name(g->status) : "absent", 120 + 100 * k, y, g ? color(g->status) : "#eee",
            esc(names[k]), g ? name(g->status) : "absent", g ? esc(g->reason) : "");
      }
    }
  return s + "</svg>\n";
}

std::string roofline(const SessionDetail& d) {
  struct Pt {
    double ai, gbps, ceil;
    std::int64_t id;
  };
  std::vector<Pt> pts;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates)
      if (const auto* t = c.telemetry_of("roofline"))
        if (t->data.contains("arith_intensity") && t->data.contains("achieved_gbps"))
          pts.push_back({t->data["arith_intensity"].get<double>(),
                         t->data["achieved_gbps"].get<double>(), t->data.value("ceiling_gbps", 0.0),
                         c.candidate.id});
  if (pts.empty()) return missing("roofline", "no roofline data (" + no_device_reason(d) + ")");
  double ceil = 0, maxy = 0;
  for (const auto& p : pts)
    ceil = std::max(ceil, p.ceil), maxy = std::max(maxy, p.gbps);
  maxy = std::max(maxy, ceil) * 1.1;
  // x: log10(arith intensity) in [-2, 2] -> [60, 560]; y: GB/s linear -> [260, 20].
  auto X = [](double ai) { return 60 + 125 * (std::log10(std::max(ai, 1e-2)) + 2); };
  auto Y = [maxy](double v) { return 260 - 240 * v / maxy; };
  std::string s = "<svg id=\"roofline\" width=\"600\" height=\"300\" role=\"img\">\n"
                  "<line x1=\"60\" y1=\"260\" x2=\"560\" y2=\"260\" stroke=\"#000\"/>"
                  "<line x1=\"60\" y1=\"20\" x2=\"60\" y2=\"260\" stroke=\"#000\"/>\n"
                  "<text x=\"250\" y=\"290\" font-size=\"11\">arithmetic intensity (flop/byte, "
                  "log)</text><text x=\"0\" y=\"15\" font-size=\"11\">GB/s</text>\n";
  if (ceil > 0)
    s += fmt::format("<line class=\"ceiling\" x1=\"60\" y1=\"{0:.1f}\" x2=\"560\" y2=\"{0:.1f}\" "
                     "stroke=\"#555\" stroke-dasharray=\"4\"/><text x=\"420\" y=\"{1:.1f}\" "
                     "font-size=\"11\">copy ceiling {2:.0f} GB/s</text>\n",
                     Y(ceil), Y(ceil) - 4, ceil);
  for (const auto& p : pts)
    s += fmt::format("<circle class=\"candidate\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" "
                     "fill=\"#1565c0\"><title>candidate {}: {:.0f} GB/s</title></circle>\n",
                     X(p.ai), Y(p.gbps), p.id, p.gbps);
  return s + "</svg>\n";
}

std::string speedup(const SessionDetail& d) {
  struct Pt {
    int idx;
    double v, lo, hi;
    bool has_interval;
  };
  std::vector<Pt> pts;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates)
      if (c.candidate.speedup)
        pts.push_back({it.iteration.index, *c.candidate.speedup,
                       c.candidate.speedup_lo.value_or(*c.candidate.speedup),
                       c.candidate.speedup_hi.value_or(*c.candidate.speedup),
                       c.candidate.speedup_lo.has_value() && c.candidate.speedup_hi.has_value()});
  if (pts.empty()) return missing("speedup", "no benchmark data (" + no_device_reason(d) + ")");
  double maxy = 1.0;
  int maxi = 1;
  for (const auto& p : pts)
    maxy = std::max(maxy, p.hi), maxi = std::max(maxi, p.idx + 1);
  maxy *= 1.1;
  auto X = [maxi](int i) { return 60 + 480.0 * (i + 0.5) / maxi; };
  auto Y = [maxy](double v) { return 260 - 240 * v / maxy; };
  std::string s = fmt::format(
      "<svg id=\"speedup\" width=\"600\" height=\"300\" role=\"img\">\n"
      "<line x1=\"60\" y1=\"260\" x2=\"560\" y2=\"260\" stroke=\"#000\"/>"
      "<line x1=\"60\" y1=\"20\" x2=\"60\" y2=\"260\" stroke=\"#000\"/>\n"
      "<line class=\"parity\" x1=\"60\" y1=\"{0:.1f}\" x2=\"560\" y2=\"{0:.1f}\" stroke=\"#999\" "
      "stroke-dasharray=\"3\"/><text x=\"0\" y=\"15\" font-size=\"11\">speed-up vs baseline "
      "(x)</text><text x=\"260\" y=\"290\" font-size=\"11\">iteration</text>\n",
      Y(1.0));
  for (const auto& p : pts) {
    // No stored interval: the point alone, and the tooltip says so (no invented [v, v]).
    if (p.has_interval)
      s += fmt::format("<line class=\"interval\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                       "y2=\"{2:.1f}\" stroke=\"#333\"/>",
                       X(p.idx), Y(p.lo), Y(p.hi));
    s += fmt::format("<circle class=\"speedup-point\" cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"4\" "
                     "fill=\"#ef6c00\"><title>iteration {2}: {3:.2f}x {4}</title></circle>\n",
                     X(p.idx), Y(p.v), p.idx + 1, p.v,
                     p.has_interval
                         ? fmt::format("[{:.2f}, {:.2f}] (within-run 95 % interval)", p.lo, p.hi)
                         : std::string("(no interval recorded)"));
  }
  return s + "</svg>\n";
}

std::string stalls(const SessionDetail& d) {
  std::map<std::string, double> hist;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates)
      if (const auto* t = c.telemetry_of("stall_reasons"))
        for (auto e = t->data.begin(); e != t->data.end(); ++e)
          if (e.value().is_number()) hist[e.key()] += e.value().get<double>();
  if (hist.empty())
    return missing("stalls", "no stall-reason samples (" + no_device_reason(d) + ")");
  double maxv = 0;
  for (const auto& [k, v] : hist)
    maxv = std::max(maxv, v);
  std::string s = fmt::format("<svg id=\"stalls\" width=\"600\" height=\"{}\" role=\"img\">\n",
                              20 + 24 * hist.size());
  int r = 0;
  for (const auto& [k, v] : hist) {
    const int y = 10 + 24 * r++;
    s += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"11\">{}</text><rect class=\"stall\" "
                     "x=\"160\" y=\"{}\" width=\"{:.1f}\" height=\"18\" fill=\"#6a1b9a\">"
                     "<title>{}: {:.0f}</title></rect>\n",
                     y + 13, esc(k), y, 400 * v / maxv, esc(k), v);
  }
  return s + "</svg>\n";
}

// The sealed holdout, as `kloop show` lists it (holdout_lines): one row per run or unrun
// commitment with the full commitment hash, suite version, status, cases passed/total, whether
// the commitment was verified and the suite retired.
std::string holdout(const SessionDetail& d) {
  const auto lines = holdout_lines(d);
  if (lines.empty()) return missing("holdout", "no sealed holdout recorded");
  std::string s = "<table id=\"holdout\"><tr><th>candidate</th><th>commitment sha256</th>"
                  "<th>suite version</th><th>status</th><th>cases passed/total</th>"
                  "<th>commitment verified</th><th>retired</th></tr>\n";
  const auto yes_no = [](const std::optional<bool>& v, const char* none) {
    return v ? (*v ? "yes" : "NO") : none;
  };
  for (const auto& l : lines)
    s += fmt::format(
        "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        l.candidate_id ? std::to_string(*l.candidate_id) : "none",
        l.commitment_recorded ? esc(l.commitment_sha256) : "not recorded",
        l.commitment_recorded && !l.suite_version.empty() ? esc(l.suite_version) : "?",
        esc(l.status),
        l.passed && l.total ? fmt::format("{}/{}", *l.passed, *l.total) : std::string("-"),
        yes_no(l.commitment_verified, l.candidate_id ? "not checked" : "-"),
        yes_no(l.retired, "-"));
  return s + "</table>\n";
}

// Where the candidates' time went (phase_view.h): one row per phase group and nested phase.
std::string phases(const SessionDetail& d) {
  const PhaseSummary s = phase_summary(d);
  if (s.candidates == 0) return missing("phases", "no phase timings recorded");
  std::string h = fmt::format(
      "<p>{} candidate(s), {:.1f} s of evaluation, {:.1f} s per candidate (overlapping phases can "
      "add up to more)</p>\n<table id=\"phases\"><tr><th>phase</th><th>total s</th>"
      "<th>per candidate s</th><th>share</th><th>runs</th><th>benchmark states</th></tr>\n",
      s.candidates, s.wall_ms / 1000, s.wall_ms / 1000 / s.candidates);
  for (const auto& t : s.totals) {
    std::string states;
    if (t.states > 0)
      states = fmt::format("{} states, {:.1f} rounds per state, stop {}", t.states,
                           static_cast<double>(t.rounds) / t.states, t.stop.dump());
    h += fmt::format("<tr class=\"{}\"><td>{}{}</td><td>{:.2f}</td><td>{:.3f}</td><td>{:.0f} %"
                     "</td><td>{}</td><td>{}</td></tr>\n",
                     t.nested ? "nested" : "group", t.nested ? "&nbsp;&nbsp;" : "", esc(t.name),
                     t.total_ms / 1000, t.candidates ? t.total_ms / 1000 / t.candidates : 0.0,
                     s.wall_ms > 0 ? 100.0 * t.total_ms / s.wall_ms : 0.0, t.runs, esc(states));
  }
  return h + "</table>\n";
}

} // namespace

std::string render_html_report(const SessionDetail& d) {
  const auto& s = d.session;
  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>kloop session {0}</title>\n<style>body{{font-family:sans-serif;margin:24px;}}"
      "h2{{margin-top:28px;}} .missing{{color:#777;font-style:italic;}} "
      "table{{border-collapse:collapse}} td{{padding:2px 10px}}</style></head><body>\n"
      "<h1>kloop session {0}: {1}</h1>\n<table id=\"summary\">"
      "<tr><td>provider/model</td><td>{2}/{3}</td></tr>"
      "<tr><td>status</td><td>{4}</td></tr><tr><td>verdict</td><td>{5}</td></tr>"
      "<tr><td>budget</td><td>{6} iterations ({7} used)</td></tr>"
      "<tr><td>device</td><td>{8}</td></tr><tr><td>started</td><td>{9}</td></tr>"
      "<tr><td>promotion</td><td>{10}</td></tr></table>\n",
      s.id, esc(s.operator_name), esc(s.provider), esc(s.model), name(s.status),
      s.verdict ? name(*s.verdict) : "none", s.budget, d.iterations.size(),
      s.device_name.empty() ? "none" : esc(s.device_name), esc(s.started_at),
      d.promotion ? esc(std::string(name(d.promotion->decision)) + ": " + d.promotion->reason)
                  : "none");
  h += "<h2>Timeline</h2>\n" + timeline(d);
  h += "<h2>Gate outcomes per iteration</h2>\n" + gates(d);
  h += "<h2>Roofline position of each candidate</h2>\n" + roofline(d);
  h += "<h2>Speed-up per iteration (with interval)</h2>\n" + speedup(d);
  h += "<h2>Stall reasons (CUPTI PC sampling)</h2>\n" + stalls(d);
  h += "<h2>Where the time went</h2>\n" + phases(d);
  h += "<h2>Sealed holdout</h2>\n" + holdout(d);
  return h + "</body></html>\n";
}

} // namespace kloop::store
