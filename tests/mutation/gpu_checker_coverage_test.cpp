// Checker coverage on a device: the selection recorded in tests/gpu/checker_coverage_record.json
// runs in full (gates, holdout, killing-input search); the score must not fall below the recorded
// one (the evaluator may only get stronger), and every missing-barrier mutant must be killed by
// correctness (results differ between repeats) or the sanitizer (racecheck).
#include <fstream>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/operator.h"

#include "mutation/worker_backend.h"

namespace kloop::mutation {
namespace {

const std::string kRecord =
    std::string(KLOOP_SOURCE_DIR) + "/tests/gpu/checker_coverage_record.json";

TEST(GpuCheckerCoverageTest, ScoreIsNotBelowTheRecordAndMissingBarriersAreKilled) {
  std::ifstream in(kRecord);
  ASSERT_TRUE(in) << "missing " << kRecord;
  const CoverageRecord record = CoverageRecord::from_json(nlohmann::json::parse(in));
  const nlohmann::json& sel = record.selection;
  std::vector<std::string> ops;
  if (sel.at("operators").is_array()) ops = sel.at("operators").get<std::vector<std::string>>();
  auto loaded =
      evaluator::load_candidate_dir(std::string(KLOOP_SOURCE_DIR) + "/kernels/rmsnorm/baseline");
  ASSERT_TRUE(loaded.candidate) << loaded.error;
  const std::vector<Mutant> mutants =
      select_mutants(loaded.candidate->source, ops, sel.at("max_per_operator").get<int>(),
                     sel.at("max_mutants").get<int>());

  WorkerBackendOptions bo;
  bo.op = &rmsnorm::operator_instance();
  bo.with_benchmark = sel.value("with_benchmark", false);
  WorkerBackend backend(bo);
  ASSERT_TRUE(backend.has_device()) << backend.no_device_reason();
  AnalysisOptions ao;
  ao.seed = sel.at("seed").get<std::uint64_t>();
  ao.jobs = 4;
  CoverageReport report = analyze(rmsnorm::operator_instance(), *loaded.candidate, mutants, backend,
                                  ao, [](const std::string& l) { std::printf("%s\n", l.c_str()); });
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& m : mutants)
    ids.push_back(m.id);
  report.selection = sel;
  report.selection["mutants"] = ids;
  std::printf("%s", report.table().c_str());

  int barriers = 0;
  for (const MutantOutcome& o : report.outcomes) {
    if (o.op != "barrier-remove") continue;
    ++barriers;
    EXPECT_EQ(o.status, MutantStatus::kKilled) << o.id << ": " << o.detail;
    EXPECT_TRUE(o.gate == "correctness" || o.gate == "sanitizer") << o.id << ": " << o.gate;
  }
  EXPECT_GT(barriers, 0) << "the recorded selection has no barrier-remove mutant";
  EXPECT_TRUE(report.complete());
  bool mismatch = false;
  const std::string why = compare_to_record(report, record, &mismatch);
  EXPECT_FALSE(mismatch) << "the baseline's mutants changed since the record was written; "
                            "re-record with kloop checker-coverage rmsnorm --record "
                         << kRecord;
  EXPECT_EQ(why, "");
  if (!record.score)
    std::printf("note: the record has no device score yet; write one with --record\n");
}

} // namespace
} // namespace kloop::mutation
