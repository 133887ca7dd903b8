// `kloop shadow ID --inputs DIR`: the seed's tier-2 evidence. Exports the session's promoted
// candidate as the torch package (torch_export.h) into a private temporary directory, runs its
// shadow module (`python3 -m kloop_rmsnorm.shadow --inputs DIR --json`) in a subprocess, and
// records the JSON report in the store: the report as a blob plus a telemetry row of kind
// "shadow" on the candidate ({status, reason, report_sha256, inputs, files, specialisations,
// exit_code}), so it is attached to the session without a schema change. Without python3, torch,
// cuda-python or a CUDA device the run is not_run with the reason (exit 3). Only weighted_rmsnorm/1
// packages have a shadow module; a session of another operator is refused (exit 2).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace kloop::store {
class Store;
}

namespace kloop::agent {

struct ShadowOptions {
  // Directory of captured inputs (layout: export_templates/rmsnorm/shadow.py).
  std::filesystem::path inputs;
  bool allow_unpromoted = false; // shadow the frozen candidate of an unpromoted session
  std::string python;            // absolute path of python3; empty: search $PATH
  std::chrono::seconds deadline{600};
};

struct ShadowResult {
  std::string status;        // "pass", "fail", "not_run", or "error" (bad input / refused)
  std::string reason;        // why not pass; empty on pass
  int exit_code = 0;         // 0 pass, 1 divergence or refused, 2 bad input, 3 not_run
  nlohmann::json report;     // the shadow module's JSON report (null when none)
  std::string report_sha256; // blob of the stored report; empty when nothing was recorded
  std::int64_t candidate_id = 0;
};

// Runs the shadow comparison of session `session_id` on `options.inputs` and records it. Throws
// store::StoreError for a missing session; every expected failure is a value.
ShadowResult run_shadow(store::Store& store, std::int64_t session_id, const ShadowOptions& options);

// A human-readable table of a shadow report (one row per file, then the totals).
std::string format_shadow_table(const ShadowResult& result);

// The absolute path of `name` on $PATH, or empty when absent.
std::string find_on_path(const std::string& name);

} // namespace kloop::agent
