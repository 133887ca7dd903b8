// The public evaluation of one candidate (`kloop evaluate`, and each iteration of the loop):
// contract -> build -> static -> device gates (correctness, sanitizer, benchmark, roofline). The
// device gates sit behind the DeviceGates interface so that the real GPU worker runner plugs in
// and tests use fakes; the default NoDeviceGates reports them `not_run`. A gate runs only when the
// gates before it passed; the rest are `not_run` with the reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "evaluator/build.h"
#include "evaluator/candidate.h"
#include "evaluator/gate.h"
#include "evaluator/subprocess.h"
#include "kernels/rmsnorm/manifest.h"

namespace kloop::evaluator {

// What the device gates get: the candidate after contract, build and static gates passed.
struct BuiltCandidate {
  const Candidate& candidate;
  const rmsnorm::Manifest& manifest;
  const std::string& cubin; // sm_90 / sm_90a cubin bytes
  const std::string& ptx;
};

// Runs the gates that need a GPU. Implementations return exactly one GateResult for each of
// kGateCorrectness, kGateSanitizer, kGateBenchmark, kGateRoofline (in that order) and may throw
// InfraError (recorded as infra_error on those gates).
class DeviceGates {
public:
  virtual ~DeviceGates() = default;
  virtual std::vector<GateResult> run(const BuiltCandidate& built) = 0;
  // Every process the last run() started (GPU worker batches, compute-sanitizer, ncu), for the
  // store's tool_calls rows; ToolCall::detail carries the worker's device-memory report.
  virtual std::vector<ToolCall> tool_calls() const { return {}; }
};

// Default: every device gate `not_run` with `reason` (e.g. "GPU worker not built").
class NoDeviceGates : public DeviceGates {
public:
  explicit NoDeviceGates(std::string reason = "GPU worker not built")
      : reason_(std::move(reason)) {}
  std::vector<GateResult> run(const BuiltCandidate& built) override;

private:
  std::string reason_;
};

struct EvaluateOptions {
  BuildOptions build;
};

struct Evaluation {
  PublicReport report; // verdict, gates, artifact hashes
  std::optional<rmsnorm::Manifest> manifest;
  std::optional<BuildResult> build; // verbatim logs, artifacts, tool calls (for the store)
  std::vector<ToolCall> tool_calls; // every subprocess started for this candidate
};

// The contract gate alone, as evaluate_candidate runs it first: the candidate's byte caps and
// manifest.json against the contract (rmsnorm::parse_manifest). Pass carries the dispatch predicate
// and target; fail carries evidence::ContractEvidence. `manifest` (may be null) receives the
// parsed manifest on pass.
GateResult contract_gate(const Candidate& candidate, std::optional<rmsnorm::Manifest>* manifest);

// Evaluates `candidate`. Never throws for candidate faults; an infrastructure failure inside a
// gate becomes that gate's infra_error.
Evaluation evaluate_candidate(const Candidate& candidate, const EvaluateOptions& options,
                              DeviceGates& device);

} // namespace kloop::evaluator
