#include "evaluator/pipeline.h"

#include "evaluator/evidence.h"
#include "evaluator/static_inspection.h"
#include "store/hash.h"

namespace kloop::evaluator {
namespace {

constexpr std::string_view kDeviceGates[] = {kGateCorrectness, kGateSanitizer, kGateBenchmark,
                                             kGateRoofline};

GateResult not_run(std::string_view name, const std::string& reason) {
  return {std::string(name), GateStatus::kNotRun, reason, nlohmann::json::object()};
}

void skip_rest(std::vector<GateResult>& gates, std::initializer_list<std::string_view> names,
               const std::string& reason) {
  for (auto n : names)
    gates.push_back(not_run(n, reason));
  for (auto n : kDeviceGates)
    gates.push_back(not_run(n, reason));
}

std::string cuda_root_of(const BuildOptions& o) {
  if (!o.cuda_root.empty()) return o.cuda_root;
  if (const char* env = std::getenv("KLOOP_CUDA_ROOT"); env && *env) return env;
  return "/usr/local/cuda";
}

} // namespace

GateResult contract_gate(const Candidate& candidate, std::optional<rmsnorm::Manifest>* manifest) {
  std::optional<rmsnorm::Manifest> parsed_manifest;
  auto problems = check_candidate_bytes(candidate);
  if (problems.empty()) {
    auto parsed = rmsnorm::parse_manifest(candidate.manifest_text);
    parsed_manifest = std::move(parsed.manifest);
    problems = std::move(parsed.errors);
  }
  if (!problems.empty()) {
    evidence::ContractEvidence found;
    for (const auto& e : problems)
      found.errors.push_back({e.field, e.message});
    return {std::string(kGateContract), GateStatus::kFail, problems.front().message,
            found.to_json()};
  }
  GateResult g{std::string(kGateContract),
               GateStatus::kPass,
               "",
               {{"dispatch_predicate", rmsnorm::dispatch_predicate_text(*parsed_manifest)},
                {"target", parsed_manifest->target}}};
  if (manifest) *manifest = std::move(parsed_manifest);
  return g;
}

std::vector<GateResult> NoDeviceGates::run(const BuiltCandidate&) {
  std::vector<GateResult> out;
  for (auto n : kDeviceGates)
    out.push_back(not_run(n, reason_));
  return out;
}

namespace {

// The evaluation is complete: verdict and wall time.
Evaluation finished(Evaluation ev) {
  ev.report.verdict = decide_verdict(ev.report.gates);
  ev.wall_ms = steady_now_ms() - ev.origin_ms;
  return ev;
}

} // namespace

HostStages run_host_stages(const Candidate& candidate, const EvaluateOptions& options,
                           double origin_ms) {
  HostStages out;
  Evaluation& ev = out.evaluation;
  ev.origin_ms = origin_ms > 0 ? origin_ms : steady_now_ms();
  PhaseLog phases(ev.origin_ms);
  const auto done = [&] {
    for (auto& p : phases.phases())
      ev.phases.push_back(std::move(p));
    ev = finished(std::move(ev));
    return std::move(out);
  };
  auto& gates = ev.report.gates;
  ev.report.artifacts["kernel.cu"] = store::sha256_hex(candidate.source);
  ev.report.artifacts["manifest.json"] = store::sha256_hex(candidate.manifest_text);

  // Contract.
  double t = steady_now_ms();
  gates.push_back(contract_gate(candidate, &ev.manifest));
  phases.add_since("contract", t);
  if (gates.back().status != GateStatus::kPass) {
    skip_rest(gates, {kGateBuild, kGateStatic}, "contract gate failed");
    return done();
  }

  // Build.
  t = steady_now_ms();
  try {
    ev.build = build_candidate(candidate.source, *ev.manifest, options.build);
  } catch (const InfraError& e) {
    phases.add_since("build", t, {{"status", "infra_error"}});
    gates.push_back(
        {std::string(kGateBuild), GateStatus::kInfraError, e.what(), nlohmann::json::object()});
    skip_rest(gates, {kGateStatic}, "build could not run");
    return done();
  }
  const BuildResult& b = *ev.build;
  phases.add_since("build", t, {{"status", gate_status_name(b.gate.status)}});
  ev.tool_calls.insert(ev.tool_calls.end(), b.tool_calls.begin(), b.tool_calls.end());
  gates.push_back(b.gate);
  if (b.gate.status != GateStatus::kPass) {
    skip_rest(gates, {kGateStatic}, "build gate did not pass");
    return done();
  }
  ev.report.artifacts["kernel.ptx"] = store::sha256_hex(b.ptx);
  ev.report.artifacts["kernel.cubin"] = store::sha256_hex(b.cubin);

  // Static inspection.
  t = steady_now_ms();
  GateResult st = static_gate(b.log, b.ptx, b.cubin, *ev.manifest, cuda_root_of(options.build));
  phases.add_since("static", t);
  gates.push_back(st);
  if (st.status != GateStatus::kPass) {
    skip_rest(gates, {}, "static gate did not pass");
    return done();
  }
  for (auto& p : phases.phases())
    ev.phases.push_back(std::move(p));
  out.device_ready = true;
  return out;
}

Evaluation run_device_stages(HostStages host, const Candidate& candidate, DeviceGates& device) {
  Evaluation ev = std::move(host.evaluation);
  if (!host.device_ready || !ev.manifest || !ev.build) return ev;
  auto& gates = ev.report.gates;
  const BuildResult& b = *ev.build;
  try {
    auto dev = device.run(BuiltCandidate{candidate, *ev.manifest, b.cubin, b.ptx});
    gates.insert(gates.end(), dev.begin(), dev.end());
  } catch (const InfraError& e) {
    for (auto n : kDeviceGates)
      gates.push_back(
          {std::string(n), GateStatus::kInfraError, e.what(), nlohmann::json::object()});
  }
  const std::vector<ToolCall> calls = device.tool_calls(); // also those of a run that threw
  for (auto& p : phases_from_tool_calls(calls, ev.origin_ms))
    ev.phases.push_back(std::move(p));
  ev.tool_calls.insert(ev.tool_calls.end(), calls.begin(), calls.end());
  return finished(std::move(ev));
}

Evaluation evaluate_candidate(const Candidate& candidate, const EvaluateOptions& options,
                              DeviceGates& device) {
  HostStages host = run_host_stages(candidate, options);
  if (!host.device_ready) return std::move(host.evaluation);
  return run_device_stages(std::move(host), candidate, device);
}

} // namespace kloop::evaluator
