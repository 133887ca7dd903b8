// Phase records read back from the store (phase_view.h).
#include "store/phase_view.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "store/store.h"

namespace kloop::store {
namespace {

using nlohmann::json;

double number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Evaluation order of the groups; others follow in the order first seen.
constexpr const char* kGroupOrder[] = {"contract",    "build",       "static",    "host_wait",
                                       "device_wait", "correctness", "sanitizer", "benchmark",
                                       "pcsample",    "ncu"};

int group_rank(const std::string& group) {
  for (std::size_t i = 0; i < std::size(kGroupOrder); ++i)
    if (group == kGroupOrder[i]) return static_cast<int>(i);
  return static_cast<int>(std::size(kGroupOrder));
}

std::string label(const std::string& group) {
  if (group == "device_wait") return "waiting for a device";
  if (group == "host_wait") return "waiting for a host slot";
  return group;
}

// The top-level groups of one record with their summed time, in evaluation order.
std::vector<std::pair<std::string, double>> group_times(const CandidatePhases& c) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& p : c.phases) {
    if (p.nested) continue;
    const std::string g = phase_group(p.name);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == g; });
    if (it == out.end())
      out.emplace_back(g, p.wall_ms);
    else
      it->second += p.wall_ms;
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return group_rank(a.first) < group_rank(b.first);
  });
  return out;
}

} // namespace

std::string phase_group(const std::string& name) {
  return name.substr(0, name.find(':'));
}

std::optional<CandidatePhases> candidate_phases(const CandidateDetail& candidate) {
  const TelemetryRecord* t = candidate.telemetry_of("phases");
  if (t == nullptr || !t->data.is_object()) return std::nullopt;
  const auto list = t->data.find("phases");
  if (list == t->data.end() || !list->is_array()) return std::nullopt;
  CandidatePhases c;
  c.wall_ms = number(t->data, "wall_ms");
  for (const auto& p : *list) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
    PhaseRow r;
    r.name = p["name"].get<std::string>();
    r.start_ms = number(p, "start_ms");
    r.wall_ms = number(p, "wall_ms");
    r.device = p.value("device", json()).is_string() ? p["device"].get<std::string>() : "";
    r.nested = p.value("nested", json()).is_boolean() && p["nested"].get<bool>();
    if (p.contains("detail") && p["detail"].is_object()) r.detail = p["detail"];
    c.phases.push_back(std::move(r));
  }
  return c;
}

json PhaseSummary::to_json() const {
  json rows = json::array();
  for (const auto& t : totals)
    rows.push_back({{"name", t.name},
                    {"nested", t.nested},
                    {"candidates", t.candidates},
                    {"runs", t.runs},
                    {"total_ms", t.total_ms},
                    {"max_ms", t.max_ms},
                    {"mean_ms_per_candidate", t.candidates ? t.total_ms / t.candidates : 0.0},
                    {"rounds", t.rounds},
                    {"states", t.states},
                    {"stop", t.stop}});
  return {{"candidates", candidates}, {"wall_ms", wall_ms}, {"totals", rows}};
}

