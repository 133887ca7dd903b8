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

// One colour per outcome, distinct in hue and lightness, so a chart reads without its tooltips:
// passed, failed, timed out, crashed, infrastructure error, not run (a gate that did not run: no
// device, or an earlier gate failed), pending (an iteration whose candidate is waiting for
// device validation: not judged, never drawn in a failure colour), no candidate (the provider
// gave no usable reply) and absent (no such gate recorded).
struct Outcome {
  const char* css;    // class name on the element ("pass", "not_run", ...)
  const char* label;  // legend text
  const char* colour; // fill
};
constexpr Outcome kPass{"pass", "passed", "#2e7d32"};
constexpr Outcome kFail{"fail", "failed (rejected)", "#c62828"};
constexpr Outcome kTimeout{"timeout", "timed out", "#ef6c00"};
constexpr Outcome kCrashed{"crashed", "crashed", "#6a1b9a"};
constexpr Outcome kInfra{"infra_error", "infrastructure error (kloop's)", "#1565c0"};
constexpr Outcome kNotRun{"not_run", "not run", "#bdbdbd"};
constexpr Outcome kPending{"pending", "pending device validation (not judged)", "#fbc02d"};
constexpr Outcome kNoCandidate{"no_candidate", "no candidate (provider error)", "#5d4037"};
constexpr Outcome kAbsent{"absent", "not recorded", "#f0f0f0"};

const Outcome& outcome(GateCode s) {
  switch (s) {
  case GateCode::kPass:
    return kPass;
  case GateCode::kFail:
    return kFail;
  case GateCode::kTimeout:
    return kTimeout;
  case GateCode::kCrashed:
    return kCrashed;
  case GateCode::kNotRun:
    return kNotRun;
  case GateCode::kInfraError:
    return kInfra;
  }
  return kAbsent;
}

// An iteration's colour: its best candidate's verdict (pass over pending over reject), or no
// candidate.
const Outcome& outcome(const IterationDetail& it) {
  bool pass = false, pending = false;
  for (const auto& c : it.candidates) {
    pass |= c.candidate.verdict == VerdictCode::kPass;
    pending |= c.candidate.verdict == VerdictCode::kPendingDeviceValidation;
  }
  if (it.candidates.empty()) return kNoCandidate;
  return pass ? kPass : pending ? kPending : kFail;
}

// A legend (id "<chart>-legend"): one swatch per outcome, as an inline SVG so its colour is the
// same fill the chart uses.
std::string legend(const char* chart, std::initializer_list<const Outcome*> outcomes) {
  std::string s = fmt::format("<div class=\"legend\" id=\"{}-legend\">", chart);
  for (const Outcome* o : outcomes)
    s += fmt::format("<span class=\"legend-entry\"><svg width=\"14\" height=\"14\">"
                     "<rect class=\"swatch {}\" width=\"14\" height=\"14\" fill=\"{}\"/></svg> "
                     "{}</span>",
                     o->css, o->colour, o->label);
  return s + "</div>\n";
}

std::string missing(const char* id, const std::string& why) {
  return fmt::format("<p class=\"missing\" id=\"{}-missing\">{}</p>\n", id, esc(why));
}

std::string no_device_reason(const SessionDetail& d) {
  return d.session.device_name.empty() ? "not run: no device" : "not recorded";
}

// A tick step for an axis spanning `span` units: 1, 2 or 5 times a power of ten, for 4-10 ticks.
double tick_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 6;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

// Iterations as bars along a time axis (seconds since the first iteration started, by the
// iterations' recorded wall times), coloured by outcome, with a legend.
std::string timeline(const SessionDetail& d) {
  if (d.iterations.empty()) return missing("timeline", "no iterations recorded");
  double total_s = 0;
  for (const auto& it : d.iterations)
    total_s += std::max(it.iteration.wall_ms, 1.0) / 1000;
  constexpr double kLeft = 10, kWidth = 960;
  const auto X = [&](double t) { return kLeft + kWidth * t / total_s; };
  std::string s = "<svg id=\"timeline\" width=\"1000\" height=\"86\" role=\"img\">\n";
  double t = 0;
  for (const auto& it : d.iterations) {
    const double w = std::max(it.iteration.wall_ms, 1.0) / 1000;
    const Outcome& o = outcome(it);
    s += fmt::format(
        "<rect class=\"iteration {}\" x=\"{:.1f}\" y=\"18\" width=\"{:.1f}\" height=\"30\" "
        "fill=\"{}\" stroke=\"#fff\"><title>iteration {} ({:.1f} s): {}</title></rect>"
        "<text x=\"{:.1f}\" y=\"13\" font-size=\"11\">#{}</text>\n",
        o.css, X(t), X(t + w) - X(t), o.colour, it.iteration.index + 1, it.iteration.wall_ms / 1000,
        o.label, X(t) + 2, it.iteration.index + 1);
    t += w;
  }
  // The time axis: a baseline with ticks every tick_step seconds.
  s += fmt::format("<g class=\"axis\" id=\"timeline-axis\"><line x1=\"{0:.1f}\" y1=\"52\" "
                   "x2=\"{1:.1f}\" y2=\"52\" stroke=\"#000\"/>",
                   kLeft, kLeft + kWidth);
  const double step = tick_step(total_s);
  for (double tick = 0; tick <= total_s * (1 + 1e-9); tick += step)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"52\" x2=\"{0:.1f}\" y2=\"57\" stroke=\"#000\"/>"
                     "<text class=\"tick\" x=\"{0:.1f}\" y=\"69\" font-size=\"10\" "
                     "text-anchor=\"middle\">{1:g} s</text>",
                     X(tick), tick);
  s += fmt::format("<text x=\"{:.1f}\" y=\"83\" font-size=\"11\" text-anchor=\"middle\">"
                   "seconds since the session's first iteration started (total {:.1f} s)</text>"
                   "</g>\n",
                   kLeft + kWidth / 2, total_s);
  return s + "</svg>\n" + legend("timeline", {&kPass, &kFail, &kPending, &kNoCandidate});
}

