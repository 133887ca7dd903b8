// The report digest of the offline policies (report_digest.h).
#include "kernels/report_digest.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace kloop::op {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string clean_stall(const std::string& raw) {
  std::string s = lower(raw);
  const std::string prefix = "smsp__pcsamp_warps_issue_stalled_";
  if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return s;
}

std::optional<double> number_at(const json& obj, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto it = obj.find(k); it != obj.end() && it->is_number()) return it->get<double>();
  return std::nullopt;
}

// Top stall reason from a value under a key naming stalls: the benchmark gate's CUPTI evidence
// (evaluator/evidence.h StallEvidence: {"histogram": {reason: samples}, "top_lines",
// "total_samples", ...}: the histogram's top, never a bookkeeping count such as total_samples), a
// string, an array of strings or of {reason|name, samples|fraction|share|count} objects, or an
// object {reason: number}.
std::string top_stall(const json& v) {
  if (v.is_object())
    if (const auto h = v.find("histogram"); h != v.end())
      return h->is_object() ? top_stall(*h) : "";
  if (v.is_string()) return clean_stall(v.get<std::string>());
  std::string best;
  double best_n = -1.0;
  auto consider = [&](const std::string& name, double n) {
    if (n > best_n) best = clean_stall(name), best_n = n;
  };
  if (v.is_array()) {
    for (const auto& e : v) {
      if (e.is_string() && best.empty()) return clean_stall(e.get<std::string>());
      if (!e.is_object()) continue;
      std::string name;
      for (const char* k : {"reason", "name", "stall"})
        if (auto it = e.find(k); it != e.end() && it->is_string()) name = it->get<std::string>();
      if (!name.empty())
        consider(name, number_at(e, {"samples", "fraction", "share", "count"}).value_or(0.0));
    }
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it->is_number()) consider(it.key(), it->get<double>());
  }
  return best;
}

void walk(const json& node, ReportDigest& d, int depth) {
  if (depth > 12) return;
  if (node.is_array()) {
    for (const auto& e : node)
      walk(e, d, depth + 1);
    return;
  }
  if (!node.is_object()) return;
  if (auto it = node.find("shape_class"); it != node.end() && it->is_string()) {
    const std::string cls = lower(it->get<std::string>());
    auto fraction = [&](double f) {
      auto [pos, inserted] = d.class_fraction.emplace(cls, f);
      if (!inserted) pos->second = std::min(pos->second, f);
      d.has_benchmark = true;
    };
    auto speedup = [&](double s) {
      d.min_speedup = d.min_speedup > 0 ? std::min(d.min_speedup, s) : s;
      d.has_benchmark = true;
    };
    const std::initializer_list<const char*> kFractionKeys = {
        "fraction_of_ceiling", "fraction_of_copy_ceiling", "copy_ceiling_fraction",
        "achieved_fraction", "fraction"};
    if (auto f = number_at(node, kFractionKeys)) fraction(*f);
    if (auto s = number_at(node, {"speedup", "speedup_vs_baseline", "speed_up"})) speedup(*s);
    // The gates' own layout: per cache state, the roofline's fraction of the copy ceiling and the
    // benchmark's paired time ratio candidate/baseline (speed-up = 1 / ratio).
    const auto dtype = node.find("dtype");
    if (auto st = node.find("states"); st != node.end() && st->is_array()) {
      for (const auto& state : *st) {
        if (!state.is_object()) continue;
        if (auto dec = state.find("decision");
            dec != state.end() && *dec == "slower" && dtype != node.end() && dtype->is_string())
          d.slower_dtypes.insert(dtype->get<std::string>());
        if (auto f = number_at(state, kFractionKeys)) fraction(*f);
        if (auto vb = state.find("vs_baseline"); vb != state.end() && vb->is_object())
          if (auto r = number_at(*vb, {"ratio"}); r && *r > 0) speedup(1.0 / *r);
      }
    }
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = lower(it.key());
    if (key.find("spill") != std::string::npos && it->is_number())
      d.spill_bytes = std::max<std::int64_t>(d.spill_bytes, it->get<std::int64_t>());
    if (key.find("stall") != std::string::npos && d.dominant_stall.empty() &&
        (key.find("dominant") != std::string::npos || !it->is_number()))
      d.dominant_stall = top_stall(*it);
    walk(*it, d, depth + 1);
  }
}

} // namespace

ReportDigest digest_report(const json& report) {
  ReportDigest d;
  if (!report.is_object()) return d;
  d.present = true;
  if (auto it = report.find("verdict"); it != report.end() && it->is_string())
    d.verdict = it->get<std::string>();
  if (auto g = report.find("gates"); g != report.end() && g->is_array()) {
    for (const auto& gate : *g) {
      if (!gate.is_object()) continue;
      const std::string status = gate.value("status", std::string());
      if (d.failed_gate.empty() && (status == "fail" || status == "timeout" || status == "crashed"))
        d.failed_gate = gate.value("name", std::string("unknown"));
      if (auto ev = gate.find("evidence"); ev != gate.end()) walk(*ev, d, 0);
    }
  }
  return d;
}

double geomean_speedup(const json& report) {
  if (!report.is_object() || !report.contains("gates") || !report["gates"].is_array()) return 0;
  for (const auto& g : report["gates"])
    if (g.is_object() && g.value("name", std::string()) == "benchmark" && g.contains("evidence") &&
        g["evidence"].is_object() && g["evidence"].contains("summary") &&
        g["evidence"]["summary"].is_object())
      return number_at(g["evidence"]["summary"], {"geomean_speedup_vs_baseline"}).value_or(0.0);
  return 0;
}

} // namespace kloop::op
