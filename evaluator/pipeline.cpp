#include "evaluator/pipeline.h"

#include <fmt/format.h>

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

std::vector<GateResult> NoDeviceGates::run(const BuiltCandidate&) {
  std::vector<GateResult> out;
  for (auto n : kDeviceGates)
    out.push_back(not_run(n, reason_));
  return out;
}

Evaluation evaluate_candidate(const Candidate& candidate, const EvaluateOptions& options,
                              DeviceGates& device) {
  Evaluation ev;
  auto& gates = ev.report.gates;
  ev.report.artifacts["kernel.cu"] = store::sha256_hex(candidate.source);
  ev.report.artifacts["manifest.json"] = store::sha256_hex(candidate.manifest_text);

  // Contract.
  auto problems = check_candidate_bytes(candidate);
  const op::Operator* op = nullptr;
  if (problems.empty()) problems = identify_operator(candidate, options.op, op);
  if (problems.empty()) {
    // An unidentified operator (a manifest that is not JSON or names no contract) is read against
    // the first registered one, whose parser names the problem.
    const op::Operator& reader = op ? *op : *op::operators().front();
    auto parsed = op::parse_manifest(reader.declaration(), candidate.manifest_text);
    if (parsed.manifest) ev.manifest = std::move(parsed.manifest);
    problems = std::move(parsed.errors);
  }
  if (!problems.empty()) {
    nlohmann::json errors = nlohmann::json::array();
    for (const auto& e : problems)
      errors.push_back({{"field", e.field}, {"message", e.message}});
    gates.push_back({std::string(kGateContract),
                     GateStatus::kFail,
                     problems.front().message,
                     {{"errors", errors}}});
    skip_rest(gates, {kGateBuild, kGateStatic}, "contract gate failed");
    ev.report.verdict = decide_verdict(gates);
    return ev;
  }
  gates.push_back(
      {std::string(kGateContract),
       GateStatus::kPass,
       "",
       {{"dispatch_predicate", op::dispatch_predicate_text(op->declaration(), *ev.manifest)},
        {"target", ev.manifest->target}}});

  // Build.
  try {
    ev.build = build_candidate(candidate.source, *ev.manifest, options.build);
  } catch (const InfraError& e) {
    gates.push_back(
        {std::string(kGateBuild), GateStatus::kInfraError, e.what(), nlohmann::json::object()});
    skip_rest(gates, {kGateStatic}, "build could not run");
    ev.report.verdict = decide_verdict(gates);
    return ev;
  }
  const BuildResult& b = *ev.build;
  ev.tool_calls.insert(ev.tool_calls.end(), b.tool_calls.begin(), b.tool_calls.end());
  gates.push_back(b.gate);
  if (b.gate.status != GateStatus::kPass) {
    skip_rest(gates, {kGateStatic}, "build gate did not pass");
    ev.report.verdict = decide_verdict(gates);
    return ev;
  }
  ev.report.artifacts["kernel.ptx"] = store::sha256_hex(b.ptx);
  ev.report.artifacts["kernel.cubin"] = store::sha256_hex(b.cubin);

  // Static inspection.
  GateResult st = static_gate(b.log, b.ptx, b.cubin, op->declaration(), *ev.manifest,
                              cuda_root_of(options.build));
  gates.push_back(st);
  if (st.status != GateStatus::kPass) {
    skip_rest(gates, {}, "static gate did not pass");
    ev.report.verdict = decide_verdict(gates);
    return ev;
  }

  // Device gates.
  try {
    auto dev = device.run(BuiltCandidate{*op, candidate, *ev.manifest, b.cubin, b.ptx});
    gates.insert(gates.end(), dev.begin(), dev.end());
  } catch (const InfraError& e) {
    for (auto n : kDeviceGates)
      gates.push_back(
          {std::string(n), GateStatus::kInfraError, e.what(), nlohmann::json::object()});
  }
  for (auto& call : device.tool_calls()) // also the processes of a run that threw
    ev.tool_calls.push_back(std::move(call));
  ev.report.verdict = decide_verdict(gates);
  return ev;
}

} // namespace kloop::evaluator