// The gate grid: one row per candidate (with its iteration's duration and how it was built), one
// column per gate, coloured by status, with a legend.
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
  constexpr int kFirst = 220; // the first gate column; left of it: candidate, time, sandbox
  std::string s = fmt::format("<svg id=\"gates\" width=\"{}\" height=\"{}\" role=\"img\">\n",
                              kFirst + 100 * names.size(), 40 + 22 * rows);
  s += "<text x=\"0\" y=\"20\" font-size=\"11\">candidate</text><text x=\"92\" y=\"20\" "
       "font-size=\"11\">time</text><text x=\"142\" y=\"20\" font-size=\"11\">sandbox</text>\n";
  for (std::size_t k = 0; k < names.size(); ++k)
    s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"11\">{}</text>\n", kFirst + 100 * k,
                     esc(names[k]));
  int r = 0;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates) {
      const int y = 30 + 22 * r++;
      const std::string sandbox = c.sandbox();
      s += fmt::format("<text x=\"0\" y=\"{0}\" font-size=\"11\">iter {1} cand {2}</text>"
                       "<text class=\"duration\" x=\"92\" y=\"{0}\" font-size=\"11\">{3:.1f} "
                       "s</text><text class=\"sandbox\" x=\"142\" y=\"{0}\" "
                       "font-size=\"11\">{4}</text>\n",
                       y + 14, it.iteration.index + 1, c.candidate.id, it.iteration.wall_ms / 1000,
                       sandbox.empty() ? "not built" : esc(sandbox));
      for (std::size_t k = 0; k < names.size(); ++k) {
        const GateRecord* g = c.gate(names[k]);
        const Outcome& o = g ? outcome(g->status) : kAbsent;
        s += fmt::format(
            "<rect class=\"gate {}\" x=\"{}\" y=\"{}\" width=\"94\" height=\"18\" fill=\"{}\">"
            "<title>{}: {} {}</title></rect>\n",
            g ? name(g->status) : "absent", kFirst + 100 * k, y, o.colour, esc(names[k]),
            g ? name(g->status) : "absent", g ? esc(g->reason) : "");
      }
    }
  return s + "</svg>\n" +
         legend("gates", {&kPass, &kFail, &kTimeout, &kCrashed, &kInfra, &kNotRun, &kAbsent});
}

std::string roofline(const SessionDetail& d) {
  struct Pt {
    double ai, gbps, ceil;
    std::int64_t id;
  };
  std::vector<Pt> pts;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates)
      if (const auto* t = c.telemetry_of("roofline"); t && t->data.is_object()) {
        const auto ai = t->data.value("arith_intensity", nlohmann::json());
        const auto gbps = t->data.value("achieved_gbps", nlohmann::json());
        const auto ceiling = t->data.value("ceiling_gbps", nlohmann::json());
        if (ai.is_number() && gbps.is_number()) // an edited row may hold anything
          pts.push_back({ai.get<double>(), gbps.get<double>(),
                         ceiling.is_number() ? ceiling.get<double>() : 0.0, c.candidate.id});
      }
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

// A checker-coverage run (mutation/store_report.h): its recorded summary, the lines `kloop show`
// prints, in a <pre id="checker-coverage">.
std::string checker_coverage(const SessionDetail& d) {
  return "<h2>Checker coverage (mutation analysis of the evaluator)</h2>\n"
         "<pre id=\"checker-coverage\">" +
         esc(checker_coverage_text(d)) + "</pre>\n";
}

} // namespace

std::string html_escape(std::string_view raw) {
  return esc(raw);
}

std::string render_html_report(const SessionDetail& d) {
  const auto& s = d.session;
  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>kloop session {0}</title>\n<style>body{{font-family:sans-serif;margin:24px;}}"
      "h2{{margin-top:28px;}} .missing{{color:#777;font-style:italic;}} "
      "table{{border-collapse:collapse}} td{{padding:2px 10px}} "
      ".legend{{font-size:12px;margin:4px 0 0 10px}} .legend-entry{{margin-right:14px}} "
      ".legend svg{{vertical-align:middle}}</style></head><body>\n"
      "<h1>kloop session {0}: {1}</h1>\n<table id=\"summary\">"
      "<tr><td>provider/model</td><td>{2}/{3}</td></tr>"
      "<tr><td>status</td><td>{4}</td></tr><tr><td>verdict</td><td>{5}</td></tr>"
      "<tr><td>budget</td><td>{6} iterations ({7} used)</td></tr>"
      "<tr><td>device</td><td>{8}</td></tr><tr><td>started</td><td>{9}</td></tr>"
      "<tr><td>promotion</td><td>{10}</td></tr>"
      "<tr><td>sandbox</td><td id=\"sandbox\">{11}</td></tr></table>\n",
      s.id, esc(s.operator_name), esc(s.provider), esc(s.model), name(s.status),
      s.verdict ? name(*s.verdict) : "none", s.budget, d.iterations.size(),
      s.device_name.empty() ? "none" : esc(s.device_name), esc(s.started_at),
      d.promotion ? esc(std::string(name(d.promotion->decision)) + ": " + d.promotion->reason)
                  : "none",
      d.sandboxes().empty() ? std::string("no candidate was built")
                            : esc(sandbox_text(d.sandboxes())));
  if (session_kind(s) == "checker-coverage") h += checker_coverage(d);
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
