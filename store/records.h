// Plain records the store persists, one struct per table, plus the persisted enums. store/ knows
// nothing of the evaluator: gate statuses and verdicts are stored as integers whose values equal
// evaluator::GateStatus and evaluator::Verdict (static_cast between them). Persisted enum values
// are explicit and never reused. Large bytes are never fields here: they are blob SHA-256s
// (put them with Store::Step::put_blob first). Ids are SQLite rowids (0 = not yet stored).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::store {

// sessions.status
enum class SessionStatus : int { kRunning = 0, kCompleted = 1, kInterrupted = 2, kFailed = 3 };
// Same values as evaluator::GateStatus.
enum class GateCode : int {
  kPass = 0,
  kFail = 1,
  kTimeout = 2,
  kCrashed = 3,
  kNotRun = 4,
  kInfraError = 5
};
// Same values as evaluator::Verdict.
enum class VerdictCode : int { kPass = 0, kReject = 1, kPendingDeviceValidation = 2 };
// promotion_decisions.decision
enum class Decision : int { kPromoted = 0, kRejected = 1, kPendingDeviceValidation = 2 };
// artifacts.kind
enum class ArtifactKind : int {
  kSource = 0,
  kManifest = 1,
  kPtx = 2,
  kCubin = 3,
  kPrompt = 4,
  kResponse = 5,
  kLog = 6,
  kSanitizerReport = 7,
  kBenchmarkSamples = 8,
  kCaseResults = 9,
  kOther = 10
};

std::string_view name(SessionStatus s); // "running", "completed", "interrupted", "failed"
std::string_view name(GateCode s);      // "pass", "fail", "timeout", "crashed", "not_run", ...
std::string_view name(VerdictCode s);   // "pass", "reject", "pending_device_validation"
std::string_view name(Decision s);      // "promoted", "rejected", "pending_device_validation"
std::string_view name(ArtifactKind s);  // "source", "manifest", "ptx", "cubin", ...

struct SessionRecord {
  std::int64_t id = 0;
  std::string operator_name;    // "weighted_rmsnorm"
  std::string contract_version; // "1"
  std::string contract_sha256;  // SHA-256 of the contract text
  std::string provider;         // "offline", "openai", ...
  std::string model;
  int budget = 0; // iterations allowed
  std::int64_t seed = 0;
  std::string kloop_version, kloop_commit;
  std::string toolkit_version;      // "13.0"; "" when unknown
  std::string driver_version;       // "" when no driver
  std::string device_name;          // "" when no device
  std::string device_uuid;          // "GPU-..."; "" when no device
  std::string device_arch;          // "sm_90"
  std::string started_at, ended_at; // ISO-8601 UTC; filled by the store
  SessionStatus status = SessionStatus::kRunning;
  std::optional<VerdictCode> verdict;               // final verdict, set by finish_session
  nlohmann::json params = nlohmann::json::object(); // anything --resume needs (base_url, ...)
  std::int64_t owner_pid = 0;                       // filled by the store
  std::string owner_host;                           // filled by the store
};

struct IterationRecord {
  std::int64_t id = 0, session_id = 0;
  int index = 0;                    // 0-based; unique per session
  std::string started_at, ended_at; // ISO-8601 UTC ("" = now, filled by the store)
  double wall_ms = 0;
  nlohmann::json notes = nlohmann::json::object();
};

struct PromptRecord {
  std::int64_t id = 0, iteration_id = 0;
  std::string role;          // "system", "contract", "feedback", "full"
  std::string blob_sha256;   // rendered text
  std::optional<int> tokens; // when the provider reported it
};

struct ResponseRecord {
  std::int64_t id = 0, iteration_id = 0;
  std::optional<std::int64_t> prompt_id;
  std::string blob_sha256; // raw response body ("" when none arrived)
  std::string provider, model;
  std::optional<int> http_status;
  double latency_ms = 0;
  int retries = 0;
  std::optional<int> prompt_tokens, completion_tokens;
  std::string error; // "" when fine
};

