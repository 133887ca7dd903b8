#include "store/compare.h"

#include <map>

#include <fmt/core.h>

#include "store/store.h"

namespace kloop::store {

using nlohmann::json;

namespace {

json session_row(const SessionDetail& d) {
  std::map<std::string, std::pair<int, int>> gates; // name -> (passed, seen)
  int candidates = 0;
  json first_pass = nullptr;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates) {
      ++candidates;
      for (const auto& g : c.gates) {
        auto& [p, n] = gates[g.name];
        // A gate that did not run (no device, an earlier gate failed) neither passed nor failed:
        // it is left out of the rate, and a gate that never ran has rate null ("not run").
        if (g.status == GateCode::kNotRun) continue;
        ++n;
        if (g.status == GateCode::kPass) ++p;
      }
      if (first_pass.is_null() && c.candidate.verdict == VerdictCode::kPass)
        first_pass = it.iteration.index + 1;
    }
  json rates = json::object();
  for (const auto& [g, pn] : gates)
    rates[g] = pn.second ? json(static_cast<double>(pn.first) / pn.second) : json(nullptr);
  const CandidateDetail* best = d.best_candidate();
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"id", d.session.id},
          {"candidates", candidates},
          {"gate_pass_rate", rates},
          {"iterations_to_first_pass", first_pass},
          {"best_speedup", best ? opt(best->candidate.speedup) : json(nullptr)},
          {"best_speedup_interval",
           best ? json{opt(best->candidate.speedup_lo), opt(best->candidate.speedup_hi)}
                : json{nullptr, nullptr}},
          {"tokens", d.tokens()},
          {"wall_ms", d.wall_ms()}};
}

} // namespace

json compare_sessions(Store& store, const std::vector<std::int64_t>& ids) {
  std::map<std::pair<std::string, std::string>, json> groups;
  for (std::int64_t id : ids) {
    const SessionDetail d = store.load_session(id);
    auto& g = groups[{d.session.provider, d.session.model}];
    if (g.is_null())
      g = {{"provider", d.session.provider},
           {"model", d.session.model},
           {"sessions", json::array()}};
    g["sessions"].push_back(session_row(d));
  }
  json out = {{"groups", json::array()}};
  for (auto& [key, g] : groups) {
    std::map<std::string, std::pair<double, int>> rate_sum;
    int with_pass = 0;
    json best = nullptr;
    std::int64_t tokens = 0;
    double wall = 0;
    for (const auto& s : g["sessions"]) {
      for (auto it = s["gate_pass_rate"].begin(); it != s["gate_pass_rate"].end(); ++it) {
        auto& [sum, n] = rate_sum[it.key()];
        if (it.value().is_null()) continue; // never ran in that session
        sum += it.value().get<double>();
        ++n;
      }
      if (!s["iterations_to_first_pass"].is_null()) ++with_pass;
      if (!s["best_speedup"].is_null() &&
          (best.is_null() || s["best_speedup"].get<double>() > best.get<double>()))
        best = s["best_speedup"];
      tokens += s["tokens"].get<std::int64_t>();
      wall += s["wall_ms"].get<double>();
    }
    json rates = json::object();
    for (const auto& [name, sn] : rate_sum)
      rates[name] = sn.second ? json(sn.first / sn.second) : json(nullptr);
    g["aggregate"] = {{"sessions", g["sessions"].size()},
                      {"gate_pass_rate", rates},
                      {"sessions_with_pass", with_pass},
                      {"best_speedup", best},
                      {"tokens", tokens},
                      {"wall_ms", wall}};
    out["groups"].push_back(g);
  }
  return out;
}

std::string format_compare(const json& cmp) {
  auto num = [](const json& v, const char* f) {
    return v.is_null() ? std::string("-") : fmt::format(fmt::runtime(f), v.get<double>());
  };
  std::string out;
  for (const auto& g : cmp["groups"]) {
    out += fmt::format("{}/{}  ({} sessions, {} reached a passing candidate)\n",
                       g["provider"].get<std::string>(), g["model"].get<std::string>(),
                       g["aggregate"]["sessions"].get<int>(),
                       g["aggregate"]["sessions_with_pass"].get<int>());
    out += fmt::format("  {:>6} {:>6} {:>12} {:>22} {:>9} {:>10}  gate pass rates\n", "id", "cands",
                       "iters->pass", "best speed-up [lo,hi]", "tokens", "wall s");
    for (const auto& s : g["sessions"]) {
      std::string rates;
      for (auto it = s["gate_pass_rate"].begin(); it != s["gate_pass_rate"].end(); ++it)
        rates += it.value().is_null()
                     ? fmt::format("{}=not run ", it.key())
                     : fmt::format("{}={:.0f}% ", it.key(), 100 * it.value().get<double>());
      const auto& iv = s["best_speedup_interval"];
      out += fmt::format(
          "  {:>6} {:>6} {:>12} {:>22} {:>9} {:>10.1f}  {}\n", s["id"].get<std::int64_t>(),
          s["candidates"].get<int>(),
          s["iterations_to_first_pass"].is_null() ? std::string("-")
                                                  : s["iterations_to_first_pass"].dump(),
          fmt::format("{}x [{},{}]", num(s["best_speedup"], "{:.2f}"), num(iv[0], "{:.2f}"),
                      num(iv[1], "{:.2f}")),
          s["tokens"].get<std::int64_t>(), s["wall_ms"].get<double>() / 1000.0, rates);
    }
  }
  return out;
}

} // namespace kloop::store
