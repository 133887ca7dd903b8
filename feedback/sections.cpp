// Feedback sections from gate evidence read through evaluator/evidence.h.
#include "feedback/sections.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "kernels/case_layout.h"
#include "kernels/registry.h"

namespace kloop::feedback::detail {

using evaluator::GateResult;
using evaluator::GateStatus;
namespace ev = evaluator::evidence;

std::string num(double v) {
  if (std::isnan(v)) return "n/a";
  return fmt::format("{:.3g}", v);
}

std::string value_text(double v) {
  return op::value_text(v);
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

std::string located(std::string_view kernel_source, long line) {
  std::string out = fmt::format("kernel.cu:{}", line);
  if (const std::string src = source_line(kernel_source, line); !src.empty())
    out += " `" + src + "`";
  return out;
}

std::string problems_note(const ev::Problems& problems) {
  if (problems.empty()) return "";
  std::string out = "(kloop could not read part of this gate's evidence: ";
  for (std::size_t i = 0; i < problems.size() && i < 3; ++i)
    out += (i ? "; " : "") + problems[i];
  if (problems.size() > 3) out += fmt::format("; {} more", problems.size() - 3);
  return out + ")\n";
}

double ulp_distance(DType dtype, double expected, double actual) {
  if (!std::isfinite(expected) || !std::isfinite(actual)) return std::nan("");
  // (mantissa bits, smallest normal exponent) of each dtype; spacing below the normal range is
  // the subnormal spacing 2^(min_exp - mantissa).
  const auto [mantissa, min_exp] = dtype == DType::kFloat16    ? std::pair{10, -14}
                                   : dtype == DType::kBFloat16 ? std::pair{7, -126}
                                                               : std::pair{23, -126};
  int exp = min_exp;
  if (expected != 0) {
    std::frexp(std::abs(expected), &exp); // |e| = m * 2^exp, m in [0.5, 1)
    exp = std::max(exp - 1, min_exp);
  }
  return std::abs(actual - expected) / std::ldexp(1.0, exp - mantissa);
}

namespace {

std::string status_line(const GateResult& g) {
  std::string out = fmt::format("- {}: {}", g.name, evaluator::gate_status_name(g.status));
  if (!g.reason.empty()) out += " - " + g.reason.substr(0, 400);
  return out + "\n";
}

} // namespace

std::string summary_section(const evaluator::PublicReport& report) {
  std::string out = fmt::format("verdict: {}\n", evaluator::verdict_name(report.verdict));
  for (const auto& g : report.gates)
    out += status_line(g);
  return out;
}

std::string format_section(const GateResult& g) {
  if (g.status == GateStatus::kPass) return "";
  ev::Problems p;
  const ev::FormatEvidence f = ev::FormatEvidence::read(g.evidence, p);
  std::string out;
  if (!f.outcome.empty()) out += fmt::format("reply outcome: {}", f.outcome);
  if (!f.stop_reason.empty())
    out += fmt::format("{}provider stop reason: {}", out.empty() ? "" : "; ", f.stop_reason);
  if (!out.empty()) out += "\n";
  out += (f.reason.empty() ? g.reason : f.reason) + "\n";
  out += fmt::format("fenced blocks found: {} code, {} json; the reply had {} bytes\n",
                     f.code_blocks, f.json_blocks, f.reply_bytes);
  return out + problems_note(p);
}

std::string contract_section(const GateResult& g) {
  if (g.status == GateStatus::kPass) return "";
  ev::Problems p;
  const ev::ContractEvidence c = ev::ContractEvidence::read(g.evidence, p);
  std::string out;
  for (const auto& e : c.errors)
    out +=
        fmt::format("manifest.json {}: {}\n", e.field.empty() ? "(top level)" : e.field, e.message);
  if (out.empty()) out = g.reason + "\n";
  return out + problems_note(p);
}

std::string build_section(const GateResult& g) {
  if (g.status == GateStatus::kPass) return ""; // the summary says so
  ev::Problems p;
  const ev::BuildEvidence b = ev::BuildEvidence::read(g.evidence, p);
  std::string out;
  for (const auto& msg : b.include_problems)
    out += "kernel.cu " + msg + "\n";
  if (!b.diagnostics.empty()) out += b.diagnostics + (b.diagnostics.back() == '\n' ? "" : "\n");
  if (out.empty()) out = g.reason + "\n";
  return out + problems_note(p);
}

std::string static_section(const GateResult& g) {
  ev::Problems p;
  const ev::StaticEvidence s = ev::StaticEvidence::read(g.evidence, p);
  std::string out;
  for (const auto& f : s.findings) {
    out += fmt::format("rule {}", f.kind.empty() ? "?" : f.kind);
    if (f.ptx_line > 0) out += fmt::format(" at PTX line {}", f.ptx_line);
    if (!f.ptx_text.empty()) out += " `" + f.ptx_text + "`";
    out += ": " + f.message + "\n";
  }
  for (const auto& [fn, r] : s.resources) {
    out += fmt::format("{}: {} registers, spill stores {} B, spill loads {} B, stack {} B, static "
                       "smem {} B\n",
                       fn, r.registers, r.spill_store_bytes, r.spill_load_bytes,
                       r.stack_frame_bytes, r.smem_bytes);
  }
  for (const auto& [fn, f] : s.sass_functions)
    if (f.local_loads > 0 || f.local_stores > 0)
      out += fmt::format("{}: SASS has {} local-memory loads and {} stores (LDL/STL)\n", fn,
                         f.local_loads, f.local_stores);
  if (out.empty() && !g.reason.empty()) out = g.reason + "\n";
  return out + problems_note(p);
}

namespace {

// "flat index 128 (row 0, column 128)" of the [rows, H] output.
std::string element_at(std::int64_t index, std::int64_t h) {
  if (h <= 0) return fmt::format("flat index {}", index);
  return fmt::format("flat index {} (row {}, column {})", index, index / h, index % h);
}

// The failing case as its operator describes it, with the tolerance of its dtype.
struct DescribedCase {
  op::CaseDescription d;
  op::Tolerance tol;
};

std::string comparison_lines(const ev::ComparisonEvidence& c, const DescribedCase* spec) {
  std::string out;
  const std::int64_t h = spec ? spec->d.width : 0;
  if (c.nonfinite_mismatches > 0)
    out += fmt::format("  first non-finite mismatch at {}; {} such element(s) (NaN/Inf position "
                       "or sign, or a non-finite output where the reference is finite)\n",
                       element_at(c.first_nonfinite_index, h), c.nonfinite_mismatches);
  if (c.worst_index >= 0 && (c.tolerance_violations > 0 || !c.pass)) {
    out +=
        fmt::format("  worst element: {}: expected {}, actual {}\n", element_at(c.worst_index, h),
                    value_text(c.worst_expected), value_text(c.worst_actual));
    const double err = std::abs(c.worst_actual - c.worst_expected);
    if (spec) {
      const op::Tolerance& t = spec->tol;
      const DType dt = spec->d.dtype;
      out += fmt::format("  error {} = {} ULP of {} at the expected value; tolerance atol {} + "
                         "rtol {} * |expected| = {} there",
                         num(err), num(ulp_distance(dt, c.worst_expected, c.worst_actual)),
                         dtype_name(dt), num(t.atol), num(t.rtol),
                         num(t.atol + t.rtol * std::abs(c.worst_expected)));
      out += fmt::format("; {} element(s) over it\n", c.tolerance_violations);
    } else {
      out += fmt::format("  error {}; {} element(s) over the tolerance\n", num(err),
                         c.tolerance_violations);
    }
  }
  std::string row;
  if (spec) row = fmt::format(" (row {}; allowed {})", c.worst_ratio_row, num(spec->tol.row_rtol));
  out += fmt::format("  figures: max abs err {}, max rel err {}, worst row relative error {}{}\n",
                     num(c.max_abs_err), num(c.max_rel_err), num(c.worst_row_ratio), row);
  return out;
}

// The operator whose contract the correctness evidence names ("reference_sha256" is the contract
// hash), else the first registered operator that reads the spec; nullptr when none does.
const op::Operator* operator_of(const GateResult& g, const nlohmann::json& spec) {
  if (const auto it = g.evidence.find("reference_sha256");
      it != g.evidence.end() && it->is_string())
    for (const op::Operator* o : op::operators())
      if (o->contract_sha256() == it->get<std::string>()) return o;
  for (const op::Operator* o : op::operators()) {
    try {
      (void)o->describe_case(spec);
      return o;
    } catch (const std::exception&) {
    }
  }
  return nullptr;
}

// The case as its operator describes it; nullopt for ad-hoc inputs or a spec no operator reads
// (noted in `p`).
std::optional<DescribedCase> describe(const GateResult& g, const ev::CaseEvidence& c,
                                      ev::Problems& p) {
  if (!c.spec.is_object()) return std::nullopt;
  const op::Operator* o = operator_of(g, c.spec);
  try {
    if (!o) throw std::invalid_argument("no registered operator reads this case spec");
    DescribedCase out{o->describe_case(c.spec), {}};
    const std::vector<int> written = op::written_tensors(o->declaration());
    out.tol = o->tolerance(out.d.dtype, written.empty() ? 0 : written.front());
    return out;
  } catch (const std::exception& e) {
    p.push_back(std::string("first_failure.spec: ") + e.what());
    return std::nullopt;
  }
}

std::string failing_case(const GateResult& g, const ev::CaseEvidence& c, ev::Problems& p) {
  const std::optional<DescribedCase> spec = describe(g, c, p);
  std::string out = "first failing public case: " + (c.name.empty() ? "(ad-hoc inputs)" : c.name);
  if (spec) out += " (family " + spec->d.family + ")";
  out += "\n";
  if (spec) out += spec->d.inputs;
  out += "  failed rule: " + (c.reason.empty() ? std::string("(no reason recorded)") : c.reason) +
         "\n";
  if (c.comparison && !c.comparison->pass)
    out += comparison_lines(*c.comparison, spec ? &*spec : nullptr);
  return out;
}

} // namespace

std::string correctness_section(const GateResult& g) {
  ev::Problems p;
  const ev::CorrectnessEvidence c = ev::CorrectnessEvidence::read(g.evidence, p);
  std::string out;
  if (c.passed || c.failed)
    out += fmt::format("public cases: {} passed, {} failed{}\n", c.passed.value_or(0),
                       c.failed.value_or(0),
                       c.failed.value_or(0) > 0 ? " (the run stops at the first failure)" : "");
  if (g.status == GateStatus::kPass) return (out.empty() ? "all public cases passed\n" : out);
  if (c.fault)
    out += fmt::format("the kernel faulted: {} ({}) in {} during case {}\n", c.fault->fault_class,
                       c.fault->cuda_error, c.fault->where,
                       c.fault->case_name.empty() ? "?" : c.fault->case_name);
  if (c.first_failure && !c.first_failure->pass) {
    out += failing_case(g, *c.first_failure, p);
  } else if (!c.fault) {
    out += g.reason.empty() ? std::string("no failing case recorded\n") : g.reason + "\n";
    if (!c.in_flight_case.empty() && g.status != GateStatus::kFail)
      out += "case in flight: " + c.in_flight_case + "\n";
  }
  return out + problems_note(p);
}

std::string sanitizer_section(const GateResult& g, std::string_view kernel_source) {
  ev::Problems p;
  const ev::SanitizerEvidence s = ev::SanitizerEvidence::read(g.evidence, p);
  std::string out, clean;
  for (const auto& t : s.tools) {
    if (t.outcome == "clean") {
      clean += (clean.empty() ? "" : ", ") + t.tool;
      continue;
    }
    out += fmt::format("{}: {}", t.tool, t.outcome);
    if (!t.reason.empty()) out += " - " + t.reason;
    out += "\n";
    for (const auto& h : t.hazards) {
      out += fmt::format("  {} {}", t.tool, h.kind.empty() ? "hazard" : h.kind);
      if (!h.function.empty()) out += " in " + h.function;
      if (h.line > 0) out += " at " + located(kernel_source, h.line);
      if (h.line2 > 0) out += " and " + located(kernel_source, h.line2);
      out += ": " + h.message;
      if (h.access_size > 0) out += fmt::format(" (access of {} bytes)", h.access_size);
      out += "\n";
    }
    if (t.hazard_count > static_cast<std::int64_t>(t.hazards.size()))
      out += fmt::format("  ({} more hazards not listed)\n",
                         t.hazard_count - static_cast<std::int64_t>(t.hazards.size()));
  }
  if (s.poison_status == "fail") out += "shared-memory poisoning: " + s.poison_reason + "\n";
  if (!clean.empty()) out += "clean: " + clean + "\n";
  if (out.empty()) out = g.reason.empty() ? "no findings\n" : g.reason + "\n";
  return out + problems_note(p);
}

namespace {

std::string benchmark_part(const GateResult& g) {
  ev::Problems p;
  const ev::BenchmarkEvidence b = ev::BenchmarkEvidence::read(g.evidence, p);
  std::string out;
  if (g.status != GateStatus::kPass && !g.reason.empty()) out += "benchmark: " + g.reason + "\n";
  if (b.summary) {
    const ev::BenchSummary& s = *b.summary;
    out += "vs the in-tree baseline: geomean speed-up ";
    out += s.geomean_speedup ? num(*s.geomean_speedup) : "n/a";
    if (s.ci_lo && s.ci_hi)
      out += fmt::format(" (95% interval {} to {})", num(*s.ci_lo), num(*s.ci_hi));
    out += fmt::format("; shape-states beyond the A/A noise floor: {} faster, {} slower, {} "
                       "indistinguishable",
                       s.faster, s.slower, s.indistinguishable);
    if (s.clears_noise_floor)
      out += *s.clears_noise_floor
                 ? "; clears the promotion rule (faster somewhere, slower nowhere)"
                 : "; does not clear the promotion rule (needs faster somewhere "
                   "and slower nowhere)";
    out += "\n";
  }
  // Slower states grouped by shape class: classes with the most slower states first, the worst
  // ratio first within a class.
  struct Slow {
    const ev::BenchShape* shape;
    const ev::BenchState* state;
  };
  std::map<std::string, std::vector<Slow>> slow;
  std::map<std::string, int> states_per_class;
  for (const auto& sh : b.shapes)
    for (const auto& st : sh.states) {
      ++states_per_class[sh.shape_class];
      if (st.decision == "slower") slow[sh.shape_class].push_back({&sh, &st});
    }
  std::vector<std::pair<std::string, std::vector<Slow>>> classes(slow.begin(), slow.end());
  std::stable_sort(classes.begin(), classes.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  if (!classes.empty())
    out += "slower than the baseline, by shape class (candidate/baseline kernel time ratio, its "
           "95% interval, the state's A/A noise floor):\n";
  for (auto& [cls, list] : classes) {
    std::stable_sort(list.begin(), list.end(), [](const Slow& a, const Slow& b) {
      return a.state->vs_baseline.ratio > b.state->vs_baseline.ratio;
    });
    out += fmt::format("  {} ({} of {} states slower):\n", cls.empty() ? "?" : cls, list.size(),
                       states_per_class[cls]);
    for (const Slow& s : list)
      out += fmt::format("    {} [{}, {}] {}: ratio {} [{}, {}], floor {}%; {} ms vs {} ms\n",
                         s.shape->dtype, s.shape->rows, s.shape->h, s.state->state,
                         fmt::format("{:.3f}", s.state->vs_baseline.ratio),
                         fmt::format("{:.3f}", s.state->vs_baseline.lo),
                         fmt::format("{:.3f}", s.state->vs_baseline.hi),
                         num(100.0 * s.state->noise_floor), num(s.state->candidate_ms),
                         num(s.state->baseline_ms));
  }
  return out + problems_note(p);
}

std::string roofline_part(const GateResult& g) {
  ev::Problems p;
  const ev::RooflineEvidence r = ev::RooflineEvidence::read(g.evidence, p);
  std::string out;
  if (g.status != GateStatus::kPass && !g.reason.empty()) out += "roofline: " + g.reason + "\n";
  if (!r.by_class.empty()) {
    out += "roofline, median fraction of the measured copy ceiling";
    if (r.copy_ceiling_tbps) out += " (" + num(*r.copy_ceiling_tbps) + " TB/s)";
    out += " per shape class:";
    for (const auto& [cls, c] : r.by_class)
      out += fmt::format(" {} {} ({} shapes);", cls, num(c.fraction_median), c.shapes);
    out.back() = '\n';
  }
  return out + problems_note(p);
}

} // namespace

std::string benchmark_section(const GateResult* bench, const GateResult* roof) {
  std::string head, tail;
  if (bench) head = benchmark_part(*bench);
  if (roof) tail = roofline_part(*roof);
  // The summary line first, then the roofline line (short), then the long list of slower states,
  // so that a cut at the budget drops the least useful states.
  const auto first_nl = head.find('\n');
  if (first_nl == std::string::npos) return head + tail;
  return head.substr(0, first_nl + 1) + tail + head.substr(first_nl + 1);
}

std::string profile_section(const ev::StallEvidence& s, std::string_view kernel_source) {
  std::string out;
  if (s.status != "ok" && s.histogram.empty()) {
    if (!s.reason.empty()) out += "stall sampling " + s.status + ": " + s.reason + "\n";
    return out;
  }
  // Stalled-and-not-issued counts are subsets of their reason's count: not listed again.
  std::int64_t total = 0;
  std::vector<std::pair<std::int64_t, std::string>> reasons;
  for (const auto& [name, n] : s.histogram) {
    const std::string r = ev::stall_reason_name(name);
    if (r.size() > 11 && r.substr(r.size() - 11) == "_not_issued") continue;
    total += n;
    reasons.emplace_back(n, r);
  }
  std::stable_sort(reasons.begin(), reasons.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (!reasons.empty()) {
    out += fmt::format("stall reasons (CUPTI PC sampling, {} samples):", total);
    for (std::size_t i = 0; i < reasons.size() && i < 8; ++i)
      out += fmt::format(
          " {} {}%;", reasons[i].second,
          num(total > 0 ? 100.0 * static_cast<double>(reasons[i].first) / static_cast<double>(total)
                        : 0.0));
    out.back() = '\n';
  }
  // Per source line: samples of the hottest PCs summed by line, each line's reasons with theirs.
  std::map<std::int64_t, std::map<std::string, std::int64_t>> by_line;
  std::map<std::int64_t, std::int64_t> line_total;
  for (const auto& l : s.top_lines) {
    by_line[l.line][ev::stall_reason_name(l.reason)] += l.samples;
    line_total[l.line] += l.samples;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> lines; // (samples, line)
  for (const auto& [line, n] : line_total)
    lines.emplace_back(n, line);
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (!lines.empty()) out += "hottest source lines (samples of the hottest PCs, by line):\n";
  for (const auto& [n, line] : lines) {
    out += "  " + (line > 0 ? located(kernel_source, line) : std::string("(no line info)"));
    out += fmt::format(": {} samples", n);
    if (total > 0)
      out += fmt::format(" ({}% of all)",
                         num(100.0 * static_cast<double>(n) / static_cast<double>(total)));
    std::vector<std::pair<std::int64_t, std::string>> rs;
    for (const auto& [r, k] : by_line[line])
      rs.emplace_back(k, r);
    std::stable_sort(rs.begin(), rs.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    out += ":";
    for (const auto& [k, r] : rs)
      out += fmt::format(" {} {};", r, k);
    out.back() = '\n';
  }
  return out;
}

} // namespace kloop::feedback::detail
