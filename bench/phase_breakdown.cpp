// Where a candidate's time goes (issue 26), through the same evaluator as `kloop optimize`
// (sandboxed build, static inspection, the device gates on the chosen devices):
//   sequential (default): each candidate evaluated RUNS times one after another; the median,
//     minimum and maximum wall time of every phase (evaluator/phases.h) per candidate;
//   --batch: every candidate (RUNS copies each) as one batch through the multi-device scheduler
//     (agent/scheduler.h): the batch's wall time, candidates per hour, and each candidate's verdict
//     and deciding gate, checked against the corpus' expect.json where it has one.
// Candidates: --candidate DIR (repeatable), --corpus (every kernels/rmsnorm/corpus/* folder),
// --family NAME (an offline-family variant, repeatable); default the in-tree baseline.
// KLOOP_THROUGHPUT selects the switches (evaluator/throughput.h), so one device call can measure
// before (KLOOP_THROUGHPUT=legacy) and after (the defaults); scripts/device-run.sh does
// (THROUGHPUT=1, THROUGHPUT_CORPUS=1) and scripts/compare-devices.sh compares --devices runs.
// Without a GPU the host phases are real and the device gates report not_run. Exit 0, or 1 with
// --batch when a corpus candidate's verdict or deciding gate differs from its expect.json.
//
// Usage: phase_breakdown [--candidate DIR]... [--corpus] [--family NAME]... [--runs N] [--batch]
//                        [--devices SPEC] [--worker-timeout S] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "agent/components.h"
#include "evaluator/candidate.h"
#include "evaluator/phases.h"
#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/operator.h"

namespace {

using namespace kloop;
namespace fs = std::filesystem;
using nlohmann::json;

class StderrProgress : public agent::ProgressSink {
public:
  void line(const std::string& text) override { std::fprintf(stderr, "%s\n", text.c_str()); }
};

struct Named {
  std::string name;
  evaluator::Candidate candidate;
  json expect; // the corpus' expect.json, null elsewhere
};

struct Args {
  std::vector<std::string> dirs, families;
  bool corpus = false, batch = false, json = false;
  int runs = 1;
  double worker_timeout_s = 30;
  std::string devices = "all";
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool value = i + 1 < argc;
    if (arg == "--candidate" && value)
      a.dirs.push_back(argv[++i]);
    else if (arg == "--family" && value)
      a.families.push_back(argv[++i]);
    else if (arg == "--runs" && value)
      a.runs = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--devices" && value)
      a.devices = argv[++i];
    else if (arg == "--worker-timeout" && value)
      a.worker_timeout_s = std::max(1.0, std::atof(argv[++i]));
    else if (arg == "--corpus")
      a.corpus = true;
    else if (arg == "--batch")
      a.batch = true;
    else if (arg == "--json")
      a.json = true;
    else
      return false;
  }
  return true;
}

// The candidates the arguments name; an unreadable one is an error (returns the message).
std::string collect(const Args& a, std::vector<Named>& out) {
  std::vector<std::string> dirs = a.dirs;
  const fs::path corpus = fs::path(KLOOP_SOURCE_DIR) / "kernels/rmsnorm/corpus";
  if (a.corpus) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(corpus))
      if (e.is_directory()) found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    dirs.insert(dirs.end(), found.begin(), found.end());
  }
  if (dirs.empty() && a.families.empty())
    dirs.push_back(std::string(KLOOP_SOURCE_DIR) + "/kernels/rmsnorm/baseline");
  for (const auto& d : dirs) {
    const auto loaded = evaluator::load_candidate_dir(d);
    if (!loaded.candidate) return d + ": " + loaded.error;
    Named n{fs::path(d).filename().string(), *loaded.candidate, nullptr};
    std::ifstream expect(fs::path(d) / "expect.json");
    if (expect) n.expect = json::parse(expect, nullptr, false);
    out.push_back(std::move(n));
  }
  for (const auto& f : a.families) {
    const auto v = rmsnorm::variant_by_name(f);
    if (!v) return "--family " + f + ": no such variant of the offline family";
    const auto g = rmsnorm::generate(*v);
    evaluator::Candidate c;
    c.source = g.kernel_cu;
    c.manifest_text = g.manifest_json;
    c.source_file_bytes = c.source.size();
    c.manifest_file_bytes = c.manifest_text.size();
    out.push_back({f, std::move(c), nullptr});
  }
  return "";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The first gate that did not pass (the deciding one), or null when every gate passed.
json deciding_gate(const evaluator::PublicReport& r) {
  for (const auto& g : r.gates)
    if (g.status != evaluator::GateStatus::kPass)
      return {{"gate", g.name},
              {"status", evaluator::gate_status_name(g.status)},
              {"reason", g.reason}};
  return nullptr;
}

json candidate_record(const Named& n, const evaluator::Evaluation& ev) {
  json gates = json::object();
  for (const auto& g : ev.report.gates)
    gates[g.name] = evaluator::gate_status_name(g.status);
  json out{{"name", n.name},
           {"verdict", evaluator::verdict_name(ev.report.verdict)},
           {"deciding", deciding_gate(ev.report)},
           {"gates", gates},
           {"phases", evaluator::phases_telemetry(ev.phases, ev.wall_ms)}};
  if (!n.expect.is_null() && ev.report.verdict != evaluator::Verdict::kPendingDeviceValidation) {
    const bool pass_expected = n.expect.value("verdict", "") == "pass";
    const json& d = out["deciding"];
    const bool same = pass_expected
                          ? ev.report.verdict == evaluator::Verdict::kPass
                          : !d.is_null() && d.value("gate", "") == n.expect.value("gate", "");
    out["expect"] = n.expect;
    out["as_expected"] = same;
  }
  return out;
}

