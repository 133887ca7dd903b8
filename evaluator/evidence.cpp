// Readers and writers of the typed gate evidence (evidence.h).
#include "evaluator/evidence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace kloop::evaluator::evidence {
namespace {

using nlohmann::json;

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// The member `key` of `o`, or nullptr when `o` is not an object, lacks it, or holds null.
const json* find(const json& o, std::string_view key) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

void wrong(Problems& p, const std::string& path, std::string_view key, const char* expected,
           const json& got) {
  p.push_back(fmt::format("{}: expected {}, got {}", join(path, key), expected, got.type_name()));
}

bool integer(const json& o, std::string_view key, const std::string& path, Problems& p,
             std::int64_t& out) {
  const json* v = find(o, key);
  if (!v) return false;
  if (!v->is_number_integer()) {
    wrong(p, path, key, "an integer", *v);
    return false;
  }
  out = v->get<std::int64_t>();
  return true;
}

bool integer(const json& o, std::string_view key, const std::string& path, Problems& p, int& out) {
  std::int64_t v = 0;
  if (!integer(o, key, path, p, v)) return false;
  out = static_cast<int>(std::clamp<std::int64_t>(v, std::numeric_limits<int>::min(),
                                                  std::numeric_limits<int>::max()));
  return true;
}

// A number, or the texts "nan", "inf", "-inf" the correctness core writes for non-finite values.
bool real(const json& o, std::string_view key, const std::string& path, Problems& p, double& out) {
  const json* v = find(o, key);
  if (!v) return false;
  if (v->is_number()) {
    out = v->get<double>();
    return true;
  }
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "nan")
      out = std::numeric_limits<double>::quiet_NaN();
    else if (s == "inf")
      out = std::numeric_limits<double>::infinity();
    else if (s == "-inf")
      out = -std::numeric_limits<double>::infinity();
    else {
      p.push_back(fmt::format("{}: expected a number, got the text \"{}\"", join(path, key), s));
      return false;
    }
    return true;
  }
  wrong(p, path, key, "a number", *v);
  return false;
}

std::optional<double> real(const json& o, std::string_view key, const std::string& path,
                           Problems& p) {
  double v = 0;
  if (!real(o, key, path, p, v)) return std::nullopt;
  return v;
}

bool text(const json& o, std::string_view key, const std::string& path, Problems& p,
          std::string& out) {
  const json* v = find(o, key);
  if (!v) return false;
  if (!v->is_string()) {
    wrong(p, path, key, "a string", *v);
    return false;
  }
  out = v->get<std::string>();
  return true;
}

bool boolean(const json& o, std::string_view key, const std::string& path, Problems& p, bool& out) {
  const json* v = find(o, key);
  if (!v) return false;
  if (!v->is_boolean()) {
    wrong(p, path, key, "true or false", *v);
    return false;
  }
  out = v->get<bool>();
  return true;
}

const json* object(const json& o, std::string_view key, const std::string& path, Problems& p) {
  const json* v = find(o, key);
  if (!v) return nullptr;
  if (!v->is_object()) {
    wrong(p, path, key, "an object", *v);
    return nullptr;
  }
  return v;
}

const json* array(const json& o, std::string_view key, const std::string& path, Problems& p) {
  const json* v = find(o, key);
  if (!v) return nullptr;
  if (!v->is_array()) {
    wrong(p, path, key, "an array", *v);
    return nullptr;
  }
  return v;
}

std::string element(const std::string& path, std::string_view key, std::size_t i) {
  return fmt::format("{}[{}]", join(path, key), i);
}

// Evidence of a gate that was never reached is {} (or null in old records); anything else that is
// not an object is a problem.
bool evidence_object(const json& evidence, Problems& p) {
  if (evidence.is_object()) return true;
  if (!evidence.is_null())
    p.push_back(fmt::format("evidence: expected an object, got {}", evidence.type_name()));
  return false;
}

} // namespace

// ---- format ----

json FormatEvidence::to_json() const {
  return {{"outcome", outcome},         {"reason", reason},           {"code_blocks", code_blocks},
          {"json_blocks", json_blocks}, {"reply_bytes", reply_bytes}, {"stop_reason", stop_reason}};
}

