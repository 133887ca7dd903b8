#include "evaluator/gate.h"

namespace kloop::evaluator {

std::string_view gate_status_name(GateStatus status) {
  switch (status) {
  case GateStatus::kPass:
    return "pass";
  case GateStatus::kFail:
    return "fail";
  case GateStatus::kTimeout:
    return "timeout";
  case GateStatus::kCrashed:
    return "crashed";
  case GateStatus::kNotRun:
    return "not_run";
  case GateStatus::kInfraError:
    return "infra_error";
  }
  return "infra_error";
}

GateStatus parse_gate_status(std::string_view name) {
  for (GateStatus s : {GateStatus::kPass, GateStatus::kFail, GateStatus::kTimeout,
                       GateStatus::kCrashed, GateStatus::kNotRun, GateStatus::kInfraError}) {
    if (gate_status_name(s) == name) return s;
  }
  throw std::invalid_argument("unknown gate status '" + std::string(name) +
                              "' (expected pass, fail, timeout, crashed, not_run, infra_error)");
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
  case Verdict::kPass:
    return "pass";
  case Verdict::kReject:
    return "reject";
  case Verdict::kPendingDeviceValidation:
    return "pending_device_validation";
  }
  return "reject";
}

Verdict parse_verdict(std::string_view name) {
  for (Verdict v : {Verdict::kPass, Verdict::kReject, Verdict::kPendingDeviceValidation})
    if (verdict_name(v) == name) return v;
  throw std::invalid_argument("unknown verdict '" + std::string(name) +
                              "' (expected pass, reject, pending_device_validation)");
}

Verdict decide_verdict(const std::vector<GateResult>& gates) {
  bool pending = false;
  for (const auto& g : gates) {
    if (g.status == GateStatus::kFail || g.status == GateStatus::kTimeout ||
        g.status == GateStatus::kCrashed)
      return Verdict::kReject;
    if (g.status == GateStatus::kNotRun || g.status == GateStatus::kInfraError) pending = true;
  }
  return pending || gates.empty() ? Verdict::kPendingDeviceValidation : Verdict::kPass;
}

nlohmann::json PublicReport::to_json() const {
  nlohmann::json gates_json = nlohmann::json::array();
  for (const auto& g : gates) {
    gates_json.push_back({{"name", g.name},
                          {"status", gate_status_name(g.status)},
                          {"reason", g.reason},
                          {"evidence", g.evidence}});
  }
  return {{"verdict", verdict_name(verdict)}, {"gates", gates_json}, {"artifacts", artifacts}};
}

PublicReport PublicReport::from_json(const nlohmann::json& j) {
  PublicReport r;
  try {
    r.verdict = parse_verdict(j.at("verdict").get<std::string>());
    for (const auto& g : j.at("gates")) {
      r.gates.push_back(
          {g.at("name").get<std::string>(), parse_gate_status(g.at("status").get<std::string>()),
           g.value("reason", std::string()), g.value("evidence", nlohmann::json::object())});
    }
    if (j.contains("artifacts"))
      r.artifacts = j.at("artifacts").get<std::map<std::string, std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("public report JSON: ") + e.what());
  }
  return r;
}

const GateResult* PublicReport::find(std::string_view gate) const {
  for (const auto& g : gates)
    if (g.name == gate) return &g;
  return nullptr;
}

} // namespace kloop::evaluator
