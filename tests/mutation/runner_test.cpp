// The analysis loop on a fake backend: the first rejecting gate kills, survivors meet the
// holdout, then the search keeps only inputs the baseline passes and reports the smallest; no
// exposing input leaves a mutant not-shown-killable; no device leaves it not-run.
#include <algorithm>
#include <mutex>

#include <gtest/gtest.h>

#include "evaluator/correctness.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/operator.h"
#include "mutation/runner.h"

namespace kloop::mutation {
namespace {

using evaluator::GateResult;
using evaluator::GateStatus;
using rmsnorm::CaseSpec;

const op::Operator& rms() {
  return rmsnorm::operator_instance();
}

std::vector<CaseSpec> specs_of(const std::vector<nlohmann::json>& specs) {
  std::vector<CaseSpec> out;
  for (const auto& j : specs)
    out.push_back(CaseSpec::from_json(j));
  return out;
}

const std::string kSource = "  float q = rsqrtf(s / static_cast<float>(H) + eps);\n"
                            "  __syncthreads();\n"
                            "  c = j < H ? a : 0.f;\n"
                            "  row(x + r * xs);\n";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class FakeBackend : public MutantBackend {
public:
  bool device = true;
  std::vector<std::string> pool_fails_mutant, pool_fails_baseline; // case names
  int runs = 0;
  std::mutex mu;

  evaluator::Evaluation evaluate(const evaluator::Candidate& c) override {
    evaluator::Evaluation ev;
    auto gate = [&](std::string_view name, GateStatus s, std::string reason = "") {
      ev.report.gates.push_back(GateResult{std::string(name), s, std::move(reason), {}});
    };
    gate(evaluator::kGateContract, GateStatus::kPass);
    const bool build_fails = has(c.source, "1e-5f") || has(c.source, "BASELINE-BROKEN");
    gate(evaluator::kGateBuild, build_fails ? GateStatus::kFail : GateStatus::kPass,
         build_fails ? "kernel.cu(1): error" : "");
    if (build_fails) return ev;
    gate(evaluator::kGateStatic, GateStatus::kPass);
    ev.build.emplace();
    ev.build->cubin = "CUBIN:" + c.source;
    const GateStatus dev = device ? GateStatus::kPass : GateStatus::kNotRun;
    gate(evaluator::kGateCorrectness, dev, device ? "" : "no device");
    gate(evaluator::kGateSanitizer, dev, device ? "" : "no device");
    gate(evaluator::kGateBenchmark, GateStatus::kNotRun, std::string(kSkippedPrefix) + ": timing");
    gate(evaluator::kGateRoofline, GateStatus::kNotRun, std::string(kSkippedPrefix) + ": timing");
    return ev;
  }

  evaluator::GpuRunResult run_cases(const evaluator::Candidate& c, const std::string& cubin,
                                    const std::vector<nlohmann::json>& cases) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++runs;
    }
    EXPECT_EQ(cubin, "CUBIN:" + c.source);
    const bool baseline = c.source == kSource;
    nlohmann::json list = nlohmann::json::array();
    bool all = true;
    for (const CaseSpec& s : specs_of(cases)) {
      bool pass = true;
      if (has(c.source, "barrier removed") && s.family == "holdout") pass = false;
      const auto& fails = baseline ? pool_fails_baseline : pool_fails_mutant;
      if (has(c.source, "1.f;") || baseline)
        pass = pass && std::find(fails.begin(), fails.end(), s.name) == fails.end();
      all = all && pass;
      // The worker's layout: the correctness core's own CaseResult JSON.
      evaluator::CaseResult cr;
      cr.pass = pass;
      cr.case_name = s.name;
      cr.case_spec = s.to_json();
      cr.reason = pass ? "" : "mismatch";
      list.push_back(cr.to_json());
    }
    evaluator::GpuRunResult r;
    r.status = all ? GateStatus::kPass : GateStatus::kFail;
    r.reason = all ? "" : "case failed";
    r.result = {{"suite", {{"cases", list}}}};
    return r;
  }
  bool has_device() const override { return device; }
};

evaluator::Candidate baseline() {
  evaluator::Candidate c;
  c.source = kSource;
  c.manifest_text = "{}";
  return c;
}

AnalysisOptions small_options() {
  AnalysisOptions o;
  o.holdout_cases = 4;
  o.pool.cases = 12;
  o.pool.holdout_style_cases = 0;
  o.pool.max_case_elements = 20000;
  return o;
}

const MutantOutcome& by_op(const CoverageReport& r, const std::string& op) {
  for (const auto& o : r.outcomes)
    if (o.op == op) return o;
  throw std::runtime_error("no outcome for " + op);
}

