// The checker-coverage analysis loop (see runner.h).
#include "mutation/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/core.h>

#include "holdout/holdout.h"

namespace kloop::mutation {
namespace {

using evaluator::GateStatus;

bool rejects(GateStatus s) {
  return s == GateStatus::kFail || s == GateStatus::kTimeout || s == GateStatus::kCrashed;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Per-case reasons of a worker batch, by case name (the worker's suite result: each case as
// evaluator::CaseResult::to_json(), its name under "case").
std::map<std::string, std::string> case_reasons(const evaluator::GpuRunResult& run) {
  std::map<std::string, std::string> out;
  if (!run.result.is_object() || !run.result.contains("suite")) return out;
  const nlohmann::json cases = run.result["suite"].value("cases", nlohmann::json::array());
  for (const auto& c : cases)
    if (c.is_object() && !c.value("pass", false))
      out[c.value("case", std::string())] = c.value("reason", std::string());
  return out;
}

// Names of the cases a batch passed.
std::set<std::string> passed_cases(const evaluator::GpuRunResult& run) {
  std::set<std::string> out;
  if (!run.result.is_object() || !run.result.contains("suite")) return out;
  const nlohmann::json cases = run.result["suite"].value("cases", nlohmann::json::array());
  for (const auto& c : cases)
    if (c.is_object() && c.value("pass", false)) out.insert(c.value("case", std::string()));
  return out;
}

struct Context {
  const op::Operator& op;
  const evaluator::Candidate& baseline;
  const std::string& baseline_cubin;
  const std::vector<nlohmann::json>& holdout_suite;
  const std::vector<nlohmann::json>& pool;
  MutantBackend& backend;
};

std::string name_of(const nlohmann::json& spec) {
  return spec.value("name", std::string());
}

// The search step of a mutant every gate and the holdout passed.
void search(const Context& cx, const evaluator::Candidate& c, const std::string& cubin,
            MutantOutcome& o) {
  const evaluator::GpuRunResult pr = cx.backend.run_cases(c, cubin, cx.pool);
  if (pr.status == GateStatus::kPass) {
    o.status = MutantStatus::kNotShownKillable;
    o.detail = fmt::format("no input among {} pool cases exposes it", cx.pool.size());
    return;
  }
  if (!rejects(pr.status)) {
    o.status = MutantStatus::kNotRun;
    o.detail =
        fmt::format("search batch {}: {}", evaluator::gate_status_name(pr.status), pr.reason);
    return;
  }
  const std::vector<nlohmann::json> fails = failing_cases(cx.op, pr, cx.pool);
  if (fails.empty()) {
    o.status = MutantStatus::kNotShownKillable;
    o.detail = "the search batch failed without naming a case: " + pr.reason;
    return;
  }
  const evaluator::GpuRunResult br = cx.backend.run_cases(cx.baseline, cx.baseline_cubin, fails);
  const std::set<std::string> baseline_ok = passed_cases(br);
  const std::map<std::string, std::string> reasons = case_reasons(pr);
  for (const nlohmann::json& s : fails) { // smallest first
    const std::string name = name_of(s);
    if (!baseline_ok.count(name)) continue;
    o.status = MutantStatus::kAdmissibleMissed;
    o.killing_input = s;
    const auto r = reasons.find(name);
    o.detail = fmt::format("fails {} ({} elements): {}; the unmodified baseline passes it", name,
                           cx.op.case_elements(s), r != reasons.end() ? r->second : pr.reason);
    return;
  }
  o.status = MutantStatus::kNotShownKillable;
  o.detail = fmt::format("{} pool inputs fail it but also fail the unmodified baseline "
                         "(discarded)",
                         fails.size());
}

MutantOutcome analyze_one(const Context& cx, const Mutant& m) {
  const auto t0 = std::chrono::steady_clock::now();
  MutantOutcome o;
  o.id = m.id;
  o.op = m.op;
  o.site = m.site;
  o.line = m.line;
  o.diff = m.diff();
  evaluator::Candidate c = cx.baseline;
  c.source = m.source;
  c.source_file_bytes = m.source.size();
  const evaluator::Evaluation ev = cx.backend.evaluate(c);
  o.phase_ms["gates"] = ms_since(t0);
  if (auto k = classify_evaluation(ev.report)) {
    o.status = k->status;
    o.gate = k->gate;
    o.detail = k->detail;
  } else if (!ev.build || ev.build->cubin.empty()) {
    o.status = MutantStatus::kNotRun;
    o.detail = "every gate passed but no cubin was kept for the holdout";
  } else {
    const auto th = std::chrono::steady_clock::now();
    const evaluator::GpuRunResult hr = cx.backend.run_cases(c, ev.build->cubin, cx.holdout_suite);
    o.phase_ms["holdout"] = ms_since(th);
    if (rejects(hr.status)) {
      o.status = MutantStatus::kKilled;
      o.gate = "holdout";
      o.detail = hr.reason;
    } else if (hr.status != GateStatus::kPass) {
      o.status = MutantStatus::kNotRun;
      o.detail = fmt::format("holdout {}: {}", evaluator::gate_status_name(hr.status), hr.reason);
    } else {
      const auto ts = std::chrono::steady_clock::now();
      search(cx, c, ev.build->cubin, o);
      o.phase_ms["search"] = ms_since(ts);
    }
  }
  o.wall_ms = ms_since(t0);
  return o;
}

} // namespace

std::optional<MutantOutcome> classify_evaluation(const evaluator::PublicReport& report) {
  for (const evaluator::GateResult& g : report.gates) {
    if (!rejects(g.status)) continue;
    MutantOutcome o;
    o.status = MutantStatus::kKilled;
    o.gate = g.name;
    o.detail = fmt::format("{}: {}", evaluator::gate_status_name(g.status), g.reason);
    return o;
  }
  for (const evaluator::GateResult& g : report.gates) {
    if (g.status == GateStatus::kPass) continue;
    if (g.status == GateStatus::kNotRun && g.reason.rfind(kSkippedPrefix, 0) == 0) continue;
    MutantOutcome o;
    o.status = MutantStatus::kNotRun;
    o.detail = fmt::format("{} {}: {}", g.name, evaluator::gate_status_name(g.status), g.reason);
    return o;
  }
  return std::nullopt;
}

std::vector<nlohmann::json> failing_cases(const op::Operator& op,
                                          const evaluator::GpuRunResult& run,
                                          const std::vector<nlohmann::json>& cases) {
  std::set<std::string> names;
  for (const auto& [name, reason] : case_reasons(run))
    names.insert(name);
  if (run.status == GateStatus::kCrashed || run.status == GateStatus::kTimeout) {
    std::string in_flight;
    if (run.result.is_object() && run.result.contains("fault") && run.result["fault"].is_object())
      in_flight = run.result["fault"].value("case_name", std::string());
    if (in_flight.empty() && run.progress.is_object())
      in_flight = run.progress.value("name", std::string());
    if (!in_flight.empty()) names.insert(in_flight);
  }
  std::vector<std::pair<std::int64_t, nlohmann::json>> sized;
  for (const nlohmann::json& s : cases)
    if (names.count(name_of(s))) sized.emplace_back(op.case_elements(s), s);
  std::stable_sort(sized.begin(), sized.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : name_of(a.second) < name_of(b.second);
  });
  std::vector<nlohmann::json> out;
  for (auto& [n, s] : sized)
    out.push_back(std::move(s));
  return out;
}

CoverageReport analyze(const op::Operator& op, const evaluator::Candidate& baseline,
                       const std::vector<Mutant>& mutants, MutantBackend& backend,
                       const AnalysisOptions& options,
                       const std::function<void(const std::string&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const evaluator::Evaluation base = backend.evaluate(baseline);
  for (const evaluator::GateResult& g : base.report.gates)
    if (rejects(g.status))
      throw evaluator::InfraError(fmt::format(
          "checker-coverage: the unmodified baseline is rejected by the {} gate ({}); fix the "
          "baseline (or the evaluator) before measuring mutants against it",
          g.name, g.reason));
  const std::string baseline_cubin = base.build ? base.build->cubin : std::string();
  holdout::SuiteOptions ho;
  ho.cases = options.holdout_cases;
  const std::vector<nlohmann::json> holdout_suite = holdout::generate_suite(op, options.seed, ho);
  const std::vector<nlohmann::json> pool = search_pool(op, options.seed, options.pool);
  const Context cx{op, baseline, baseline_cubin, holdout_suite, pool, backend};

  CoverageReport report;
  report.device = backend.device_name();
  report.outcomes.resize(mutants.size());
  std::atomic<std::size_t> next{0};
  std::mutex progress_mutex;
  auto worker = [&] {
    for (std::size_t i = next++; i < mutants.size(); i = next++) {
      MutantOutcome o;
      try {
        o = analyze_one(cx, mutants[i]);
      } catch (const std::exception& e) { // infrastructure: this mutant is not run, not killed
        o.id = mutants[i].id;
        o.op = mutants[i].op;
        o.site = mutants[i].site;
        o.line = mutants[i].line;
        o.diff = mutants[i].diff();
        o.status = MutantStatus::kNotRun;
        o.detail = std::string("infrastructure error: ") + e.what();
      }
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        progress(fmt::format("[{}/{}] {}: {}{} ({:.1f} s)", i + 1, mutants.size(), o.id,
                             status_name(o.status), o.gate.empty() ? "" : " by " + o.gate,
                             o.wall_ms / 1000));
      }
      report.outcomes[i] = std::move(o);
    }
  };
  const int jobs = std::clamp(options.jobs, 1, 64);
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j)
    threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads)
    t.join();
  report.wall_ms = ms_since(t0);
  return report;
}

} // namespace kloop::mutation