FormatEvidence FormatEvidence::read(const json& ev, Problems& p) {
  FormatEvidence f;
  if (!evidence_object(ev, p)) return f;
  text(ev, "outcome", "", p, f.outcome);
  text(ev, "reason", "", p, f.reason);
  integer(ev, "code_blocks", "", p, f.code_blocks);
  integer(ev, "json_blocks", "", p, f.json_blocks);
  integer(ev, "reply_bytes", "", p, f.reply_bytes);
  text(ev, "stop_reason", "", p, f.stop_reason);
  return f;
}

// ---- contract ----

json ContractEvidence::to_json() const {
  json list = json::array();
  for (const auto& e : errors)
    list.push_back({{"field", e.field}, {"message", e.message}});
  return {{"errors", list}};
}

ContractEvidence ContractEvidence::read(const json& ev, Problems& p) {
  ContractEvidence c;
  if (!evidence_object(ev, p)) return c;
  if (const json* list = array(ev, "errors", "", p)) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string at = element("", "errors", i);
      Error e;
      if (!(*list)[i].is_object() || !text((*list)[i], "message", at, p, e.message)) {
        p.push_back(at + ": expected {\"field\", \"message\"}");
        continue;
      }
      text((*list)[i], "field", at, p, e.field);
      c.errors.push_back(std::move(e));
    }
  }
  return c;
}

// ---- build ----

void BuildEvidence::write_to(json& ev) const {
  if (!include_problems.empty()) ev["include_problems"] = include_problems;
  if (!diagnostics.empty()) ev["diagnostics"] = diagnostics;
}

BuildEvidence BuildEvidence::read(const json& ev, Problems& p) {
  BuildEvidence b;
  if (!evidence_object(ev, p)) return b;
  if (const json* list = array(ev, "include_problems", "", p)) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      if ((*list)[i].is_string())
        b.include_problems.push_back((*list)[i].get<std::string>());
      else
        p.push_back(element("", "include_problems", i) + ": expected a string, got " +
                    (*list)[i].type_name());
    }
  }
  text(ev, "diagnostics", "", p, b.diagnostics);
  return b;
}

// ---- static ----

json StaticFinding::to_json() const {
  return {{"ptx_line", ptx_line}, {"kind", kind}, {"message", message}, {"ptx_text", ptx_text}};
}

StaticFinding static_finding(const PtxFinding& f, std::string_view ptx) {
  StaticFinding s{f.line, f.kind, f.message, ""};
  if (f.line <= 0) return s;
  std::size_t pos = 0;
  for (int l = 1; l < f.line && pos != std::string_view::npos; ++l) {
    pos = ptx.find('\n', pos);
    if (pos != std::string_view::npos) ++pos;
  }
  if (pos == std::string_view::npos || pos >= ptx.size()) return s;
  std::string_view line = ptx.substr(pos, ptx.find('\n', pos) - pos);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
    line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
    line.remove_suffix(1);
  for (const char c : line.substr(0, 160)) // tabs and runs of spaces read as one space
    if (!((c == ' ' || c == '\t') && !s.ptx_text.empty() && s.ptx_text.back() == ' '))
      s.ptx_text.push_back(c == '\t' ? ' ' : c);
  return s;
}

StaticEvidence StaticEvidence::read(const json& ev, Problems& p) {
  StaticEvidence s;
  if (!evidence_object(ev, p)) return s;
  if (const json* res = object(ev, "resources", "", p)) {
    for (const auto& [fn, r] : res->items()) {
      const std::string at = join("resources", fn);
      if (!r.is_object()) {
        p.push_back(at + ": expected an object, got " + std::string(r.type_name()));
        continue;
      }
      PtxasResources x;
      integer(r, "registers", at, p, x.registers);
      integer(r, "barriers", at, p, x.barriers);
      std::int64_t v = 0;
      if (integer(r, "stack_frame_bytes", at, p, v)) x.stack_frame_bytes = v;
      if (integer(r, "spill_store_bytes", at, p, v)) x.spill_store_bytes = v;
      if (integer(r, "spill_load_bytes", at, p, v)) x.spill_load_bytes = v;
      if (integer(r, "smem_bytes", at, p, v)) x.smem_bytes = v;
      s.resources[fn] = x;
    }
  }
  if (const json* list = array(ev, "findings", "", p)) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& f = (*list)[i];
      const std::string at = element("", "findings", i);
      StaticFinding x;
      if (!f.is_object() || !text(f, "message", at, p, x.message)) {
        p.push_back(at + ": expected a finding with a message");
        continue;
      }
      integer(f, "ptx_line", at, p, x.ptx_line);
      text(f, "kind", at, p, x.kind);
      text(f, "ptx_text", at, p, x.ptx_text);
      s.findings.push_back(std::move(x));
    }
  }
  if (const json* sass = object(ev, "sass", "", p)) {
    text(*sass, "status", "sass", p, s.sass_status);
    text(*sass, "reason", "sass", p, s.sass_reason);
    if (const json* fns = object(*sass, "functions", "sass", p)) {
      for (const auto& [fn, f] : fns->items()) {
        const std::string at = join("sass.functions", fn);
        SassFunction x;
        integer(f, "local_loads", at, p, x.local_loads);
        integer(f, "local_stores", at, p, x.local_stores);
        integer(f, "widest_global_load_bits", at, p, x.widest_global_load_bits);
        integer(f, "widest_global_store_bits", at, p, x.widest_global_store_bits);
        s.sass_functions[fn] = x;
      }
    }
  }
  return s;
}

