// The kloop store: a directory holding kloop.db (SQLite, WAL, foreign keys on) and blobs/ (the
// content-addressed BlobStore). Writers (the refinement loop, holdout, receipts) record one step
// at a time through Store::Step, a single transaction that rolls back unless committed, so a
// kill at any moment leaves every committed step intact. Readers (sessions, show, compare,
// replay, report, receipts) load whole sessions as plain records. Not thread-safe: one Store per
// thread; several processes may share a directory (SQLite locking, waits of kBusyTimeoutMs).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/blobs.h"
#include "store/chain.h"
#include "store/records.h"
#include "store/sqlite.h"

namespace kloop::store {

enum class OpenMode { kReadWrite, kReadOnly };

// One candidate with everything recorded about it.
struct CandidateDetail {
  CandidateRecord candidate;
  std::vector<GateRecord> gates;     // by ordinal
  std::vector<TestCaseRecord> cases; // all recorded cases
  std::vector<ArtifactRecord> artifacts;
  std::vector<ToolCallRecord> tool_calls;
  std::vector<BenchmarkRecord> benchmarks;
  std::vector<TelemetryRecord> telemetry;
  const GateRecord* gate(std::string_view name) const;              // nullptr when absent
  const TelemetryRecord* telemetry_of(std::string_view kind) const; // first of that kind
  const ArtifactRecord* artifact_of(ArtifactKind kind) const;       // first of that kind
  // How it was built: the build gate's evidence "sandbox" ("bubblewrap", "unshare", or "none" for
  // --no-sandbox); "" when it was not built (format or contract failed) or nothing was recorded.
  std::string sandbox() const;
};

// How the built candidates of a session were sandboxed: each sandbox kind with its count, in
// first-seen order ({"bubblewrap", 5}; {"bubblewrap", 3}, {"none", 2} after a change).
using SandboxCounts = std::vector<std::pair<std::string, int>>;
// "bubblewrap" (one kind), "bubblewrap 3, none 2" (several), "-" (no candidate was built).
std::string sandbox_text(const SandboxCounts& counts);

struct IterationDetail {
  IterationRecord iteration;
  std::vector<PromptRecord> prompts;
  std::vector<ResponseRecord> responses;
  std::vector<ToolCallRecord> tool_calls; // those not tied to a candidate
  std::vector<CandidateDetail> candidates;
};

struct SessionDetail {
  SessionRecord session;
  std::vector<IterationDetail> iterations; // by index
  std::vector<HoldoutCommitmentRecord> holdout_commitments;
  std::vector<HoldoutRunRecord> holdout_runs;
  std::optional<PromotionRecord> promotion; // the latest decision
  std::vector<ReceiptRecord> receipts;
  std::optional<ChainHead> chain_head;  // its row chain's head when loaded; nullopt: unchained
  std::vector<std::string> chain_links; // every link's hash, in order (store/chain.h)
  // Whether link `links` (1-based) of the chain is `sha256`: a head recorded earlier (a receipt's)
  // that the chain still holds, rows added since only extending it.
  bool chain_holds(std::int64_t links, const std::string& sha256) const;
  const CandidateDetail* find_candidate(std::int64_t id) const; // nullptr when absent
  // The holdout commitment with row id `id`; nullptr when absent.
  const HoldoutCommitmentRecord* find_commitment(std::int64_t id) const;
  const CandidateDetail* best_candidate() const; // promoted one, else best passing speed-up
  std::int64_t tokens() const;                   // prompt + completion tokens of all responses
  // Iterations whose provider reported usage that made no sense (notes "usage_invalid"): their
  // tokens are unknown, not counted in tokens().
  int unknown_usage_iterations() const;
  SandboxCounts sandboxes() const; // of the built candidates, in iteration order
  double wall_ms() const;          // sum of iteration wall times
  nlohmann::json to_json() const;  // everything (and the chain head), for `kloop show --json`
};

// One row of `kloop sessions`.
struct SessionSummary {
  SessionRecord session;
  int iterations = 0, candidates = 0;
  // Speed-up of SessionDetail::best_candidate(): the candidate of the latest promotion decision
  // (promoted, or frozen and rejected), else the fastest passing one; as in `kloop compare`.
  std::optional<double> best_speedup, best_lo, best_hi;
  std::int64_t tokens = 0;
  std::optional<Decision> decision;
  SandboxCounts sandboxes; // how its built candidates were sandboxed
  nlohmann::json to_json() const;
};

// What `kloop optimize --resume ID` needs.
struct ResumeInfo {
  SessionRecord session;                       // parameters: provider, model, budget, seed, params
  std::optional<int> last_committed_iteration; // highest committed index; nullopt = none
  int committed_iterations = 0;
};

// Result of `kloop store verify`.
struct VerifyReport {
  std::int64_t blobs_checked = 0;
  std::vector<std::string> missing, altered; // SHA-256s
  std::string integrity;                     // "ok" or SQLite's integrity_check lines
  // Files under blobs/ that no row registers: blobs written by a step that never committed (a
  // killed run writes blobs before the rows that name them), or left after rows were deleted; and
  // ".tmp-*" files of an interrupted write. Paths relative to blobs/. Reported, not damage: no
  // record names them, so none is missing or altered; they only take space.
  std::vector<std::string> orphans;
  std::int64_t orphan_bytes = 0;
  ChainReport chains; // the row chains (store/chain.h)
  bool ok() const { return missing.empty() && altered.empty() && integrity == "ok" && chains.ok(); }
};

// Result of merging one source store into this one (Store::merge_from).
struct MergeReport {
  std::string source;
  std::vector<std::pair<std::int64_t, std::int64_t>> merged; // (source id, new id)
  std::vector<std::string> skipped; // one line per session not merged, with the reason
  std::int64_t blobs_copied = 0;    // new blob files written here
  std::int64_t blobs_present = 0;   // already here (deduplicated by hash)
  int holdout_files = 0;            // sealed or retired suites copied, as they were
};

class Store {
public:
  // $KLOOP_STORE when set and non-empty, else "./kloop-store".
  static std::string default_dir();

