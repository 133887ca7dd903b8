// Checker coverage on a device, per registered operator: the selection recorded in the operator's
// checked-in record (tests/support/checker_records.h: tests/gpu/checker_coverage_record.json for
// RMSNorm, tests/gpu/checker_coverage_record_<name>.json for the others) runs in full on the
// operator's in-tree baseline (gates, holdout, killing-input search); the score must not fall below
// the recorded one (the evaluator may only get stronger), and every missing-barrier mutant must be
// killed by correctness (results differ between repeats) or the sanitizer (racecheck).
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "mutation/report.h"
#include "mutation/runner.h"
#include "mutation/worker_backend.h"
#include "tests/support/checker_records.h"

namespace kloop::mutation {
namespace {

using test_support::CheckerRecord;

class GpuCheckerCoverageTest : public ::testing::TestWithParam<CheckerRecord> {};

TEST_P(GpuCheckerCoverageTest, ScoreIsNotBelowTheRecordAndMissingBarriersAreKilled) {
  const CheckerRecord& rec = GetParam();
  const op::Operator& op = *rec.op;
  std::ifstream in(rec.path);
  ASSERT_TRUE(in) << "missing " << rec.path << ": record it on the GPU machine with "
                  << "CHECKER_COVERAGE=record CC_OP=" << rec.name()
                  << " scripts/device-run.sh --remote";
  const CoverageRecord record = CoverageRecord::from_json(nlohmann::json::parse(in));
  const nlohmann::json& sel = record.selection;
  auto loaded =
      evaluator::load_candidate_dir(std::string(KLOOP_SOURCE_DIR) + "/" + op.baseline_folder());
  ASSERT_TRUE(loaded.candidate) << loaded.error;
  const std::vector<Mutant> mutants =
      select_recorded(record, op.contract_id(), loaded.candidate->source);

  WorkerBackendOptions bo;
  bo.op = &op;
  bo.with_benchmark = sel.value("with_benchmark", false);
  WorkerBackend backend(bo);
  ASSERT_TRUE(backend.has_device()) << backend.no_device_reason();
  AnalysisOptions ao;
  ao.seed = sel.at("seed").get<std::uint64_t>();
  ao.jobs = 4;
  CoverageReport report = analyze(op, *loaded.candidate, mutants, backend, ao,
                                  [](const std::string& l) { std::printf("%s\n", l.c_str()); });
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
                            "re-record with kloop checker-coverage "
                         << rec.name() << " --record " << rec.path;
  EXPECT_EQ(why, "");
  EXPECT_TRUE(record.score.has_value())
      << rec.path << " has no device score; write one with --record on the GPU machine";
}

INSTANTIATE_TEST_SUITE_P(Operators, GpuCheckerCoverageTest,
                         ::testing::ValuesIn(test_support::checker_records()),
                         [](const ::testing::TestParamInfo<CheckerRecord>& i) {
                           return i.param.name();
                         });

} // namespace
} // namespace kloop::mutation