// The phase table of one candidate's runs: per phase name, median/min/max over the runs.
void print_table(const std::string& name, const std::vector<evaluator::Evaluation>& runs) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> ms;
  std::map<std::string, bool> nested;
  std::map<std::string, std::pair<long, int>> rounds; // rounds, states
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (const auto& p : runs[r].phases) {
      if (!ms.count(p.name)) order.push_back(p.name);
      auto& v = ms[p.name];
      v.resize(runs.size(), 0.0);
      v[r] += p.wall_ms;
      nested[p.name] = p.nested;
      rounds[p.name].first += p.detail.value("rounds", 0L);
      rounds[p.name].second += p.detail.value("states", 0);
    }
  std::vector<double> walls;
  for (const auto& ev : runs)
    walls.push_back(ev.wall_ms);
  std::printf("\n%s: %zu run(s), verdict %s\n", name.c_str(), runs.size(),
              std::string(evaluator::verdict_name(runs.back().report.verdict)).c_str());
  std::printf("  %-36s %9s %9s %9s\n", "phase", "median s", "min s", "max s");
  const auto row = [](const std::string& label, std::vector<double> v) {
    return fmt::format("  {:<36} {:9.3f} {:9.3f} {:9.3f}", label, median(v) / 1000,
                       *std::min_element(v.begin(), v.end()) / 1000,
                       *std::max_element(v.begin(), v.end()) / 1000);
  };
  std::printf("%s\n", row("evaluation (wall)", walls).c_str());
  for (const auto& p : order) {
    std::string line = row((nested[p] ? "  " : "") + p, ms[p]);
    if (rounds[p].second > 0)
      line += fmt::format("  {:.1f} rounds per state",
                          static_cast<double>(rounds[p].first) / rounds[p].second);
    std::printf("%s\n", line.c_str());
  }
}

} // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: phase_breakdown [--candidate DIR]... [--corpus] [--family NAME]... "
                 "[--runs N] [--batch] [--devices SPEC] [--worker-timeout S] [--json]\n");
    return 2;
  }
  std::vector<Named> named;
  if (const std::string err = collect(a, named); !err.empty()) {
    std::fprintf(stderr, "phase_breakdown: %s\n", err.c_str());
    return 2;
  }
  agent::DeviceOptions o;
  o.devices = a.devices;
  o.worker_timeout_s = a.worker_timeout_s;
  StderrProgress progress;
  std::optional<agent::DeviceContext> device;
  try {
    o.throughput = evaluator::throughput_from_env();
    device.emplace(o, progress);
  } catch (const std::exception& e) { // a bad KLOOP_THROUGHPUT or --devices
    std::fprintf(stderr, "phase_breakdown: %s\n", e.what());
    return 2;
  }
  // The evaluator first: its baseline build is a start-up phase of the throughput record.
  agent::CandidateEvaluator& gates = device->evaluator(rmsnorm::operator_instance());
  json doc{{"throughput", device->throughput_record()}, {"candidates", json::array()}};
  int unexpected = 0;
  if (a.batch) {
    std::vector<evaluator::Candidate> batch;
    std::vector<const Named*> of;
    for (int r = 0; r < a.runs; ++r)
      for (const auto& n : named) {
        batch.push_back(n.candidate);
        of.push_back(&n);
      }
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = gates.evaluate_batch(batch, nullptr);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!out[i]) continue;
      json rec = candidate_record(*of[i], *out[i]);
      unexpected += rec.value("as_expected", true) ? 0 : 1;
      doc["candidates"].push_back(std::move(rec));
    }
    doc["batch"] = {{"candidates", batch.size()},
                    {"wall_s", wall},
                    {"per_candidate_s", wall / static_cast<double>(batch.size())},
                    {"candidates_per_hour", 3600.0 * static_cast<double>(batch.size()) / wall},
                    {"unexpected", unexpected}};
  } else {
    for (const auto& n : named) {
      std::vector<evaluator::Evaluation> runs;
      for (int r = 0; r < a.runs; ++r)
        runs.push_back(gates.evaluate(n.candidate));
      for (const auto& ev : runs)
        doc["candidates"].push_back(candidate_record(n, ev));
      if (!a.json) print_table(n.name, runs);
    }
  }
  if (a.json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return unexpected ? 1 : 0;
  }
  std::printf("\ndevices [%s], switches %s\n",
              fmt::format("{}", fmt::join(device->devices(), ", ")).c_str(),
              doc["throughput"]["switches"].dump().c_str());
  for (const auto& s : doc["throughput"]["startup"])
    std::printf("startup %-20s %8.3f s\n", s.value("name", "").c_str(),
                s.value("wall_ms", 0.0) / 1000);
  if (a.batch) {
    for (const auto& c : doc["candidates"])
      std::printf("  %-36s %-26s %s%s\n", c["name"].get<std::string>().c_str(),
                  c["verdict"].get<std::string>().c_str(),
                  c["deciding"].is_null() ? "" : c["deciding"].value("gate", "").c_str(),
                  c.value("as_expected", true) ? "" : "  (NOT as expect.json says)");
    std::printf("batch of %zu: %.2f s wall, %.2f s per candidate, %.0f candidates per hour, %d "
                "unexpected\n",
                doc["batch"]["candidates"].get<std::size_t>(), doc["batch"]["wall_s"].get<double>(),
                doc["batch"]["per_candidate_s"].get<double>(),
                doc["batch"]["candidates_per_hour"].get<double>(), unexpected);
  }
  return unexpected ? 1 : 0;
}
