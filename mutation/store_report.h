// Keeps a checker-coverage report in the store without a schema change: one session (provider
// store::kCheckerCoverageProvider, budget = number of mutants, seed = the analysis seed) with one
// iteration whose notes hold the summary (score, per operator, per gate, gaps) and one artifact
// "checker_coverage.json" (kind other) with the full report JSON as a blob. `kloop sessions`
// lists it with kind "checker-coverage" (store::session_kind), `kloop show ID` like any session;
// the verdict is pass when the run was complete with no
// admissible-missed mutant, reject when there are gaps, pending_device_validation when mutants
// could not run.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/operator.h"
#include "mutation/report.h"
#include "store/store.h"

namespace kloop::mutation {

struct StoreContext {
  std::string kloop_version, kloop_commit; // of the running binary
  std::uint64_t seed = 0;
  const op::Operator* op = nullptr; // the analysed operator (required)
};

// Writes the session, iteration and artifact in one step; returns the session id. Throws
// store::StoreError on a store failure, std::invalid_argument without an operator.
std::int64_t store_report(store::Store& store, const CoverageReport& report,
                          const StoreContext& context);

} // namespace kloop::mutation
