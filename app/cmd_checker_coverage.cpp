// `kloop checker-coverage OP` (rmsnorm, softmax): mutation analysis of the evaluator
// (mutation/). Mutants of the operator's in-tree baseline (its mutation vocabulary, unless
// --operators names rules) go through the same gates as any candidate; survivors run the holdout
// suite and a killing-input search. Prints the report (table or --json), stores it (--store), and
// writes or checks the recorded score (--record / --check-record). Exit codes: 0 done (and not
// weaker than the record), 1 the score fell below the record, 2 usage (bad flag, unknown
// operator, unreadable or mismatched record), 3 could not finish (no device: mutants not run;
// infrastructure fault).
#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "app/commands.h"
#include "app/work_root.h"
#include "evaluator/candidate.h"
#include "evaluator/subprocess.h"
#include "kernels/registry.h"
#include "mutation/operators.h"
#include "mutation/runner.h"
#include "mutation/store_report.h"
#include "mutation/worker_backend.h"
#include "store/store.h"

namespace kloop::app {
namespace {

struct CoverageArgs {
  std::string op, store_dir, operators, baseline_dir, record, check_record;
  bool json = false, no_sandbox = false, with_benchmark = false, list = false;
  int max_mutants = 0, max_per_operator = 3, jobs = 4, sanitizer_jobs = 1;
  double worker_timeout_s = 120;
  std::uint64_t seed = 1;
};

std::vector<std::string> split_csv(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The operator's in-tree baseline as installed next to kloop (evaluator::data_path; InfraError
// when absent).
std::string default_baseline_dir(const op::Operator& op) {
  return evaluator::data_path(op.baseline_folder());
}

int usage(const std::string& message) {
  std::fprintf(stderr, "kloop checker-coverage: %s\n", message.c_str());
  return kExitUsage;
}

int run_coverage(const CoverageArgs& a) {
  if (a.list) {
    // With an operator: its vocabulary only; without: every rule.
    const op::Operator* named = nullptr;
    try {
      if (!a.op.empty()) named = &resolve_operator(a.op);
    } catch (const UsageError& e) {
      return usage(e.what());
    }
    const std::vector<std::string> mine =
        named ? mutation::vocabulary(named->contract_id()) : std::vector<std::string>{};
    for (const auto& o : mutation::operators())
      if (!named || std::find(mine.begin(), mine.end(), o.name) != mine.end())
        std::printf("%-24s %s\n", std::string(o.name).c_str(), std::string(o.doc).c_str());
    return kExitOk;
  }
  const op::Operator* op = nullptr;
  try {
    op = &resolve_operator(a.op);
  } catch (const UsageError& e) {
    return usage(e.what());
  }
  const std::vector<std::string> ops = split_csv(a.operators);
  if (!a.operators.empty() && ops.empty())
    return usage("--operators '" + a.operators +
                 "' names no operator; leave it out for the operator's vocabulary, or "
                 "--list-operators prints the names");
  for (const std::string& o : ops)
    if (!mutation::is_operator(o))
      return usage("unknown mutation operator '" + o +
                   "' in --operators; --list-operators "
                   "prints the names");
  if (a.max_mutants < 0) return usage("--max-mutants must be >= 0 (0: no cap)");
  if (a.max_per_operator < 1) return usage("--max-per-operator must be >= 1");
  if (a.jobs < 1 || a.jobs > 64) return usage("--jobs must be in [1, 64]");
  if (a.sanitizer_jobs < 1 || a.sanitizer_jobs > 64)
    return usage("--sanitizer-jobs must be in [1, 64]");
  // Everything that can be refused is refused before the (long) analysis runs.
  std::error_code ec;
  if (!a.record.empty() && !a.check_record.empty() &&
      (a.record == a.check_record || std::filesystem::equivalent(a.record, a.check_record, ec)))
    return usage("--record and --check-record name the same file (" + a.record +
                 "); writing the new record would replace the one it is checked against");
  if (!a.record.empty()) {
    const std::filesystem::path parent = std::filesystem::absolute(a.record, ec).parent_path();
    if (std::filesystem::is_directory(a.record, ec) || !std::filesystem::is_directory(parent, ec) ||
        ::access(parent.c_str(), W_OK) != 0)
      return usage("cannot write --record " + a.record +
                   ": give a file path in an existing, writable folder");
  }
  std::optional<store::Store> st;
  if (!a.store_dir.empty()) {
    try {
      st.emplace(store::Store::open(a.store_dir));
    } catch (const store::StoreError& e) { // README "Exit codes", as `kloop optimize --store`
      std::fprintf(stderr, "kloop checker-coverage: --store %s: %s\n", a.store_dir.c_str(),
                   e.what());
      return exit_code_of(e);
    }
  }
  std::optional<mutation::CoverageRecord> recorded;
  if (!a.check_record.empty()) {
    std::ifstream in(a.check_record);
    if (!in)
      return usage("cannot read --check-record " + a.check_record +
                   "; give an existing "
                   "record file");
    std::error_code dir_ec;
    if (std::filesystem::is_directory(a.check_record, dir_ec))
      return usage("--check-record " + a.check_record +
                   " is a directory; give a record file written by --record FILE");
    // Parsed without exceptions: a parser exception's text ("[json.exception.parse_error.101]
    // ...") would reach the user raw.
    const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded())
      return usage("--check-record " + a.check_record +
                   " is not JSON; give a record file written by `kloop checker-coverage "
                   "rmsnorm --record FILE`");
    try {
      recorded = mutation::CoverageRecord::from_json(doc);
    } catch (const std::exception& e) {
      return usage(fmt::format("--check-record {}: {}", a.check_record, e.what()));
    }
  }
  const std::string baseline_dir =
      a.baseline_dir.empty() ? default_baseline_dir(*op) : a.baseline_dir;
  auto loaded = evaluator::load_candidate_dir(baseline_dir);
  if (!loaded.candidate) return usage(loaded.error);

  // No --operators: the operator's own vocabulary (mutation::vocabulary; "all" in the record).
  const std::vector<std::string> vocabulary = mutation::vocabulary(op->contract_id());
  if (ops.empty() && vocabulary.empty())
    return usage(fmt::format("{} has no mutation vocabulary (mutation/operators.cpp); name rules "
                             "with --operators",
                             op->contract_id()));
  const std::vector<mutation::Mutant> mutants = mutation::select_mutants(
      loaded.candidate->source, ops.empty() ? vocabulary : ops, a.max_per_operator, a.max_mutants);
  mutation::WorkerBackendOptions bo;
  bo.op = op;
  const WorkRoot work_root; // $TMPDIR of this run; a killed run's is removed by the next kloop
  if (a.no_sandbox) {
    bo.build.sandbox = evaluator::SandboxRequest::kNoSandbox;
    std::fprintf(stderr, "kloop checker-coverage: --no-sandbox: mutants are compiled WITHOUT "
                         "isolation (recorded in the build gate's evidence)\n");
  }
  bo.worker_deadline = std::chrono::milliseconds(static_cast<long long>(a.worker_timeout_s * 1e3));
  bo.with_benchmark = a.with_benchmark;
  bo.max_concurrent_sanitizers = a.sanitizer_jobs;
  mutation::WorkerBackend backend(bo);
  std::fprintf(stderr, "checker-coverage: %zu mutants of %s; device: %s\n", mutants.size(),
               baseline_dir.c_str(),
               backend.has_device() ? backend.device_name().c_str()
                                    : ("none (" + backend.no_device_reason() +
                                       "); only contract, build and static gates run")
                                          .c_str());
  mutation::AnalysisOptions ao;
  ao.seed = a.seed;
  ao.jobs = a.jobs;
  mutation::CoverageReport report =
      mutation::analyze(*op, *loaded.candidate, mutants, backend, ao, [](const std::string& line) {
        std::fprintf(stderr, "%s\n", line.c_str());
      });
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& m : mutants)
    ids.push_back(m.id);
  report.selection = {{"operators", ops.empty() ? nlohmann::json("all") : nlohmann::json(ops)},
                      {"max_per_operator", a.max_per_operator},
                      {"max_mutants", a.max_mutants},
                      {"seed", a.seed},
                      {"with_benchmark", a.with_benchmark},
                      {"mutants", ids}};

