// The CPU part of checker coverage through the real sandboxed NVRTC build and static gate: a
// mutant that adds writable module-scope state is killed by the static gate, a mutant that does
// not compile is killed at build, and (without a device) a mutant that builds cleanly is not-run.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/operator.h"
#include "kernels/softmax/operator.h"

#include "evaluator/subprocess.h"
#include "mutation/worker_backend.h"
#include "tests/support/test_files.h"

namespace kloop::mutation {
namespace {

evaluator::Candidate load_baseline() {
  auto loaded =
      evaluator::load_candidate_dir(std::string(KLOOP_SOURCE_DIR) + "/kernels/rmsnorm/baseline");
  if (!loaded.candidate) throw std::runtime_error(loaded.error);
  return *loaded.candidate;
}

const MutantOutcome& by_id(const CoverageReport& r, const std::string& id) {
  for (const auto& o : r.outcomes)
    if (o.id == id) return o;
  throw std::runtime_error("no outcome " + id);
}

TEST(CheckerCoverageIntegrationTest, StaticKillsModuleStateBuildKillsSyntaxErrors) {
  const evaluator::Candidate base = load_baseline();
  std::vector<Mutant> mutants =
      select_mutants(base.source, {"module-scope-state", "eps-drop"}, 1, 0);
  ASSERT_EQ(mutants.size(), 2u);
  // A build-breaking mutant: the first entry point's call loses its closing parenthesis.
  Mutant broken = mutants_of(base.source, "hardcode-width").back();
  ASSERT_EQ(broken.edits.size(), 1u);
  broken.id = "syntax-error#0";
  broken.op = "syntax-error";
  broken.edits[0].after.replace(broken.edits[0].after.rfind(");"), 2, ";");
  broken.source = apply_edits(base.source, broken.edits);
  mutants.push_back(broken);

  WorkerBackendOptions bo;
  bo.op = &rmsnorm::operator_instance();
  bo.build.deadline = std::chrono::milliseconds(60000); // a loaded 2-core CI box
  WorkerBackend backend(bo);
  AnalysisOptions ao;
  ao.jobs = 2;
  const CoverageReport r = analyze(rmsnorm::operator_instance(), base, mutants, backend, ao);

  const MutantOutcome& state = by_id(r, "module-scope-state#0");
  EXPECT_EQ(state.status, MutantStatus::kKilled) << state.detail;
  EXPECT_EQ(state.gate, "static") << state.detail;
  const MutantOutcome& syntax = by_id(r, "syntax-error#0");
  EXPECT_EQ(syntax.status, MutantStatus::kKilled) << syntax.detail;
  EXPECT_EQ(syntax.gate, "build") << syntax.detail;
  const MutantOutcome& eps = by_id(r, "eps-drop#0");
  if (backend.has_device()) {
    EXPECT_EQ(eps.status, MutantStatus::kKilled) << eps.detail;
  } else {
    EXPECT_EQ(eps.status, MutantStatus::kNotRun) << eps.detail;
    EXPECT_NE(eps.detail.find("not_run"), std::string::npos) << eps.detail;
    EXPECT_FALSE(r.complete());
  }
  EXPECT_EQ(r.cpu_killed(), 2);
}

// row_softmax/1's vocabulary, one site per rule, through the CPU gates: every mutant builds (a
// rule that broke the source would only inflate the score) and only module-scope state is
// caught on the CPU; the rest needs the device's gates.
TEST(CheckerCoverageIntegrationTest, SoftmaxMutantsBuildAndAllButModuleStateNeedTheDevice) {
  auto loaded =
      evaluator::load_candidate_dir(std::string(KLOOP_SOURCE_DIR) + "/kernels/softmax/baseline");
  ASSERT_TRUE(loaded.candidate) << loaded.error;
  const evaluator::Candidate& base = *loaded.candidate;
  const op::Operator& op = softmax::operator_instance();
  const std::vector<Mutant> mutants =
      select_mutants(base.source, vocabulary(op.contract_id()), 1, 0);
  ASSERT_EQ(mutants.size(), vocabulary(op.contract_id()).size());
  WorkerBackendOptions bo;
  bo.op = &op;
  bo.build.deadline = std::chrono::milliseconds(60000);
  WorkerBackend backend(bo);
  AnalysisOptions ao;
  ao.jobs = 2;
  const CoverageReport r = analyze(op, base, mutants, backend, ao);
  for (const MutantOutcome& o : r.outcomes) {
    if (o.op == "module-scope-state") {
      EXPECT_EQ(o.status, MutantStatus::kKilled) << o.detail;
      EXPECT_EQ(o.gate, "static") << o.detail;
      continue;
    }
    EXPECT_NE(o.gate, "build") << o.id << " does not compile: " << o.detail;
    if (!backend.has_device()) {
      EXPECT_EQ(o.status, MutantStatus::kNotRun) << o.id << o.detail;
    }
  }
  EXPECT_EQ(r.cpu_killed(), 1);
}

// Flags that can be refused are refused before any mutant runs (a full run takes minutes on the
// GPU): an empty operator list, --record and --check-record on one file (the new record would
// replace the one it is checked against), a record path in a missing folder, a --sanitizer-jobs
// outside [1, 64].
TEST(CheckerCoverageCli, BadFlagsAreRefusedBeforeTheAnalysisAndLoseNoRecord) {
  const std::string kloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";
  const std::string dir = ::testing::TempDir() + "kloop-cc-cli-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string rec = dir + "/record.json";
  const std::string original = R"({"score": 0.9, "mutants": 1})";
  std::ofstream(rec) << original;
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {kloop, "checker-coverage", "rmsnorm"});
    evaluator::SubprocessOptions so;
    so.deadline = std::chrono::milliseconds(30000);
    return evaluator::run_subprocess(args, so);
  };
  auto r = run({"--operators", ",,"});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("names no operator"), std::string::npos) << r.stderr_text;
  r = run({"--record", rec, "--check-record", rec});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("same file"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(test_support::read_file(rec), original);
  r = run({"--record", dir + "/missing/record.json"});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cannot write --record"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("mutants of"), std::string::npos) << "the analysis started";
  // Concurrent compute-sanitizer runs: 1..64, anything else is named before any mutant runs.
  for (const char* bad : {"0", "65", "-3"}) {
    r = run({"--sanitizer-jobs", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--sanitizer-jobs must be in [1, 64]"), std::string::npos)
        << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("mutants of"), std::string::npos) << "the analysis started";
  }
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace kloop::mutation