// ---- correctness ----

std::optional<ComparisonEvidence> read_comparison(const json& j, const std::string& path,
                                                  Problems& p) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) {
    p.push_back(fmt::format("{}: expected an object, got {}", path, j.type_name()));
    return std::nullopt;
  }
  ComparisonEvidence c;
  boolean(j, "pass", path, p, c.pass);
  text(j, "reason", path, p, c.reason);
  real(j, "max_abs_err", path, p, c.max_abs_err);
  real(j, "max_rel_err", path, p, c.max_rel_err);
  if (const json* w = object(j, "worst", path, p)) {
    const std::string at = join(path, "worst");
    integer(*w, "index", at, p, c.worst_index);
    integer(*w, "row", at, p, c.worst_row);
    real(*w, "expected", at, p, c.worst_expected);
    real(*w, "actual", at, p, c.worst_actual);
  }
  integer(j, "tolerance_violations", path, p, c.tolerance_violations);
  integer(j, "nonfinite_mismatches", path, p, c.nonfinite_mismatches);
  integer(j, "first_nonfinite_index", path, p, c.first_nonfinite_index);
  real(j, "worst_row_ratio", path, p, c.worst_row_ratio);
  integer(j, "worst_ratio_row", path, p, c.worst_ratio_row);
  return c;
}

std::optional<CaseEvidence> read_case(const json& j, const std::string& path, Problems& p) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) {
    p.push_back(fmt::format("{}: expected an object, got {}", path, j.type_name()));
    return std::nullopt;
  }
  CaseEvidence c;
  boolean(j, "pass", path, p, c.pass);
  text(j, "case", path, p, c.name);
  text(j, "reason", path, p, c.reason);
  if (const json* spec = find(j, "spec")) {
    // Read by its operator where it is described (op::Operator::describe_case, feedback).
    if (spec->is_object() || spec->is_null())
      c.spec = *spec;
    else
      p.push_back(
          fmt::format("{}: expected an object, got {}", join(path, "spec"), spec->type_name()));
  }
  if (const json* cmp = find(j, "comparison"))
    c.comparison = read_comparison(*cmp, join(path, "comparison"), p);
  return c;
}

json suite_summary_json(const json& s) {
  if (!s.is_object()) return json::object();
  auto get = [&](const char* key, json fallback) {
    const json* v = find(s, key);
    return v ? *v : fallback;
  };
  return {{"pass", get("pass", false)},
          {"passed", get("passed", 0)},
          {"failed", get("failed", 0)},
          {"first_failure", get("first_failure", json())}};
}

CorrectnessEvidence CorrectnessEvidence::read(const json& ev, Problems& p) {
  CorrectnessEvidence c;
  if (!evidence_object(ev, p)) return c;
  if (const json* s = object(ev, "suite", "", p)) {
    bool pass = false;
    if (boolean(*s, "pass", "suite", p, pass)) c.pass = pass;
    std::int64_t n = 0;
    if (integer(*s, "passed", "suite", p, n)) c.passed = n;
    if (integer(*s, "failed", "suite", p, n)) c.failed = n;
    if (const json* f = find(*s, "first_failure"))
      c.first_failure = read_case(*f, "suite.first_failure", p);
  }
  if (const json* f = object(ev, "fault", "", p)) {
    FaultEvidence x;
    text(*f, "class", "fault", p, x.fault_class);
    text(*f, "cuda_error", "fault", p, x.cuda_error);
    text(*f, "where", "fault", p, x.where);
    text(*f, "case_name", "fault", p, x.case_name);
    integer(*f, "case_index", "fault", p, x.case_index);
    c.fault = std::move(x);
  }
  if (const json* w = object(ev, "worker", "", p))
    if (const json* progress = object(*w, "progress", "worker", p))
      text(*progress, "name", "worker.progress", p, c.in_flight_case);
  return c;
}

