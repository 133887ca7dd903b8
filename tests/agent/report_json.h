// Test helper: a PublicReport from its to_json() form (fixtures under tests/agent/fixtures/).
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "evaluator/gate.h"
#include "tests/support/test_files.h"

namespace kloop::testing {

inline evaluator::Verdict parse_verdict(const std::string& v) {
  for (auto x : {evaluator::Verdict::kPass, evaluator::Verdict::kReject,
                 evaluator::Verdict::kPendingDeviceValidation})
    if (evaluator::verdict_name(x) == v) return x;
  throw std::invalid_argument("unknown verdict " + v);
}

inline evaluator::PublicReport report_from_json(const nlohmann::json& j) {
  evaluator::PublicReport r;
  r.verdict = parse_verdict(j.at("verdict").get<std::string>());
  for (const auto& g : j.at("gates"))
    r.gates.push_back({g.at("name").get<std::string>(),
                       evaluator::parse_gate_status(g.at("status").get<std::string>()),
                       g.value("reason", ""), g.value("evidence", nlohmann::json::object())});
  r.artifacts = j.value("artifacts", std::map<std::string, std::string>{});
  return r;
}

inline evaluator::PublicReport load_report(const std::string& fixture) {
  const std::string path = std::string(KLOOP_SOURCE_DIR) + "/tests/agent/fixtures/" + fixture;
  return report_from_json(nlohmann::json::parse(test_support::read_file(path)));
}

} // namespace kloop::testing
