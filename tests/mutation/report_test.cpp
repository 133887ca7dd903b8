// Checker-coverage report arithmetic: score = killed / admissible, not-shown-killable and not-run
// excluded, per operator and per gate, and the record comparison.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/operator.h"
#include "mutation/operators.h"
#include "mutation/report.h"
#include "mutation/store_report.h"
#include "tests/support/checker_records.h"

namespace kloop::mutation {
namespace {

MutantOutcome outcome(const std::string& op, MutantStatus s, const std::string& gate = "") {
  MutantOutcome o;
  o.op = op;
  o.id = op + "#0";
  o.status = s;
  o.gate = gate;
  return o;
}

CoverageReport sample() {
  CoverageReport r;
  r.outcomes = {outcome("a", MutantStatus::kKilled, "build"),
                outcome("a", MutantStatus::kKilled, "correctness"),
                outcome("a", MutantStatus::kNotShownKillable),
                outcome("b", MutantStatus::kKilled, "sanitizer"),
                outcome("b", MutantStatus::kAdmissibleMissed),
                outcome("b", MutantStatus::kKilled, "static")};
  r.outcomes[4].killing_input = {{"name", "pool-3"}};
  r.selection = {{"seed", 1}};
  return r;
}

TEST(MutationReportTest, ScoreCountsKilledOverAdmissibleAndExcludesNotShownKillable) {
  const CoverageReport r = sample();
  const Tally t = r.total();
  EXPECT_EQ(t.killed, 4);
  EXPECT_EQ(t.missed, 1);
  EXPECT_EQ(t.not_shown, 1);
  EXPECT_EQ(t.admissible(), 5);
  ASSERT_TRUE(t.score());
  EXPECT_DOUBLE_EQ(*t.score(), 0.8);
  EXPECT_TRUE(r.complete());
}

TEST(MutationReportTest, PerOperatorAndPerGateTallies) {
  const CoverageReport r = sample();
  const auto ops = r.per_operator();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_DOUBLE_EQ(*ops.at("a").score(), 1.0); // 2 killed, the not-shown one excluded
  EXPECT_DOUBLE_EQ(*ops.at("b").score(), 2.0 / 3.0);
  const auto gates = r.per_gate();
  EXPECT_EQ(gates.at("build"), 1);
  EXPECT_EQ(gates.at("static"), 1);
  EXPECT_EQ(gates.at("correctness"), 1);
  EXPECT_EQ(gates.at("sanitizer"), 1);
  EXPECT_EQ(gates.at("holdout"), 0);
  EXPECT_EQ(r.cpu_killed(), 2);
  ASSERT_EQ(r.gaps().size(), 1u);
  EXPECT_EQ(r.gaps()[0]->op, "b");
}

TEST(MutationReportTest, NoAdmissibleMutantHasNoScoreAndNotRunMakesItIncomplete) {
  CoverageReport r;
  r.outcomes = {outcome("a", MutantStatus::kNotShownKillable), outcome("a", MutantStatus::kNotRun)};
  EXPECT_FALSE(r.total().score());
  EXPECT_FALSE(r.complete());
  EXPECT_TRUE(r.to_json().at("score").is_null());
  EXPECT_NE(r.table().find("INCOMPLETE: 1 mutants not run"), std::string::npos);
}

TEST(MutationReportTest, JsonListsGapsAndNotShownKillableSeparately) {
  const nlohmann::json j = sample().to_json();
  EXPECT_DOUBLE_EQ(j.at("score").get<double>(), 0.8);
  EXPECT_EQ(j.at("admissible"), 5);
  ASSERT_EQ(j.at("gaps").size(), 1u);
  EXPECT_EQ(j.at("gaps")[0].at("input").at("name"), "pool-3");
  EXPECT_EQ(j.at("not_shown_killable_mutants"), nlohmann::json::array({"a#0"}));
  EXPECT_EQ(j.at("mutants").size(), 6u);
  EXPECT_EQ(j.at("per_gate").at("sanitizer"), 1);
}

TEST(MutationReportTest, RecordRoundTripsAndDetectsAFallingScore) {
  const CoverageReport r = sample();
  const CoverageRecord rec = CoverageRecord::from_json(CoverageRecord::of(r).to_json());
  ASSERT_TRUE(rec.score);
  EXPECT_DOUBLE_EQ(*rec.score, 0.8);
  bool mismatch = true;
  EXPECT_EQ(compare_to_record(r, rec, &mismatch), "");
  EXPECT_FALSE(mismatch);

  CoverageReport weaker = r;
  weaker.outcomes[3].status = MutantStatus::kAdmissibleMissed; // the sanitizer kill is lost
  EXPECT_NE(compare_to_record(weaker, rec, &mismatch).find("fell below"), std::string::npos);

  CoverageReport other = r;
  other.selection = {{"seed", 2}};
  compare_to_record(other, rec, &mismatch);
  EXPECT_TRUE(mismatch);
}

TEST(MutationReportTest, IncompleteRunIsComparedOnCpuKillsOnly) {
  const CoverageRecord rec = CoverageRecord::of(sample());
  CoverageReport cpu = sample();
  for (auto& o : cpu.outcomes)
    if (o.gate != "build" && o.gate != "static") o = outcome(o.op, MutantStatus::kNotRun);
  bool mismatch = false;
  EXPECT_EQ(compare_to_record(cpu, rec, &mismatch), ""); // both cpu kills kept
  cpu.outcomes[0] = outcome("a", MutantStatus::kNotRun);
  EXPECT_NE(compare_to_record(cpu, rec, &mismatch).find("contract/build/static"),
            std::string::npos);
  EXPECT_FALSE(CoverageRecord::of(cpu).score); // an incomplete run records no score
}

TEST(MutationReportTest, MalformedRecordNamesTheField) {
  nlohmann::json j = CoverageRecord::of(sample()).to_json();
  j["killed"] = "four";
  try {
    CoverageRecord::from_json(j);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'killed'"), std::string::npos);
  }
  EXPECT_THROW(CoverageRecord::from_json(nlohmann::json::array()), std::invalid_argument);
}

// The checked-in records (tests/support/checker_records.h, one per registered operator, checked on
// the device by gpu_checker_coverage_test, which refuses a different selection) list their mutants
// as rule#site ids; a baseline change that changes which ids are selected makes a record stale,
// and only a device run can re-record it. This catches that on the CPU. It compares ids only: a
// change of what a selected id edits (the record keeps no edit text) passes here.
class CheckedInRecordTest : public ::testing::TestWithParam<test_support::CheckerRecord> {};

TEST_P(CheckedInRecordTest, SelectsTheCurrentBaselinesMutants) {
  const test_support::CheckerRecord& rec = GetParam();
  std::ifstream in(rec.path);
  ASSERT_TRUE(in) << "missing " << rec.path << ": every operator has a checker-coverage record; "
                  << "write it on the GPU machine with CHECKER_COVERAGE=record CC_OP=" << rec.name()
                  << " scripts/device-run.sh --remote";
  const CoverageRecord record = CoverageRecord::from_json(nlohmann::json::parse(in));
  std::ifstream src(std::string(KLOOP_SOURCE_DIR) + "/" + rec.op->baseline_folder() + "/kernel.cu");
  ASSERT_TRUE(src);
  const std::string source((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  std::vector<std::string> ids;
  for (const Mutant& m : select_recorded(record, rec.op->contract_id(), source))
    ids.push_back(m.id);
  EXPECT_EQ(ids, record.selection.at("mutants").get<std::vector<std::string>>())
      << "the baseline's mutant selection changed: re-record on the GPU machine with "
         "CHECKER_COVERAGE=record CC_OP="
      << rec.name() << " scripts/device-run.sh --remote";
  ASSERT_TRUE(record.score.has_value()) << rec.path << " holds no device score";
  EXPECT_GT(record.admissible, 0);
}

INSTANTIATE_TEST_SUITE_P(Operators, CheckedInRecordTest,
                         ::testing::ValuesIn(test_support::checker_records()),
                         [](const ::testing::TestParamInfo<test_support::CheckerRecord>& i) {
                           return i.param.name();
                         });

// A stored checker-coverage run is told apart from optimize sessions: `kloop sessions` shows
// store::session_kind, which must recognise what store_report records.
TEST(MutationReportTest, StoredReportIsListedAsACheckerCoverageSession) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("kloop-cc-store-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    store::Store st = store::Store::open(dir.string());
    store::SessionRecord opt{.operator_name = "weighted_rmsnorm", .provider = "offline"};
    st.create_session(opt);
    const std::int64_t id =
        store_report(st, sample(), {"0.1.0", "abc", 1, &rmsnorm::operator_instance()});
    const auto list = st.list_sessions(); // newest first
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].session.id, id);
    EXPECT_EQ(store::session_kind(list[0].session), "checker-coverage");
    EXPECT_EQ(list[0].to_json()["kind"], "checker-coverage");
    EXPECT_EQ(store::session_kind(list[1].session), "optimize");
    EXPECT_EQ(st.load_session(id).to_json()["session"]["kind"], "checker-coverage");
  }
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace kloop::mutation