// ---- sanitizer ----

SanitizerEvidence SanitizerEvidence::read(const json& ev, Problems& p) {
  SanitizerEvidence s;
  if (!evidence_object(ev, p)) return s;
  text(ev, "tool_version", "", p, s.tool_version);
  if (const json* tools = array(ev, "tools", "", p)) {
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = element("", "tools", i);
      if (!t.is_object()) {
        p.push_back(at + ": expected an object, got " + std::string(t.type_name()));
        continue;
      }
      SanitizerTool x;
      text(t, "tool", at, p, x.tool);
      text(t, "outcome", at, p, x.outcome);
      text(t, "reason", at, p, x.reason);
      integer(t, "hazard_count", at, p, x.hazard_count);
      if (const json* hz = array(t, "hazards", at, p)) {
        for (std::size_t k = 0; k < hz->size(); ++k) {
          const json& h = (*hz)[k];
          const std::string hat = element(at, "hazards", k);
          sanitizer::Hazard y;
          if (!h.is_object()) {
            p.push_back(hat + ": expected an object, got " + std::string(h.type_name()));
            continue;
          }
          text(h, "tool", hat, p, y.tool);
          text(h, "kind", hat, p, y.kind);
          text(h, "message", hat, p, y.message);
          text(h, "function", hat, p, y.function);
          text(h, "file", hat, p, y.file);
          integer(h, "line", hat, p, y.line);
          text(h, "file2", hat, p, y.file2);
          integer(h, "line2", hat, p, y.line2);
          integer(h, "access_size", hat, p, y.access_size);
          x.hazards.push_back(std::move(y));
        }
      }
      s.tools.push_back(std::move(x));
    }
  }
  if (const json* poison = object(ev, "poison", "", p)) {
    text(*poison, "status", "poison", p, s.poison_status);
    text(*poison, "reason", "poison", p, s.poison_reason);
  }
  return s;
}

// ---- stalls ----

std::string stall_reason_name(std::string_view name) {
  constexpr std::string_view kPrefix = "smsp__pcsamp_warps_issue_stalled_";
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  return std::string(name);
}

json StallEvidence::to_json() const {
  json lines = json::array();
  for (const auto& l : top_lines)
    lines.push_back({{"line", l.line}, {"reason", l.reason}, {"samples", l.samples}});
  return {{"status", status},
          {"reason", reason},
          {"histogram", histogram},
          {"top_lines", lines},
          {"total_samples", total_samples},
          {"dropped_samples", dropped_samples},
          {"sampling_period", sampling_period}};
}

StallEvidence StallEvidence::read(const json& st, Problems& p) {
  StallEvidence s;
  const std::string at = "stalls";
  if (!st.is_object()) {
    if (!st.is_null()) p.push_back(at + ": expected an object, got " + st.type_name());
    return s;
  }
  text(st, "status", at, p, s.status);
  text(st, "reason", at, p, s.reason);
  if (const json* h = object(st, "histogram", at, p)) {
    for (const auto& [name, n] : h->items()) {
      if (n.is_number_integer())
        s.histogram[name] = n.get<std::int64_t>();
      else
        p.push_back(join(at + ".histogram", name) + ": expected an integer sample count");
    }
  }
  if (const json* lines = array(st, "top_lines", at, p)) {
    for (std::size_t i = 0; i < lines->size(); ++i) {
      const std::string lat = element(at, "top_lines", i);
      StallLine l;
      if (!(*lines)[i].is_object()) {
        p.push_back(lat + ": expected an object");
        continue;
      }
      integer((*lines)[i], "line", lat, p, l.line);
      text((*lines)[i], "reason", lat, p, l.reason);
      integer((*lines)[i], "samples", lat, p, l.samples);
      s.top_lines.push_back(std::move(l));
    }
  }
  integer(st, "total_samples", at, p, s.total_samples);
  integer(st, "dropped_samples", at, p, s.dropped_samples);
  integer(st, "sampling_period", at, p, s.sampling_period);
  return s;
}

