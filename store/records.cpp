#include "store/records.h"

namespace kloop::store {

std::string_view name(SessionStatus s) {
  switch (s) {
  case SessionStatus::kRunning:
    return "running";
  case SessionStatus::kCompleted:
    return "completed";
  case SessionStatus::kInterrupted:
    return "interrupted";
  case SessionStatus::kFailed:
    return "failed";
  }
  return "unknown";
}

std::string_view name(GateCode s) {
  switch (s) {
  case GateCode::kPass:
    return "pass";
  case GateCode::kFail:
    return "fail";
  case GateCode::kTimeout:
    return "timeout";
  case GateCode::kCrashed:
    return "crashed";
  case GateCode::kNotRun:
    return "not_run";
  case GateCode::kInfraError:
    return "infra_error";
  }
  return "unknown";
}

std::string_view name(VerdictCode s) {
  switch (s) {
  case VerdictCode::kPass:
    return "pass";
  case VerdictCode::kReject:
    return "reject";
  case VerdictCode::kPendingDeviceValidation:
    return "pending_device_validation";
  }
  return "unknown";
}

std::string_view name(Decision s) {
  switch (s) {
  case Decision::kPromoted:
    return "promoted";
  case Decision::kRejected:
    return "rejected";
  case Decision::kPendingDeviceValidation:
    return "pending_device_validation";
  }
  return "unknown";
}

std::string_view name(ArtifactKind s) {
  static constexpr std::string_view kNames[] = {
      "source",           "manifest",          "ptx",          "cubin", "prompt", "response", "log",
      "sanitizer_report", "benchmark_samples", "case_results", "other"};
  const int i = static_cast<int>(s);
  return (i >= 0 && i <= 10) ? kNames[i] : "unknown";
}

} // namespace kloop::store