PhaseSummary phase_summary(const SessionDetail& session) {
  PhaseSummary s;
  std::map<std::string, PhaseTotal> groups;            // top-level groups
  std::map<std::string, std::vector<PhaseTotal>> kids; // group -> nested rows, first seen first
  std::vector<std::string> seen;
  for (const auto& it : session.iterations)
    for (const auto& c : it.candidates) {
      const auto rec = candidate_phases(c);
      if (!rec) continue;
      ++s.candidates;
      s.wall_ms += rec->wall_ms;
      std::map<std::string, bool> counted; // rows this candidate already counted
      const auto add = [&](PhaseTotal& t, const PhaseRow& p) {
        const std::string key = (t.nested ? "n:" : "g:") + t.name;
        if (!counted[key]) ++t.candidates, counted[key] = true;
        ++t.runs;
        t.total_ms += p.wall_ms;
        t.max_ms = std::max(t.max_ms, p.wall_ms);
        t.rounds += static_cast<long>(number(p.detail, "rounds"));
        t.states += static_cast<int>(number(p.detail, "states"));
        if (p.detail.contains("stop") && p.detail["stop"].is_object())
          for (const auto& [reason, n] : p.detail["stop"].items())
            if (n.is_number_integer()) t.stop[reason] = t.stop.value(reason, 0) + n.get<int>();
      };
      // The nested row `name` under `group`, made on first sight.
      const auto kid = [&](const std::string& group, const std::string& name) -> PhaseTotal& {
        auto& list = kids[group];
        auto k = std::find_if(list.begin(), list.end(),
                              [&](const PhaseTotal& x) { return x.name == name; });
        if (k != list.end()) return *k;
        list.push_back(PhaseTotal{});
        list.back().name = name;
        list.back().nested = true;
        return list.back();
      };
      for (const auto& p : rec->phases) {
        const std::string g = phase_group(p.name);
        if (std::find(seen.begin(), seen.end(), g) == seen.end()) seen.push_back(g);
        if (p.nested) {
          add(kid(p.name.rfind("benchmark:", 0) == 0 ? "benchmark" : g, p.name), p);
          continue;
        }
        PhaseTotal& t = groups[g];
        t.name = g;
        add(t, p);
        // A process of one kind within its group ("sanitizer:racecheck", "correctness:public")
        // also gets its own row under the group: each tool's and each suite's time.
        if (p.name != g) add(kid(g, p.name), p);
      }
    }
  std::stable_sort(seen.begin(), seen.end(), [](const std::string& a, const std::string& b) {
    return group_rank(a) < group_rank(b);
  });
  for (const auto& g : seen) {
    if (groups.count(g)) s.totals.push_back(groups[g]);
    for (const auto& k : kids[g])
      s.totals.push_back(k);
  }
  return s;
}

std::string candidate_phase_text(const CandidateDetail& candidate) {
  const auto rec = candidate_phases(candidate);
  if (!rec) return "";
  std::string out = fmt::format("    time {:.1f} s:", rec->wall_ms / 1000);
  bool first = true;
  for (const auto& [group, ms] : group_times(*rec)) {
    out += fmt::format("{} {} {:.2f} s", first ? "" : ",", label(group), ms / 1000);
    first = false;
  }
  return out + "\n";
}

std::string phase_summary_text(const SessionDetail& session) {
  const PhaseSummary s = phase_summary(session);
  if (s.candidates == 0) return "";
  std::string out = fmt::format(
      "where the time went ({} candidate{}, {:.1f} s of evaluation, {:.1f} s per candidate; "
      "overlapping phases can add up to more):\n",
      s.candidates, s.candidates == 1 ? "" : "s", s.wall_ms / 1000,
      s.wall_ms / 1000 / s.candidates);
  out += fmt::format("  {:<34} {:>9} {:>12} {:>7} {:>5}\n", "phase", "total s", "per cand. s",
                     "share", "runs");
  for (const auto& t : s.totals) {
    const double share = s.wall_ms > 0 ? 100.0 * t.total_ms / s.wall_ms : 0.0;
    std::string line = fmt::format(
        "  {:<34} {:>9.2f} {:>12.3f} {:>6.0f}% {:>5}", (t.nested ? "  " : "") + label(t.name),
        t.total_ms / 1000, t.candidates ? t.total_ms / 1000 / t.candidates : 0.0, share, t.runs);
    if (t.states > 0) {
      line += fmt::format("  {} states, {:.1f} rounds per state", t.states,
                          static_cast<double>(t.rounds) / t.states);
      std::string stops;
      for (const auto& [reason, n] : t.stop.items())
        stops += fmt::format("{}{} {}", stops.empty() ? "" : ", ", reason, n.dump());
      if (!stops.empty()) line += " (stop: " + stops + ")";
    }
    out += line + "\n";
  }
  return out;
}

} // namespace kloop::store
