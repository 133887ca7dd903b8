// The checker-coverage analysis: each mutant goes through the public pipeline (contract, build,
// static, correctness, sanitizer incl. shared-memory poisoning, and the benchmark gates when the
// backend runs them); a mutant every gate passed then runs the holdout suite
// (holdout::generate_suite(op, seed)) and, if it passes that too, the killing-input search over
// search_pool(op, seed): every pool case it fails is re-run on the unmodified baseline, failures
// the baseline shares are discarded, and the smallest remaining case (by element count) makes the
// mutant admissible-missed. The backend is an interface so that unit tests use fakes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/candidate.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/pipeline.h"
#include "kernels/operator.h"
#include "mutation/operators.h"
#include "mutation/report.h"
#include "mutation/search_pool.h"

namespace kloop::mutation {

// What the analysis needs from the evaluator. Implementations must be callable from several
// threads at once when AnalysisOptions::jobs > 1.
class MutantBackend {
public:
  virtual ~MutantBackend() = default;
  // The public pipeline (evaluator::evaluate_candidate). Never throws for candidate faults.
  virtual evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) = 0;
  // Runs `cubin` of `candidate` on explicit `cases` (case specs of the analysed operator) in one
  // fresh GPU worker (mode correctness, not stopping at the first failure).
  virtual evaluator::GpuRunResult run_cases(const evaluator::Candidate& candidate,
                                            const std::string& cubin,
                                            const std::vector<nlohmann::json>& cases) = 0;
  // Whether device gates can run (false: every device step is not-run).
  virtual bool has_device() const = 0;
  virtual std::string device_name() const { return ""; }
};

// A device gate reported not_run with a reason starting with this prefix was skipped on purpose
// by the backend (the benchmark timing); it does not make a mutant not-run.
inline constexpr std::string_view kSkippedPrefix = "skipped by checker-coverage";

struct AnalysisOptions {
  std::uint64_t seed = 1; // holdout suite and search pool seed (fixed: the record depends on it)
  int holdout_cases = 48; // holdout::SuiteOptions::cases
  PoolOptions pool;
  int jobs = 1; // mutants evaluated concurrently
};

// Classifies one finished public evaluation: killed by its first fail/timeout/crashed gate; not
// run when a gate (other than a deliberately skipped one) is not_run or infra_error; otherwise
// nullopt (every gate passed). Exposed for unit tests.
std::optional<MutantOutcome> classify_evaluation(const evaluator::PublicReport& report);

// The failing cases of a worker batch over `cases` (by the worker's per-case results; a crash or
// timeout adds the case in flight), sorted by element count (op.case_elements) then name.
std::vector<nlohmann::json> failing_cases(const op::Operator& op,
                                          const evaluator::GpuRunResult& run,
                                          const std::vector<nlohmann::json>& cases);

// Runs the analysis of `mutants` of operator `op` (of `baseline`'s source; the manifest is the
// baseline's).
// Throws evaluator::InfraError when the unmodified baseline is rejected by a gate (the analysis
// would then blame the evaluator for the baseline's defect). `progress` gets one line per mutant.
CoverageReport analyze(const op::Operator& op, const evaluator::Candidate& baseline,
                       const std::vector<Mutant>& mutants, MutantBackend& backend,
                       const AnalysisOptions& options,
                       const std::function<void(const std::string&)>& progress = {});

} // namespace kloop::mutation