TEST(MutationRunnerTest, GatesHoldoutAndSearchDecideEachMutant) {
  const AnalysisOptions opts = small_options();
  std::vector<CaseSpec> pool = specs_of(search_pool(rms(), opts.seed, opts.pool));
  std::stable_sort(pool.begin(), pool.end(), [](const auto& a, const auto& b) {
    return a.numel() != b.numel() ? a.numel() < b.numel() : a.name < b.name;
  });
  FakeBackend fake;
  // The mutant fails the two smallest inputs and the largest; the baseline fails the smallest.
  fake.pool_fails_mutant = {pool[0].name, pool[1].name, pool.back().name};
  fake.pool_fails_baseline = {pool[0].name};
  const auto mutants = select_mutants(
      kSource, {"eps-hardcode", "barrier-remove", "tail-padding", "stride-as-width"}, 3, 0);
  ASSERT_EQ(mutants.size(), 4u);
  const CoverageReport r = analyze(rms(), baseline(), mutants, fake, opts);
  EXPECT_EQ(by_op(r, "eps-hardcode").status, MutantStatus::kKilled);
  EXPECT_EQ(by_op(r, "eps-hardcode").gate, "build");
  EXPECT_EQ(by_op(r, "barrier-remove").status, MutantStatus::kKilled);
  EXPECT_EQ(by_op(r, "barrier-remove").gate, "holdout");
  const MutantOutcome& missed = by_op(r, "tail-padding");
  EXPECT_EQ(missed.status, MutantStatus::kAdmissibleMissed);
  EXPECT_EQ(missed.killing_input.at("name"), pool[1].name); // pool[0] also fails the baseline
  EXPECT_EQ(by_op(r, "stride-as-width").status, MutantStatus::kNotShownKillable);
  EXPECT_DOUBLE_EQ(*r.total().score(), 2.0 / 3.0);
}

TEST(MutationRunnerTest, InputsThatAlsoFailTheBaselineAreDiscarded) {
  const AnalysisOptions opts = small_options();
  const std::vector<CaseSpec> pool = specs_of(search_pool(rms(), opts.seed, opts.pool));
  FakeBackend fake;
  fake.pool_fails_mutant = {pool[3].name};
  fake.pool_fails_baseline = {pool[3].name};
  const CoverageReport r =
      analyze(rms(), baseline(), select_mutants(kSource, {"tail-padding"}, 1, 0), fake, opts);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].status, MutantStatus::kNotShownKillable);
  EXPECT_NE(r.outcomes[0].detail.find("discarded"), std::string::npos);
  EXPECT_FALSE(r.total().score()); // nothing admissible
}

TEST(MutationRunnerTest, WithoutADeviceOnlyCpuGatesDecideAndTheRestIsNotRun) {
  FakeBackend fake;
  fake.device = false;
  const CoverageReport r =
      analyze(rms(), baseline(), select_mutants(kSource, {"eps-hardcode", "barrier-remove"}, 1, 0),
              fake, small_options());
  EXPECT_EQ(by_op(r, "eps-hardcode").status, MutantStatus::kKilled);
  EXPECT_EQ(by_op(r, "barrier-remove").status, MutantStatus::kNotRun);
  EXPECT_NE(by_op(r, "barrier-remove").detail.find("correctness not_run"), std::string::npos);
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(fake.runs, 0);
}

TEST(MutationRunnerTest, EachOutcomeTimesOnlyThePhasesItReached) {
  FakeBackend fake;
  const CoverageReport r =
      analyze(rms(), baseline(),
              select_mutants(kSource, {"eps-hardcode", "barrier-remove", "eps-drop"}, 1, 0), fake,
              small_options());
  const MutantOutcome& build_killed = by_op(r, "eps-hardcode"); // killed by the build gate
  EXPECT_EQ(build_killed.phase_ms.count("gates"), 1u);
  EXPECT_EQ(build_killed.phase_ms.count("holdout"), 0u);
  EXPECT_EQ(build_killed.phase_ms.count("search"), 0u);
  const MutantOutcome& holdout_killed = by_op(r, "barrier-remove");
  ASSERT_EQ(holdout_killed.gate, "holdout");
  EXPECT_EQ(holdout_killed.phase_ms.count("holdout"), 1u);
  EXPECT_EQ(holdout_killed.phase_ms.count("search"), 0u);
  const MutantOutcome& searched = by_op(r, "eps-drop"); // passes everything: searched
  EXPECT_EQ(searched.status, MutantStatus::kNotShownKillable);
  EXPECT_EQ(searched.phase_ms.count("search"), 1u);
  double sum = 0; // the phases are consecutive parts of the mutant's wall time
  for (const auto& [phase, ms] : searched.phase_ms)
    sum += ms;
  EXPECT_LE(sum, searched.wall_ms + 1e-6);
  EXPECT_TRUE(searched.to_json().at("phase_ms").contains("holdout"));
}