std::string StallEvidence::dominant() const {
  std::string best;
  std::int64_t best_n = -1;
  for (const auto& [name, n] : histogram) // sorted by name: ties go to the first name
    if (n > best_n) best = name, best_n = n;
  return best;
}

// ---- benchmark ----

namespace {

PairedRatioEvidence read_ratio(const json& r, const std::string& at, Problems& p) {
  PairedRatioEvidence x;
  real(r, "ratio", at, p, x.ratio);
  integer(r, "rounds", at, p, x.rounds);
  if (const json* ci = object(r, "ci", at, p)) {
    real(*ci, "lo", join(at, "ci"), p, x.lo);
    real(*ci, "hi", join(at, "ci"), p, x.hi);
  }
  return x;
}

} // namespace

BenchmarkEvidence BenchmarkEvidence::read(const json& ev, Problems& p) {
  BenchmarkEvidence b;
  if (!evidence_object(ev, p)) return b;
  if (const json* s = object(ev, "summary", "", p)) {
    BenchSummary x;
    integer(*s, "faster", "summary", p, x.faster);
    integer(*s, "slower", "summary", p, x.slower);
    integer(*s, "indistinguishable", "summary", p, x.indistinguishable);
    x.geomean_speedup = real(*s, "geomean_speedup_vs_baseline", "summary", p);
    x.ci_lo = real(*s, "geomean_ci_lo", "summary", p);
    x.ci_hi = real(*s, "geomean_ci_hi", "summary", p);
    bool clears = false;
    if (boolean(*s, "clears_noise_floor", "summary", p, clears)) x.clears_noise_floor = clears;
    b.summary = x;
  }
  if (const json* shapes = array(ev, "shapes", "", p)) {
    for (std::size_t i = 0; i < shapes->size(); ++i) {
      const json& sh = (*shapes)[i];
      const std::string at = element("", "shapes", i);
      if (!sh.is_object()) {
        p.push_back(at + ": expected an object");
        continue;
      }
      BenchShape x;
      integer(sh, "rows", at, p, x.rows);
      integer(sh, "h", at, p, x.h);
      text(sh, "dtype", at, p, x.dtype);
      text(sh, "shape_class", at, p, x.shape_class);
      if (const json* states = array(sh, "states", at, p)) {
        for (std::size_t k = 0; k < states->size(); ++k) {
          const json& st = (*states)[k];
          const std::string sat = element(at, "states", k);
          if (!st.is_object()) {
            p.push_back(sat + ": expected an object");
            continue;
          }
          BenchState y;
          text(st, "state", sat, p, y.state);
          text(st, "decision", sat, p, y.decision);
          real(st, "candidate_kernel_median_ms", sat, p, y.candidate_ms);
          real(st, "baseline_kernel_median_ms", sat, p, y.baseline_ms);
          real(st, "noise_floor", sat, p, y.noise_floor);
          if (const json* r = object(st, "vs_baseline", sat, p))
            y.vs_baseline = read_ratio(*r, join(sat, "vs_baseline"), p);
          x.states.push_back(std::move(y));
        }
      }
      b.shapes.push_back(std::move(x));
    }
  }
  if (const json* st = find(ev, "stalls")) b.stalls = StallEvidence::read(*st, p);
  return b;
}

// ---- roofline ----

RooflineEvidence RooflineEvidence::read(const json& ev, Problems& p) {
  RooflineEvidence r;
  if (!evidence_object(ev, p)) return r;
  r.copy_ceiling_tbps = real(ev, "copy_ceiling_tbps", "", p);
  if (const json* cls = object(ev, "by_class", "", p)) {
    for (const auto& [name, c] : cls->items()) {
      const std::string at = join("by_class", name);
      RooflineClass x;
      if (!real(c, "fraction_of_ceiling_median", at, p, x.fraction_median)) {
        p.push_back(at + ": no fraction_of_ceiling_median");
        continue;
      }
      integer(c, "shapes", at, p, x.shapes);
      r.by_class[name] = x;
    }
  }
  return r;
}

} // namespace kloop::evaluator::evidence