  if (a.json)
    std::printf("%s\n", report.to_json().dump(2).c_str());
  else
    std::printf("%s", report.table().c_str());
  if (st) {
    const std::int64_t id =
        mutation::store_report(*st, report, {KLOOP_VERSION, KLOOP_GIT_COMMIT, a.seed, op});
    std::fprintf(stderr, "checker-coverage: stored as session %lld in %s\n",
                 static_cast<long long>(id), a.store_dir.c_str());
  }
  if (!a.record.empty()) {
    std::ofstream out(a.record, std::ios::trunc);
    if (!(out << mutation::CoverageRecord::of(report).to_json().dump(2) << "\n"))
      return usage("cannot write --record " + a.record);
    std::fprintf(stderr, "checker-coverage: record written to %s\n", a.record.c_str());
  }
  if (recorded) {
    bool mismatch = false;
    const std::string why = mutation::compare_to_record(report, *recorded, &mismatch);
    if (mismatch)
      return usage(fmt::format("--check-record {}: {}; run with the flags it was recorded with, "
                               "or write a new one with --record",
                               a.check_record, why));
    if (!why.empty()) {
      std::fprintf(stderr, "checker-coverage: the evaluator got weaker: %s (record %s)\n",
                   why.c_str(), a.check_record.c_str());
      return kExitRejected;
    }
    if (report.complete())
      std::fprintf(stderr, "checker-coverage: not weaker than the record %s\n",
                   a.check_record.c_str());
    else
      std::fprintf(stderr,
                   "checker-coverage: NOT compared with the record %s: the run is incomplete "
                   "(mutants not run), so it has no score to compare\n",
                   a.check_record.c_str());
  }
  return report.complete() ? kExitOk : kExitCouldNotFinish;
}

} // namespace

