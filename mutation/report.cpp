// Score arithmetic, JSON and table of the checker-coverage report (see report.h).
#include "mutation/report.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/core.h>

namespace kloop::mutation {

std::string_view status_name(MutantStatus s) {
  switch (s) {
  case MutantStatus::kKilled:
    return "killed";
  case MutantStatus::kAdmissibleMissed:
    return "admissible-missed";
  case MutantStatus::kNotShownKillable:
    return "not-shown-killable";
  case MutantStatus::kNotRun:
    return "not-run";
  }
  return "not-run";
}

const std::vector<std::string>& kill_gates() {
  static const std::vector<std::string> gates = {"contract",    "build",     "static",
                                                 "correctness", "sanitizer", "benchmark",
                                                 "roofline",    "holdout"};
  return gates;
}

bool is_cpu_gate(std::string_view gate) {
  return gate == "contract" || gate == "build" || gate == "static";
}

nlohmann::json MutantOutcome::to_json() const {
  return {{"id", id},
          {"op", op},
          {"site", site},
          {"line", line},
          {"diff", diff},
          {"status", status_name(status)},
          {"gate", gate.empty() ? nlohmann::json() : nlohmann::json(gate)},
          {"detail", detail},
          {"killing_input", killing_input},
          {"wall_ms", wall_ms},
          {"phase_ms", phase_ms}};
}

std::optional<double> Tally::score() const {
  if (admissible() == 0) return std::nullopt;
  return static_cast<double>(killed) / admissible();
}

void Tally::add(MutantStatus s) {
  switch (s) {
  case MutantStatus::kKilled:
    ++killed;
    break;
  case MutantStatus::kAdmissibleMissed:
    ++missed;
    break;
  case MutantStatus::kNotShownKillable:
    ++not_shown;
    break;
  case MutantStatus::kNotRun:
    ++not_run;
    break;
  }
}

Tally CoverageReport::total() const {
  Tally t;
  for (const MutantOutcome& o : outcomes)
    t.add(o.status);
  return t;
}

std::map<std::string, Tally> CoverageReport::per_operator() const {
  std::map<std::string, Tally> m;
  for (const MutantOutcome& o : outcomes)
    m[o.op].add(o.status);
  return m;
}

std::map<std::string, int> CoverageReport::per_gate() const {
  std::map<std::string, int> m;
  for (const std::string& g : kill_gates())
    m[g] = 0;
  for (const MutantOutcome& o : outcomes)
    if (o.status == MutantStatus::kKilled) ++m[o.gate];
  return m;
}

int CoverageReport::cpu_killed() const {
  return static_cast<int>(std::count_if(outcomes.begin(), outcomes.end(), [](const auto& o) {
    return o.status == MutantStatus::kKilled && is_cpu_gate(o.gate);
  }));
}

std::vector<const MutantOutcome*> CoverageReport::gaps() const {
  std::vector<const MutantOutcome*> out;
  for (const MutantOutcome& o : outcomes)
    if (o.status == MutantStatus::kAdmissibleMissed) out.push_back(&o);
  return out;
}

std::vector<Mutant> select_recorded(const CoverageRecord& record, std::string_view contract_id,
                                    std::string_view source) {
  const nlohmann::json& sel = record.selection;
  const std::vector<std::string> rules = sel.at("operators").is_array()
                                             ? sel.at("operators").get<std::vector<std::string>>()
                                             : vocabulary(contract_id);
  return select_mutants(source, rules, sel.at("max_per_operator").get<int>(),
                        sel.at("max_mutants").get<int>());
}

namespace {
nlohmann::json score_json(const Tally& t) {
  const auto s = t.score();
  return s ? nlohmann::json(*s) : nlohmann::json();
}
nlohmann::json tally_json(const Tally& t) {
  return {{"killed", t.killed},           {"admissible_missed", t.missed},
          {"admissible", t.admissible()}, {"not_shown_killable", t.not_shown},
          {"not_run", t.not_run},         {"score", score_json(t)}};
}
std::string score_text(const Tally& t) {
  const auto s = t.score();
  return s ? fmt::format("{:.3f}", *s) : std::string("n/a");
}
} // namespace

nlohmann::json CoverageReport::to_json() const {
  const Tally t = total();
  nlohmann::json j = tally_json(t);
  j["complete"] = complete();
  j["cpu_killed"] = cpu_killed();
  j["mutant_count"] = outcomes.size();
  j["per_operator"] = nlohmann::json::object();
  for (const auto& [op, tally] : per_operator())
    j["per_operator"][op] = tally_json(tally);
  j["per_gate"] = per_gate();
  j["gaps"] = nlohmann::json::array();
  for (const MutantOutcome* g : gaps())
    j["gaps"].push_back(
        {{"id", g->id}, {"diff", g->diff}, {"input", g->killing_input}, {"failure", g->detail}});
  j["not_shown_killable_mutants"] = nlohmann::json::array();
  j["mutants"] = nlohmann::json::array();
  for (const MutantOutcome& o : outcomes) {
    if (o.status == MutantStatus::kNotShownKillable)
      j["not_shown_killable_mutants"].push_back(o.id);
    j["mutants"].push_back(o.to_json());
  }
  j["selection"] = selection;
  j["device"] = device;
  j["wall_ms"] = wall_ms;
  return j;
}

std::string CoverageReport::table() const {
  std::string out = fmt::format("{:<22} {:>6} {:>7} {:>9} {:>8} {:>7}\n", "operator", "killed",
                                "missed", "not-shown", "not-run", "score");
  for (const auto& [op, t] : per_operator())
    out += fmt::format("{:<22} {:>6} {:>7} {:>9} {:>8} {:>7}\n", op, t.killed, t.missed,
                       t.not_shown, t.not_run, score_text(t));
  const Tally t = total();
  out += fmt::format("{:<22} {:>6} {:>7} {:>9} {:>8} {:>7}\n", "TOTAL", t.killed, t.missed,
                     t.not_shown, t.not_run, score_text(t));
  out += "\nkilled by gate:";
  for (const auto& [gate, n] : per_gate())
    if (n > 0) out += fmt::format(" {} {};", gate, n);
  out += "\n";
  for (const MutantOutcome& o : outcomes) {
    if (o.status == MutantStatus::kKilled) continue;
    out += fmt::format("\n{} {} (line {}): {}\n", status_name(o.status), o.id, o.line, o.detail);
    if (!o.killing_input.is_null())
      out += fmt::format("  smallest input: {}\n", o.killing_input.dump());
    std::string diff = o.diff;
    for (std::size_t p = 0; (p = diff.find('\n', p)) != std::string::npos; p += 3)
      diff.replace(p, 1, "\n  ");
    out += "  " + diff + "\n";
  }
  out += fmt::format("\nmutation score = killed / admissible = {} / {} = {}{}\n", t.killed,
                     t.admissible(), score_text(t),
                     complete() ? "" : fmt::format(" (INCOMPLETE: {} mutants not run)", t.not_run));
  return out;
}

nlohmann::json CoverageRecord::to_json() const {
  return {{"score", score ? nlohmann::json(*score) : nlohmann::json()},
          {"killed", killed},
          {"admissible", admissible},
          {"cpu_killed", cpu_killed},
          {"mutants", mutants},
          {"selection", selection}};
}

CoverageRecord CoverageRecord::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("record: expected a JSON object");
  CoverageRecord r;
  auto int_field = [&](const char* key) {
    if (!j.contains(key) || !j.at(key).is_number_integer())
      throw std::invalid_argument(fmt::format("record: field '{}' must be an integer", key));
    return j.at(key).get<int>();
  };
  if (!j.contains("score") || !(j.at("score").is_null() || j.at("score").is_number()))
    throw std::invalid_argument("record: field 'score' must be a number or null");
  if (j.at("score").is_number()) r.score = j.at("score").get<double>();
  r.killed = int_field("killed");
  r.admissible = int_field("admissible");
  r.cpu_killed = int_field("cpu_killed");
  r.mutants = int_field("mutants");
  if (!j.contains("selection") || !j.at("selection").is_object())
    throw std::invalid_argument("record: field 'selection' must be an object");
  r.selection = j.at("selection");
  return r;
}

CoverageRecord CoverageRecord::of(const CoverageReport& report) {
  const Tally t = report.total();
  CoverageRecord r;
  if (report.complete()) r.score = t.score();
  r.killed = t.killed;
  r.admissible = t.admissible();
  r.cpu_killed = report.cpu_killed();
  r.mutants = static_cast<int>(report.outcomes.size());
  r.selection = report.selection;
  return r;
}

std::string compare_to_record(const CoverageReport& report, const CoverageRecord& record,
                              bool* selection_mismatch) {
  *selection_mismatch = report.selection != record.selection;
  if (*selection_mismatch) return "the record was made with a different mutant selection";
  if (report.cpu_killed() < record.cpu_killed)
    return fmt::format("contract/build/static gates killed {} mutants, the record says {}",
                       report.cpu_killed(), record.cpu_killed);
  if (!report.complete() || !record.score) return "";
  const auto s = report.total().score();
  constexpr double kSlack = 1e-9; // only rounding; the evaluator may only get stronger
  if (!s || *s + kSlack < *record.score)
    return fmt::format("mutation score {} fell below the recorded {:.4f}",
                       s ? fmt::format("{:.4f}", *s) : std::string("n/a"), *record.score);
  return "";
}

} // namespace kloop::mutation