  // Opens (kReadWrite: creating the directory and schema if needed) the store at `dir`. In
  // kReadWrite mode, sessions left `running` by a dead process on this host become
  // `interrupted`. Throws StoreError with a clear message for: a corrupt or foreign database, a
  // schema newer than this binary, a read-only directory (kReadWrite); NoSuchStore for a path
  // that is not a directory, or (kReadOnly) a missing directory or one without kloop.db.
  static Store open(const std::string& dir, OpenMode mode = OpenMode::kReadWrite);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::string& dir() const { return dir_; }
  const BlobStore& blobs() const { return blobs_; }
  std::string blob(const std::string& sha256) const { return blobs_.get(sha256); }

  // ---- writing ----
  // One transaction. Put blobs first (put_blob), then rows that reference them. Every add_*
  // sets the record's id and returns it. Destroying a Step without commit() rolls it back.
  class Step {
  public:
    Step(Step&&) noexcept;
    ~Step();
    std::string put_blob(std::string_view bytes); // writes the file, registers it; returns sha
    std::int64_t add_iteration(IterationRecord& r);
    std::int64_t add_prompt(PromptRecord& r);
    std::int64_t add_response(ResponseRecord& r);
    std::int64_t add_candidate(CandidateRecord& r);
    // Puts `bytes` as a blob, fills r.sha256 and r.size.
    std::int64_t add_artifact(ArtifactRecord& r, std::string_view bytes);
    std::int64_t add_tool_call(ToolCallRecord& r);
    std::int64_t add_gate(GateRecord& r);
    std::int64_t add_test_case(TestCaseRecord& r);
    std::int64_t add_benchmark(BenchmarkRecord& r);
    std::int64_t add_telemetry(TelemetryRecord& r);
    std::int64_t add_holdout_commitment(HoldoutCommitmentRecord& r);
    std::int64_t add_holdout_run(HoldoutRunRecord& r);
    std::int64_t add_promotion(PromotionRecord& r);
    std::int64_t add_receipt(ReceiptRecord& r);
    // Updates a stored candidate's verdict, speed-up and report (e.g. after benchmarking).
    void update_candidate(const CandidateRecord& r);
    // Replaces the evidence of stored promotion decision `promotion_id` (the rollout that
    // `kloop export --rollout` attaches); its decision, candidate, reason and decided_at stay.
    void set_promotion_evidence(std::int64_t promotion_id, const nlohmann::json& evidence);
    void commit(); // throws StoreError; nothing of the step persists then

