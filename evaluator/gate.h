// Gate outcomes and the public report of one candidate. Expected outcomes (a compile error, a wrong
// answer, a timeout) are values here; infrastructure failures are exceptions (InfraError) that the
// caller records as `infra_error`, never blamed on the candidate.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::evaluator {

// Whose fault it is (../shared/docs/STYLE.md). Persisted: values are fixed and never reused.
enum class GateStatus : int {
  kPass = 0,
  kFail = 1,       // the candidate's fault, fed back
  kTimeout = 2,    // the candidate's fault (deadline), fed back
  kCrashed = 3,    // the candidate's fault (fault class named in the reason), fed back
  kNotRun = 4,     // not run, reason says why (no device, tool missing, earlier gate failed)
  kInfraError = 5, // ours; never blamed on the candidate
};

std::string_view gate_status_name(GateStatus status); // "pass", "fail", "timeout", ...
GateStatus parse_gate_status(std::string_view name);  // throws std::invalid_argument

// Canonical gate names, in evaluation order.
inline constexpr std::string_view kGateFormat = "format"; // model reply -> candidate files
inline constexpr std::string_view kGateContract = "contract";
inline constexpr std::string_view kGateBuild = "build";
inline constexpr std::string_view kGateStatic = "static";
inline constexpr std::string_view kGateCorrectness = "correctness";
inline constexpr std::string_view kGateSanitizer = "sanitizer";
inline constexpr std::string_view kGateBenchmark = "benchmark";
inline constexpr std::string_view kGateRoofline = "roofline";

struct GateResult {
  std::string name; // one of the kGate* names
  GateStatus status = GateStatus::kNotRun;
  std::string reason;                                 // one line; empty on pass
  nlohmann::json evidence = nlohmann::json::object(); // gate-specific, documented per gate
};

// Final disposition of one public evaluation.
enum class Verdict : int { kPass = 0, kReject = 1, kPendingDeviceValidation = 2 };
std::string_view verdict_name(Verdict verdict); // "pass", "reject", "pending_device_validation"
Verdict parse_verdict(std::string_view name);   // throws std::invalid_argument

// The public report of one candidate: what feedback may see. Holdout results are a different type
// (holdout/) that no function of feedback/ accepts.
struct PublicReport {
  Verdict verdict = Verdict::kReject;
  std::vector<GateResult> gates;
  std::map<std::string, std::string> artifacts; // name ("kernel.cu", "manifest.json",
                                                // "kernel.ptx", "kernel.cubin") -> sha256 hex
  nlohmann::json
  to_json() const; // {"verdict", "gates":[{name,status,reason,evidence}], "artifacts"}
  // Inverse of to_json (a stored report). Throws std::invalid_argument naming the bad field.
  static PublicReport from_json(const nlohmann::json& j);
  const GateResult* find(std::string_view gate) const; // nullptr when absent
};

// Verdict from gate results: any fail/timeout/crashed -> reject; else any not_run or infra_error
// -> pending_device_validation; else pass.
Verdict decide_verdict(const std::vector<GateResult>& gates);

// Infrastructure failure inside kloop (not the candidate's fault).
class InfraError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace kloop::evaluator
