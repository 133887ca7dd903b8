// Generator comparison with statistics (store/generator_compare.h).
#include "store/generator_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <fmt/core.h>

#include "store/error.h"
#include "store/html_report.h"
#include "store/store.h"

namespace kloop::store {

using nlohmann::json;

namespace {

constexpr double kZ95 = 1.959963984540054; // two-sided 95 % normal quantile
constexpr std::uint64_t kBootstrapSeed = 20261201;

// What the comparison needs of one session.
struct SessionFacts {
  std::string generator, op, op_alias; // op: contract name; alias: the sweep's operator name
  std::int64_t seed = 0, id = 0;
  std::optional<Decision> decision;
  std::optional<double> promoted_speedup;
  std::optional<int> first_pass; // 1-based iteration of the first passing candidate
  std::map<std::string, int> false_starts;
  std::int64_t tokens = 0;
  std::optional<double> cost_usd;
};

std::string generator_of(const SessionRecord& s) {
  const json sweep = s.params.is_object() ? s.params.value("sweep", json()) : json();
  if (sweep.is_object() && sweep.value("generator", json()).is_string())
    return sweep["generator"].get<std::string>();
  return s.model.empty() ? s.provider : s.provider + "/" + s.model;
}

// The first gate (by ordinal) that did not pass and was not merely not run, as "gate:status".
std::optional<std::string> rejecting_gate(const CandidateDetail& c) {
  for (const auto& g : c.gates)
    if (g.status != GateCode::kPass && g.status != GateCode::kNotRun)
      return fmt::format("{}:{}", g.name, name(g.status));
  return std::nullopt;
}

SessionFacts facts_of(const SessionDetail& d) {
  SessionFacts f;
  const auto& s = d.session;
  f.id = s.id;
  f.generator = generator_of(s);
  f.op = s.operator_name;
  const json sweep = s.params.is_object() ? s.params.value("sweep", json()) : json();
  f.op_alias = sweep.is_object() ? sweep.value("operator", f.op) : f.op;
  f.seed = s.seed;
  if (d.promotion) f.decision = d.promotion->decision;
  if (f.decision == Decision::kPromoted)
    if (const CandidateDetail* best = d.best_candidate())
      f.promoted_speedup = best->candidate.speedup;
  const json price = sweep.is_object() ? sweep.value("price_usd_per_mtok", json()) : json();
  const bool priced = price.is_object() && price.value("input", json()).is_number() &&
                      price.value("output", json()).is_number();
  double cost = 0;
  for (const auto& it : d.iterations) {
    for (const auto& r : it.responses) {
      f.tokens += r.prompt_tokens.value_or(0) + r.completion_tokens.value_or(0);
      if (priced)
        cost += (r.prompt_tokens.value_or(0) * price["input"].get<double>() +
                 r.completion_tokens.value_or(0) * price["output"].get<double>()) /
                1e6;
    }
    if (it.candidates.empty()) {
      std::string why = "no_reply";
      for (const auto& r : it.responses)
        if (!r.error.empty()) why = r.error.substr(0, r.error.find_first_of(" :("));
      ++f.false_starts["provider:" + why];
    }
    for (const auto& c : it.candidates) {
      if (!f.first_pass && c.candidate.verdict == VerdictCode::kPass)
        f.first_pass = it.iteration.index + 1;
      if (c.candidate.verdict == VerdictCode::kReject)
        ++f.false_starts[rejecting_gate(c).value_or("rejected:no_failing_gate_recorded")];
    }
  }
  if (priced) f.cost_usd = cost;
  return f;
}

json opt_pair(const std::optional<std::pair<double, double>>& p) {
  return p ? json{p->first, p->second} : json(nullptr);
}

json generator_stats(const std::string& gen, const std::vector<const SessionFacts*>& ss) {
  int promoted = 0, rejected = 0, pending = 0, none = 0, priced = 0;
  std::vector<double> speedups;
  std::vector<int> firsts;
  std::map<std::string, int> false_starts;
  std::int64_t tokens = 0;
  double cost = 0;
  for (const SessionFacts* f : ss) {
    if (!f->decision)
      ++none;
    else if (*f->decision == Decision::kPromoted)
      ++promoted;
    else if (*f->decision == Decision::kRejected)
      ++rejected;
    else
      ++pending;
    if (f->promoted_speedup && *f->promoted_speedup > 0) speedups.push_back(*f->promoted_speedup);
    if (f->first_pass) firsts.push_back(*f->first_pass);
    for (const auto& [k, v] : f->false_starts)
      false_starts[k] += v;
    tokens += f->tokens;
    if (f->cost_usd) cost += *f->cost_usd, ++priced;
  }
  const int n = static_cast<int>(ss.size());
  const auto sp = geomean_bootstrap(speedups);
  json first = {{"sessions_with_pass", firsts.size()},
                {"sessions_without", n - static_cast<int>(firsts.size())},
                {"median", nullptr},
                {"mean", nullptr}};
  if (!firsts.empty()) {
    std::sort(firsts.begin(), firsts.end());
    const std::size_t m = firsts.size();
    first["median"] = m % 2 ? firsts[m / 2] : (firsts[m / 2 - 1] + firsts[m / 2]) / 2.0;
    double sum = 0;
    for (int v : firsts)
      sum += v;
    first["mean"] = sum / static_cast<double>(m);
  }
  return {{"generator", gen},
          {"sessions", n},
          {"promoted", promoted},
          {"rejected", rejected},
          {"pending_device_validation", pending},
          {"no_decision", none},
          {"success_rate", n ? json(static_cast<double>(promoted) / n) : json(nullptr)},
          {"success_interval", opt_pair(wilson_interval(promoted, n))},
          {"promoted_with_speedup", speedups.size()},
          {"speedup_geomean", sp ? json(sp->geomean) : json(nullptr)},
          {"speedup_interval", sp ? opt_pair(sp->interval) : json(nullptr)},
          {"iterations_to_first_pass", first},
          {"false_starts", false_starts},
          {"tokens", tokens},
          {"cost_usd", priced ? json(cost) : json(nullptr)},
          {"cost_usd_sessions_priced", priced}};
}

// Paired speed-up ratios a/b over (operator, seed) keys where both generators promoted (the
// latest session of a generator per key counts).
json paired(const std::string& op_label, const std::vector<SessionFacts>& facts,
            const std::vector<std::string>& gens) {
  std::map<std::string, std::map<std::pair<std::string, std::int64_t>, double>> by_gen;
  for (const auto& f : facts)
    if (f.promoted_speedup && *f.promoted_speedup > 0)
      by_gen[f.generator][{f.op, f.seed}] = *f.promoted_speedup;
  json out = json::array();
  for (std::size_t i = 0; i < gens.size(); ++i)
    for (std::size_t j = i + 1; j < gens.size(); ++j) {
      std::vector<double> ratios;
      for (const auto& [key, a] : by_gen[gens[i]])
        if (const auto it = by_gen[gens[j]].find(key); it != by_gen[gens[j]].end())
          ratios.push_back(a / it->second);
      const auto est = geomean_bootstrap(ratios);
      out.push_back({{"operator", op_label},
                     {"a", gens[i]},
                     {"b", gens[j]},
                     {"pairs", ratios.size()},
                     {"geomean_ratio", est ? json(est->geomean) : json(nullptr)},
                     {"interval", est ? opt_pair(est->interval) : json(nullptr)}});
    }
  return out;
}

} // namespace

std::optional<std::pair<double, double>> wilson_interval(int k, int n) {
  if (n <= 0) return std::nullopt;
  const double p = static_cast<double>(k) / n, z2 = kZ95 * kZ95;
  const double denom = 1 + z2 / n;
  const double center = (p + z2 / (2.0 * n)) / denom;
  const double half = kZ95 * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / denom;
  return std::pair{std::max(0.0, center - half), std::min(1.0, center + half)};
}

std::optional<GeomeanEstimate> geomean_bootstrap(const std::vector<double>& values, int resamples) {
  if (values.empty()) return std::nullopt;
  std::vector<double> logs;
  for (double v : values)
    logs.push_back(std::log(v));
  const auto mean = [](const std::vector<double>& xs) {
    double s = 0;
    for (double x : xs)
      s += x;
    return s / static_cast<double>(xs.size());
  };
  GeomeanEstimate est{std::exp(mean(logs)), std::nullopt};
  if (logs.size() < 2) return est;
  std::mt19937_64 rng(kBootstrapSeed);
  std::uniform_int_distribution<std::size_t> pick(0, logs.size() - 1);
  std::vector<double> means, sample(logs.size());
  for (int r = 0; r < resamples; ++r) {
    for (auto& x : sample)
      x = logs[pick(rng)];
    means.push_back(mean(sample));
  }
  std::sort(means.begin(), means.end());
  const auto at = [&](double q) {
    return std::exp(means[static_cast<std::size_t>(q * static_cast<double>(means.size() - 1))]);
  };
  est.interval = std::pair{at(0.025), at(0.975)};
  return est;
}

json compare_generators(Store& store, const std::optional<std::string>& operator_filter) {
  std::vector<SessionFacts> facts;
  for (const auto& summary : store.list_sessions()) {
    if (session_kind(summary.session) != "optimize") continue;
    SessionFacts f = facts_of(store.load_session(summary.session.id));
    if (operator_filter && f.op != *operator_filter && f.op_alias != *operator_filter) continue;
    facts.push_back(std::move(f));
  }
  if (facts.empty())
    throw StoreError(fmt::format(
        "compare: {} holds no optimize session{}; merge the sweep's task stores first (`kloop "
        "store merge OUT STORE...`)",
        store.dir(), operator_filter ? " of operator " + *operator_filter : std::string()));
  std::sort(facts.begin(), facts.end(),
            [](const SessionFacts& a, const SessionFacts& b) { return a.id < b.id; });
  std::set<std::string> gen_set, op_set;
  for (const auto& f : facts)
    gen_set.insert(f.generator), op_set.insert(f.op);
  const std::vector<std::string> gens(gen_set.begin(), gen_set.end());
  const auto stats_for = [&](const std::optional<std::string>& op) {
    json out = json::array();
    for (const auto& g : gens) {
      std::vector<const SessionFacts*> ss;
      for (const auto& f : facts)
        if (f.generator == g && (!op || f.op == *op)) ss.push_back(&f);
      if (!ss.empty()) out.push_back(generator_stats(g, ss));
    }
    return out;
  };
  json cmp = {{"by", "generator"},
              {"operator", operator_filter ? json(*operator_filter) : json(nullptr)},
              {"confidence", 0.95},
              {"sessions", facts.size()},
              {"overall", stats_for(std::nullopt)},
              {"per_operator", json::array()},
              {"paired_speedup", paired("all", facts, gens)}};
  for (const auto& op : op_set) {
    cmp["per_operator"].push_back({{"operator", op}, {"generators", stats_for(op)}});
    std::vector<SessionFacts> of_op;
    for (const auto& f : facts)
      if (f.op == op) of_op.push_back(f);
    for (auto& p : paired(op, of_op, gens))
      cmp["paired_speedup"].push_back(std::move(p));
  }
  return cmp;
}

namespace {

std::string num(const json& v, const char* f) {
  return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-");
}

std::string interval(const json& v, const char* f) {
  return v.is_array() && v.size() == 2 ? fmt::format("[{}, {}]", num(v[0], f), num(v[1], f))
                                       : std::string("[-]");
}

std::string table(const json& gens) {
  std::string out = fmt::format("  {:<24} {:>5} {:>5} {:>7} {:>22} {:>24} {:>12} {:>9} {:>9}\n",
                                "generator", "runs", "prom", "pending", "success [95% Wilson]",
                                "speed-up geomean [boot]", "iters->pass", "tokens", "USD");
  for (const auto& g : gens) {
    const json& it = g["iterations_to_first_pass"];
    out += fmt::format(
        "  {:<24} {:>5} {:>5} {:>7} {:>22} {:>24} {:>12} {:>9} {:>9}\n",
        g["generator"].get<std::string>(), g["sessions"].get<int>(), g["promoted"].get<int>(),
        g["pending_device_validation"].get<int>(),
        num(g["success_rate"], "{:.2f}") + " " + interval(g["success_interval"], "{:.2f}"),
        num(g["speedup_geomean"], "{:.3f}x") + " " + interval(g["speedup_interval"], "{:.3f}"),
        it["median"].is_null() ? std::string("-") : num(it["median"], "{:.1f}") + " (median)",
        g["tokens"].get<std::int64_t>(), num(g["cost_usd"], "{:.4f}"));
    std::string fs;
    for (auto e = g["false_starts"].begin(); e != g["false_starts"].end(); ++e)
      fs += fmt::format("{}{} x{}", fs.empty() ? "" : ", ", e.key(), e.value().get<int>());
    out += fmt::format("  {:<24} false starts: {}\n", "", fs.empty() ? "none" : fs);
  }
  return out;
}

} // namespace

std::string format_generator_comparison(const json& cmp) {
  std::string out =
      fmt::format("generator comparison over {} sessions{} (95 % intervals)\n",
                  cmp["sessions"].get<std::int64_t>(),
                  cmp["operator"].is_null() ? std::string()
                                            : ", operator " + cmp["operator"].get<std::string>());
  for (const auto& op : cmp["per_operator"])
    out +=
        fmt::format("operator {}\n", op["operator"].get<std::string>()) + table(op["generators"]);
  out += "overall\n" + table(cmp["overall"]);
  for (const auto& p : cmp["paired_speedup"])
    out += fmt::format("paired speed-up {} / {} ({}): {} over {} (operator, seed) pairs where both "
                       "promoted {}\n",
                       p["a"].get<std::string>(), p["b"].get<std::string>(),
                       p["operator"].get<std::string>(), num(p["geomean_ratio"], "{:.3f}x"),
                       p["pairs"].get<int>(), interval(p["interval"], "{:.3f}"));
  int pending = 0;
  for (const auto& g : cmp["overall"])
    pending += g["pending_device_validation"].get<int>();
  if (pending > 0)
    out += fmt::format("note: {} session(s) ended pending_device_validation (no GPU where they "
                       "ran): they count as not promoted, and have no speed-up\n",
                       pending);
  return out;
}

namespace {

const char* kPalette[] = {"#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f"};

// Horizontal bars with whiskers: `value_key` in [0, max], interval `interval_key`.
std::string bar_plot(const char* id, const json& gens, const char* value_key,
                     const char* interval_key, double max, const char* unit) {
  std::string s = fmt::format("<svg id=\"{}\" width=\"640\" height=\"{}\" role=\"img\">\n", id,
                              30 + 28 * gens.size());
  const auto X = [max](double v) { return 200 + 400 * std::clamp(v / max, 0.0, 1.0); };
  int r = 0;
  for (const auto& g : gens) {
    const int y = 10 + 28 * r;
    const std::string name = html_escape(g["generator"].get<std::string>());
    s += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"11\">{}</text>\n", y + 14, name);
    if (g[value_key].is_number()) {
      const double v = g[value_key].get<double>();
      s += fmt::format("<rect class=\"bar\" x=\"200\" y=\"{}\" width=\"{:.1f}\" height=\"18\" "
                       "fill=\"{}\"><title>{}: {:.3f}{}</title></rect>\n",
                       y, X(v) - 200, kPalette[r % 6], name, v, unit);
      if (g[interval_key].is_array())
        s += fmt::format("<line class=\"interval\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" "
                         "y2=\"{}\" stroke=\"#000\"/>\n",
                         X(g[interval_key][0].get<double>()), y + 9,
                         X(g[interval_key][1].get<double>()), y + 9);
    } else {
      s += fmt::format("<text x=\"204\" y=\"{}\" font-size=\"11\">none</text>\n", y + 14);
    }
    ++r;
  }
  s += fmt::format("<line x1=\"200\" y1=\"5\" x2=\"200\" y2=\"{}\" stroke=\"#000\"/>"
                   "<text x=\"560\" y=\"{}\" font-size=\"11\">{:.2f}{}</text>\n",
                   20 + 28 * gens.size(), 25 + 28 * gens.size(), max, unit);
  return s + "</svg>\n";
}

std::string false_start_plot(const json& gens) {
  std::set<std::string> classes;
  int maxv = 1;
  for (const auto& g : gens) {
    int total = 0;
    for (auto e = g["false_starts"].begin(); e != g["false_starts"].end(); ++e)
      classes.insert(e.key()), total += e.value().get<int>();
    maxv = std::max(maxv, total);
  }
  if (classes.empty())
    return "<p class=\"missing\" id=\"false-starts-missing\">no rejected candidate</p>\n";
  const std::vector<std::string> cls(classes.begin(), classes.end());
  std::string s =
      fmt::format("<svg id=\"false-starts\" width=\"640\" height=\"{}\" role=\"img\">\n",
                  40 + 28 * gens.size() + 16 * cls.size());
  int r = 0;
  for (const auto& g : gens) {
    const int y = 10 + 28 * r++;
    s += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"11\">{}</text>\n", y + 14,
                     html_escape(g["generator"].get<std::string>()));
    double x = 200;
    for (std::size_t k = 0; k < cls.size(); ++k) {
      const int v = g["false_starts"].value(cls[k], 0);
      if (v == 0) continue;
      const double w = 400.0 * v / maxv;
      s += fmt::format("<rect class=\"false-start\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" "
                       "height=\"18\" fill=\"{}\"><title>{}: {}</title></rect>\n",
                       x, y, w, kPalette[k % 6], html_escape(cls[k]), v);
      x += w;
    }
  }
  int k = 0;
  for (const auto& c : cls) {
    const int y = 20 + 28 * static_cast<int>(gens.size()) + 16 * k;
    s += fmt::format("<rect x=\"200\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text "
                     "x=\"214\" y=\"{}\" font-size=\"11\">{}</text>\n",
                     y, kPalette[k % 6], y + 9, html_escape(c));
    ++k;
  }
  return s + "</svg>\n";
}

} // namespace