struct CandidateRecord {
  std::int64_t id = 0, iteration_id = 0;
  int ordinal = 0;             // within the iteration
  std::string source_sha256;   // kernel.cu blob ("" if the reply had none)
  std::string manifest_sha256; // manifest.json blob ("" if none)
  VerdictCode verdict = VerdictCode::kReject;
  std::optional<double> speedup, speedup_lo, speedup_hi; // kernel vs baseline, with interval
  nlohmann::json report = nlohmann::json::object();      // PublicReport::to_json()
};

struct ArtifactRecord {
  std::int64_t id = 0, iteration_id = 0;
  std::optional<std::int64_t> candidate_id;
  ArtifactKind kind = ArtifactKind::kOther;
  std::string name; // "kernel.cubin", "memcheck.log", ...
  std::string sha256;
  std::int64_t size = 0; // filled by Step::add_artifact
};

struct ToolCallRecord {
  std::int64_t id = 0, iteration_id = 0;
  std::optional<std::int64_t> candidate_id;
  std::string tool; // "nvrtc", "compute-sanitizer", "kloop-gpu-worker", ...
  std::string tool_version;
  std::vector<std::string> argv;
  std::string cwd;
  std::optional<int> exit_code, signal;
  double wall_ms = 0, user_ms = 0, sys_ms = 0;
  std::int64_t max_rss_kb = 0;
  std::string stdout_sha256, stderr_sha256; // blobs; "" when not captured
};

struct GateRecord {
  std::int64_t id = 0, candidate_id = 0;
  int ordinal = 0;  // evaluation order
  std::string name; // evaluator kGate* name
  GateCode status = GateCode::kNotRun;
  std::string reason;
  nlohmann::json evidence = nlohmann::json::object();
};

struct TestCaseRecord {
  std::int64_t id = 0, candidate_id = 0;
  std::string gate; // "correctness", ...
  std::string name; // case family + parameters
  GateCode status = GateCode::kNotRun;
  nlohmann::json detail = nlohmann::json::object(); // dtype, shape, errors, audit findings
};

struct BenchmarkRecord {
  std::int64_t id = 0, candidate_id = 0;
  std::string series;         // "kernel_warm", "kernel_cold", "wrapper_warm", "baseline_warm"...
  std::string samples_sha256; // raw samples blob (JSON array of microseconds)
  int count = 0;
  std::optional<double> median_us, lo_us, hi_us;
};

struct TelemetryRecord {
  std::int64_t id = 0, candidate_id = 0;
  std::string kind; // "roofline", "stall_reasons", "memory", "registers", ...
  nlohmann::json data = nlohmann::json::object();
};

struct HoldoutCommitmentRecord {
  std::int64_t id = 0, session_id = 0;
  std::string commitment_sha256;
  std::string suite_version;
  std::string created_at; // filled by the store
};

struct HoldoutRunRecord {
  std::int64_t id = 0, commitment_id = 0, candidate_id = 0;
  GateCode status = GateCode::kNotRun;
  nlohmann::json result = nlohmann::json::object();
  std::string report_sha256; // blob, "" when none
  bool retired = true;
  std::string ran_at; // filled by the store
};

struct PromotionRecord {
  std::int64_t id = 0, session_id = 0;
  std::optional<std::int64_t> candidate_id; // the frozen best, if any
  Decision decision = Decision::kRejected;
  std::string reason;
  // Receipt inputs that no other row holds: "dispatch" (predicate string), "rollout"
  // {feature_flag_and_scope, healthy_worker_recovery_and_reference_target, revalidation_policy}.
  nlohmann::json evidence = nlohmann::json::object();
  std::string decided_at; // filled by the store
};

struct ReceiptRecord {
  std::int64_t id = 0, session_id = 0;
  std::string payload_sha256; // SHA-256 of the canonical payload
  std::string receipt_sha256; // blob holding the whole receipt JSON
  std::string signing_key_id, reviewer;
  std::string signed_at; // filled by the store
};

} // namespace kloop::store