void register_checker_coverage(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<CoverageArgs>();
  auto* sub = app.add_subcommand(
      "checker-coverage",
      "Mutation analysis of the evaluator: mutants of the in-tree baseline through every gate, the "
      "holdout and a killing-input search; mutation score = killed / admissible. Exit: 0 done, 1 "
      "score below --check-record, 2 usage, 3 could not finish (no device)");
  sub->add_option("op", a->op, "Operator (kloop operators lists them)");
  sub->add_flag("--list-operators", a->list,
                "Print the mutation operators (of OP's vocabulary, when given) and exit");
  sub->add_option("--store", a->store_dir, "Store the report in this store directory");
  sub->add_flag("--json", a->json, "Print the report as one JSON document");
  sub->add_option("--operators", a->operators,
                  "Comma-separated mutation operator names (default: OP's vocabulary)");
  sub->add_option("--max-mutants", a->max_mutants,
                  "Cap on mutants, round-robin over operators "
                  "(default 0: no cap)");
  sub->add_option("--max-per-operator", a->max_per_operator,
                  "Sites per operator, spread evenly (default 3)");
  sub->add_option("--jobs", a->jobs, "Mutants evaluated concurrently (default 4)");
  sub->add_option("--sanitizer-jobs", a->sanitizer_jobs,
                  "Sanitizer gates run at once (default 1: compute-sanitizer runs time-slice the "
                  "one GPU)");
  sub->add_flag("--no-sandbox", a->no_sandbox,
                "Build without namespace isolation (recorded; only for trusted sources)");
  sub->add_option("--worker-timeout", a->worker_timeout_s,
                  "Watchdog per GPU worker batch in seconds (default 120)")
      ->check(finite_number_check(1, 3600, "seconds"));
  sub->add_option("--seed", a->seed, "Seed of the holdout suite and the search pool (default 1)")
      ->check(seed_check());
  sub->add_flag("--with-benchmark", a->with_benchmark,
                "Also run the benchmark and roofline gates per mutant (slow)");
  sub->add_option("--baseline", a->baseline_dir,
                  "Candidate folder to mutate (default: kernels/OP/baseline)");
  sub->add_option("--record", a->record, "Write the score record to this JSON file");
  sub->add_option("--check-record", a->check_record,
                  "Exit 1 when the score falls below the one in this record file");
  sub->callback([a, &exit_code] {
    if (!a->list && a->op.empty()) {
      std::fprintf(stderr, "kloop checker-coverage: the operator is required (%s)\n",
                   op::operator_names().c_str());
      exit_code = kExitUsage;
      return;
    }
    try {
      exit_code = run_coverage(*a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kloop checker-coverage: could not finish: %s\n", e.what());
      exit_code = kExitCouldNotFinish;
    }
  });
}

} // namespace kloop::app