  private:
    friend class Store;
    explicit Step(Store& s);
    Store* store_;
    std::unique_ptr<Transaction> txn_;
  };
  Step begin_step();

  // Inserts a `running` session owned by this process (pid, host); fills id, started_at, owner.
  std::int64_t create_session(SessionRecord& s);
  // Sets status, verdict and ended_at.
  void finish_session(std::int64_t id, SessionStatus status, std::optional<VerdictCode> verdict);
  // Sets params[key] = value on a stored session (facts known only after the run, e.g.
  // "resources": the kloop process's peak RSS). Read-modify-write in one transaction; throws
  // StoreError "no session ID" when it does not exist.
  void set_session_param(std::int64_t id, const std::string& key, const nlohmann::json& value);
  // For --resume: takes ownership of an interrupted (or failed) session and sets it `running`.
  // Throws StoreError when it is running under a live process or completed.
  ResumeInfo resume_session(std::int64_t id);
  ResumeInfo resume_info(std::int64_t id); // read-only view of the same
  // Marks `running` sessions whose owner process on this host is gone as `interrupted`;
  // returns how many. open() calls it in kReadWrite mode.
  int mark_interrupted();

  // ---- reading ----
  std::vector<SessionSummary> list_sessions(); // newest first
  SessionDetail load_session(std::int64_t id); // throws StoreError "no session ID in DIR"
  // integrity_check, every registered blob re-hashed, orphan files listed, row chains
  VerifyReport verify();
  // The session's chain head (store/chain.h); nullopt for a session recorded before chaining.
  std::optional<ChainHead> chain_head(std::int64_t session_id);

  // ---- merging (store/merge.cpp) ----
  // Copies every session of the store at `source_dir` (opened read-only, never changed) that this
  // store does not hold yet (by session uid, so merging a store twice adds nothing) with new row
  // ids; its origin (source store, source id, uid) goes to session_origins. Every blob the source
  // registers is re-hashed and copied unless present; sealed holdout suites are copied as files,
  // never unsealed (sealed stays sealed, retired stays retired); row chains are copied and stay
  // valid. A running session is skipped (merge again when it ends). One transaction per source.
  // Throws StoreError for a source that is no kloop store, has a schema newer than this binary or
  // a table layout this one does not know (naming the column), and DamagedStore (nothing merged)
  // when a source blob is missing or altered or a source chain fails verification.
  MergeReport merge_from(const std::string& source_dir);

private:
  Store(std::string dir, Db db);
  std::string dir_;
  Db db_;
  BlobStore blobs_;
};

std::string now_iso8601(); // UTC, second resolution: "2026-10-10T12:00:00Z"
// Whether process `pid` of this host is alive (a zombie, killed but not reaped, is not). Decides
// whether a `running` session's owner is gone (Store::mark_interrupted).
bool process_alive(std::int64_t pid);
// JSON text of a value the store writes (row columns, JSON blobs). Text that is not valid UTF-8 (a
// compiler diagnostic quoting a candidate's bytes, a provider body) is written with U+FFFD
// instead of making the serializer throw, which would roll back the whole step and end the
// process; verbatim bytes belong in blobs. `indent` as nlohmann::json::dump (-1: compact).
std::string json_text(const nlohmann::json& j, int indent = -1);
// The provider name `kloop checker-coverage` records its runs under (mutation/store_report.h);
// no generator provider has it (--provider takes offline, openai, anthropic, replay).
inline constexpr std::string_view kCheckerCoverageProvider = "checker-coverage";
// What kind of run a session records: "checker-coverage" (a mutation analysis of the evaluator)
// or "optimize" (a refinement session). Shown by `kloop sessions` and in the JSON views.
std::string_view session_kind(const SessionRecord& s);
nlohmann::json to_json(const SessionRecord& s);
nlohmann::json to_json(const GateRecord& g);

} // namespace kloop::store