std::string render_generator_comparison_html(const json& cmp) {
  const json& gens = cmp["overall"];
  double max_speedup = 1.0;
  bool any_speedup = false;
  for (const auto& g : gens)
    if (g["speedup_geomean"].is_number()) {
      any_speedup = true;
      const json& iv = g["speedup_interval"];
      max_speedup = std::max(max_speedup, iv.is_array() ? iv[1].get<double>()
                                                        : g["speedup_geomean"].get<double>());
    }
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kloop generator "
      "comparison</title>\n<style>body{font-family:sans-serif;margin:24px;} .missing{color:#777;"
      "font-style:italic;} pre{background:#f5f5f5;padding:8px}</style></head><body>\n"
      "<section id=\"generator-comparison\">\n<h1>Generator comparison</h1>\n";
  h += "<h2>Success rate (promoted / sessions, 95 % Wilson interval)</h2>\n" +
       bar_plot("success-rate", gens, "success_rate", "success_interval", 1.0, "");
  h += "<h2>Speed-up of promoted kernels (geometric mean, 95 % bootstrap interval)</h2>\n";
  h += any_speedup ? bar_plot("speedup-geomean", gens, "speedup_geomean", "speedup_interval",
                              max_speedup * 1.1, "x")
                   : "<p class=\"missing\" id=\"speedup-geomean-missing\">no promoted kernel "
                     "(sessions pending device validation have no speed-up)</p>\n";
  h += "<h2>False starts (first gate that rejected each candidate)</h2>\n" + false_start_plot(gens);
  h += "<h2>Tables</h2>\n<pre id=\"comparison-text\">" +
       html_escape(format_generator_comparison(cmp)) + "</pre>\n";
  return h + "</section>\n</body></html>\n";
}

} // namespace kloop::store
