#include "evaluator/pipeline.h"

#include <fmt/format.h>

#include "evaluator/evidence.h"
#include "evaluator/static_inspection.h"
#include "kernels/registry.h"
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

std::string registered_contracts() {
  std::string out;
  for (const op::Operator* o : op::operators())
    out += (out.empty() ? "" : ", ") + o->contract_id();
  return out;
}

std::string cuda_root_of(const BuildOptions& o) {
  if (!o.cuda_root.empty()) return o.cuda_root;
  if (const char* env = std::getenv("KLOOP_CUDA_ROOT"); env && *env) return env;
  return "/usr/local/cuda";
}

// The operator the candidate implements: the registered operator its manifest's "contract" names,
// which must be `wanted` when the caller named one. A manifest that is not JSON or names no
// contract is left to the manifest parser, which names the problem (no operator then).
std::vector<op::ManifestError> identify_operator(const Candidate& candidate,
                                                 const op::Operator* wanted,
                                                 const op::Operator*& found) {
  found = wanted;
  const nlohmann::json doc = nlohmann::json::parse(candidate.manifest_text, nullptr, false);
  const auto it = doc.is_object() ? doc.find("contract") : doc.end();
  if (!doc.is_object() || it == doc.end() || !it->is_string()) return {};
  const std::string contract = it->get<std::string>();
  const op::Operator* named = op::find_operator(contract);
  if (wanted && named != wanted)
    return {{"contract", fmt::format("'contract' = \"{}\" is not the contract of operator {} ({}); "
                                     "write \"contract\": \"{}\"",
                                     contract, wanted->cli_name(), wanted->contract_id(),
                                     wanted->contract_id())}};
  if (!named || named->contract_id() != contract)
    return {{"contract", fmt::format("'contract' = \"{}\" names no registered operator contract; "
                                     "registered: {}",
                                     contract, registered_contracts())}};
  found = named;
  return {};
}

} // namespace

GateResult contract_gate(const Candidate& candidate, const op::Operator* wanted,
                         std::optional<op::Manifest>* manifest, const op::Operator** found) {
  std::optional<op::Manifest> parsed_manifest;
  auto problems = check_candidate_bytes(candidate);
  const op::Operator* op = nullptr;
  if (problems.empty()) problems = identify_operator(candidate, wanted, op);
  // An unidentified operator (a manifest that is not JSON or names no contract) is read against
  // the first registered one, whose parser names the problem.
  const op::Operator& reader = op ? *op : *op::operators().front();
  if (problems.empty()) {
    auto parsed = op::parse_manifest(reader.declaration(), candidate.manifest_text);
    parsed_manifest = std::move(parsed.manifest);
    problems = std::move(parsed.errors);
  }
  if (!problems.empty()) {
    evidence::ContractEvidence evidence;
    for (const auto& e : problems)
      evidence.errors.push_back({e.field, e.message});
    std::string reason = problems.front().message;
    if (problems.size() > 1)
      reason += fmt::format(" (+{} more errors; the gate's evidence lists every one)",
                            problems.size() - 1);
    return {std::string(kGateContract), GateStatus::kFail, reason, evidence.to_json()};
  }
  GateResult g{
      std::string(kGateContract),
      GateStatus::kPass,
      "",
      {{"dispatch_predicate", op::dispatch_predicate_text(reader.declaration(), *parsed_manifest)},
       {"target", parsed_manifest->target}}};
  if (manifest) *manifest = std::move(parsed_manifest);
  if (found) *found = &reader;
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
  gates.push_back(contract_gate(candidate, options.op, &ev.manifest, &out.op));
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
  GateResult st = static_gate(b.log, b.ptx, b.cubin, out.op->declaration(), *ev.manifest,
                              cuda_root_of(options.build));
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
  if (!host.device_ready || !host.op || !ev.manifest || !ev.build) return ev;
  auto& gates = ev.report.gates;
  const BuildResult& b = *ev.build;
  try {
    auto dev = device.run(BuiltCandidate{*host.op, candidate, *ev.manifest, b.cubin, b.ptx});
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