TEST(MutationRunnerTest, ParallelJobsKeepMutantOrder) {
  FakeBackend fake;
  AnalysisOptions opts = small_options();
  opts.jobs = 3;
  const auto mutants = select_mutants(kSource, {}, 3, 0);
  const CoverageReport r = analyze(rms(), baseline(), mutants, fake, opts);
  ASSERT_EQ(r.outcomes.size(), mutants.size());
  for (std::size_t i = 0; i < mutants.size(); ++i)
    EXPECT_EQ(r.outcomes[i].id, mutants[i].id);
}

TEST(MutationRunnerTest, ARejectedBaselineIsAnInfrastructureError) {
  FakeBackend fake;
  evaluator::Candidate broken = baseline();
  broken.source += "// BASELINE-BROKEN\n";
  EXPECT_THROW(analyze(rms(), broken, {}, fake, small_options()), evaluator::InfraError);
}

TEST(MutationRunnerTest, ClassifyTakesTheFirstRejectingGateAndIgnoresSkippedTiming) {
  evaluator::PublicReport rep;
  rep.gates = {GateResult{"contract", GateStatus::kPass, "", {}},
               GateResult{"correctness", GateStatus::kPass, "", {}},
               GateResult{"sanitizer", GateStatus::kFail, "racecheck: 3 hazards", {}},
               GateResult{"benchmark", GateStatus::kCrashed, "late", {}}};
  auto k = classify_evaluation(rep);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->gate, "sanitizer");
  EXPECT_NE(k->detail.find("racecheck"), std::string::npos);
  rep.gates.resize(2);
  rep.gates.push_back(
      GateResult{"benchmark", GateStatus::kNotRun, std::string(kSkippedPrefix) + ": timing", {}});
  EXPECT_FALSE(classify_evaluation(rep));
  rep.gates.push_back(GateResult{"roofline", GateStatus::kInfraError, "worker missing", {}});
  ASSERT_TRUE(classify_evaluation(rep));
  EXPECT_EQ(classify_evaluation(rep)->status, MutantStatus::kNotRun);
}

TEST(MutationRunnerTest, FailingCasesIncludeTheCaseInFlightOfACrash) {
  std::vector<nlohmann::json> cases;
  for (int i = 0; i < 3; ++i) {
    CaseSpec c;
    c.name = "c" + std::to_string(i);
    c.outer = {3 - i};
    c.h = 10;
    cases.push_back(c.to_json());
  }
  evaluator::GpuRunResult run;
  run.status = GateStatus::kCrashed;
  evaluator::CaseResult c0;
  c0.case_name = "c0";
  c0.case_spec = cases[0];
  run.result = {{"suite", {{"cases", nlohmann::json::array({c0.to_json()})}}},
                {"fault", {{"case_name", "c2"}}}};
  const auto f = failing_cases(rms(), run, cases);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0]["name"], "c2"); // 10 elements before c0's 30
  EXPECT_EQ(f[1]["name"], "c0");
}

TEST(MutationRunnerTest, SearchPoolIsDeterministicValidAndVaried) {
  const auto a = specs_of(search_pool(rms(), 7)), b = specs_of(search_pool(rms(), 7)),
             c = specs_of(search_pool(rms(), 8));
  ASSERT_EQ(a.size(), 120u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::set<std::string> names;
  std::set<int> layouts, dtypes;
  for (const auto& s : a) {
    names.insert(s.name);
    layouts.insert(static_cast<int>(s.layout));
    dtypes.insert(static_cast<int>(s.dtype));
    EXPECT_GE(s.h, 1);
    EXPECT_GE(s.rows(), 1);
    EXPECT_EQ(s.invalid, rmsnorm::InvalidKind::kNone);
  }
  EXPECT_EQ(names.size(), a.size());
  EXPECT_GE(layouts.size(), 4u);
  EXPECT_EQ(dtypes.size(), 3u);
  // Per dtype, strided cases on the vector path: x and weight 16-byte aligned, the row stride a
  // multiple of 16 bytes with a real gap, rows past one persistent grid, rows over 1 KiB.
  for (DType d : kAllDTypes) {
    int vector_strided = 0;
    for (const auto& s : a) {
      const std::int64_t eb = static_cast<std::int64_t>(dtype_bytes(d));
      vector_strided += s.dtype == d && s.layout == rmsnorm::LayoutKind::kSlicedGaps && s.gap > 0 &&
                        s.offset == 0 && s.weight_offset == 0 && ((s.h + s.gap) * eb) % 16 == 0 &&
                        s.rows() >= 600 && s.h * eb > 1024;
    }
    EXPECT_GE(vector_strided, 5) << dtype_name(d);
  }
}

} // namespace
} // namespace kloop::mutation
