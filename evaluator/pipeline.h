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
#include "evaluator/phases.h"
#include "evaluator/subprocess.h"
#include "kernels/manifest.h"
#include "kernels/operator.h"

namespace kloop::evaluator {

// What the device gates get: the candidate after contract, build and static gates passed.
struct BuiltCandidate {
  const op::Operator& op; // the operator its manifest's contract names
  const Candidate& candidate;
  const op::Manifest& manifest; // read against op's declaration (format 1 or 2)
  const std::string& cubin;     // sm_90 / sm_90a cubin bytes
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
  // The operator the candidate must implement (its manifest's "contract" must be this operator's
  // contract id); nullptr: the registered operator the manifest's contract names.
  const op::Operator* op = nullptr;
  BuildOptions build;
};

struct Evaluation {
  PublicReport report;                  // verdict, gates, artifact hashes
  std::optional<op::Manifest> manifest; // read against the operator's declaration
  std::optional<BuildResult> build;     // verbatim logs, artifacts, tool calls (for the store)
  std::vector<ToolCall> tool_calls;     // every subprocess started for this candidate
  // Where the time went (evaluator/phases.h): host phases, device processes, waits; starts in ms
  // from `origin_ms` (steady_now_ms() when the evaluation began). wall_ms: the whole evaluation.
  std::vector<Phase> phases;
  double origin_ms = 0;
  double wall_ms = 0;
};

// The contract gate alone, as evaluate_candidate runs it first: the candidate's byte caps, the
// operator its manifest's "contract" names (a registered operator; `wanted` when not null), and
// manifest.json against that operator's declaration (op::parse_manifest, format 1 or 2). A
// manifest that is not JSON or names no contract is read against `wanted`, else the first
// registered operator, whose parser names the problem. Pass carries the dispatch predicate and
// target; fail carries evidence::ContractEvidence. On pass, `manifest` and `found` (either may be
// null) receive the parsed manifest and the operator.
GateResult contract_gate(const Candidate& candidate, const op::Operator* wanted,
                         std::optional<op::Manifest>* manifest = nullptr,
                         const op::Operator** found = nullptr);

// Evaluates `candidate`. Never throws for candidate faults; an infrastructure failure inside a
// gate becomes that gate's infra_error. The same as run_host_stages then run_device_stages.
Evaluation evaluate_candidate(const Candidate& candidate, const EvaluateOptions& options,
                              DeviceGates& device);

// The two halves of evaluate_candidate, so a scheduler can build and inspect the next candidates
// on the host while the device gates of others run (agent/scheduler.h). run_host_stages runs the
// contract, build and static gates; when one does not pass, the evaluation is complete (the rest
// not_run, verdict decided) and `device_ready` is false. `origin_ms` is the start of the
// evaluation (phase times are relative to it; default: now).
struct HostStages {
  Evaluation evaluation;
  bool device_ready = false;        // every host gate passed: run_device_stages next
  const op::Operator* op = nullptr; // the operator the contract gate identified (when it passed)
};
HostStages run_host_stages(const Candidate& candidate, const EvaluateOptions& options,
                           double origin_ms = 0);
// The device gates of a candidate whose host gates passed, appended to `host`'s evaluation with
// their processes' phases; then the verdict and wall time. `candidate` is the one the host stages
// ran on. A `host` that is not device_ready is returned as it is.
Evaluation run_device_stages(HostStages host, const Candidate& candidate, DeviceGates& device);

} // namespace kloop::evaluator
