// Store: opening, session lifecycle and the Step writer. Reads are in store_read.cpp.
#include "store/store.h"

#include <sodium.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "store/chain.h"
#include "store/error.h"
#include "store/schema.h"
#include "store/text_view.h"

namespace kloop::store {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

} // namespace

bool process_alive(std::int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0) {
    // A zombie (killed, not yet reaped) is not a live owner.
    FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
    if (!f) return true;
    char line[512] = {};
    const bool got = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    const char* rp = got ? std::strrchr(line, ')') : nullptr;
    return !(rp && rp[1] == ' ' && rp[2] == 'Z');
  }
  return errno == EPERM;
}

namespace {

std::string opt_sha(const std::string& s) {
  return s;
}

// A random 128-bit session uid (hex): the session's identity across stores (store merge).
std::string new_session_uid() {
  if (sodium_init() < 0) throw StoreError("store: libsodium failed to initialise");
  unsigned char b[16];
  randombytes_buf(b, sizeof b);
  char hex[33];
  sodium_bin2hex(hex, sizeof hex, b, sizeof b);
  return hex;
}

// Whether `path` is a folder holding at least one entry.
bool non_empty_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::directory_iterator(path, ec) != std::filesystem::directory_iterator();
}

// Refuses to create a database in `dir` over the leftovers of a lost one: kloop.db missing or empty
// (zero bytes) next to a non-empty blobs/, holdout/ or exports/ folder. A new database there would
// number its sessions from 1 again, and a session of it would adopt the sealed holdout suite (and
// the exports) of the lost session with the same number, which it never committed to.
void refuse_leftovers(const std::string& dir) {
  const std::string db_path = dir + "/kloop.db";
  struct stat sb {};
  const bool db_exists = ::stat(db_path.c_str(), &sb) == 0;
  if (db_exists && sb.st_size > 0) return; // an existing database: migrate() checks it
  struct stat wal {};
  if (::stat((db_path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) return; // not checkpointed
  std::vector<std::string> left;
  for (const char* sub : {"blobs", "holdout", "exports"})
    if (non_empty_dir(dir + "/" + sub)) left.push_back(std::string(sub) + "/");
  if (left.empty()) return;
  std::string list;
  for (const auto& l : left)
    list += (list.empty() ? "" : ", ") + l;
  throw DamagedStore(fmt::format(
      "store: {} holds {} but {}: the leftovers of a store whose database was lost. kloop will "
      "not create a new database over them (its sessions would be numbered from 1 again and "
      "adopt the sealed holdout suites of the lost ones); restore kloop.db from a backup, or move "
      "{} aside and start a new store",
      dir, list, db_exists ? "kloop.db is empty (0 bytes)" : "no kloop.db", dir));
}

} // namespace

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Store::default_dir() {
  const char* env = std::getenv("KLOOP_STORE");
  return (env && *env) ? env : "./kloop-store";
}

Store::Store(std::string dir, Db db)
    : dir_(std::move(dir)), db_(std::move(db)), blobs_(dir_ + "/blobs") {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Store Store::open(const std::string& dir, OpenMode mode) {
  const bool writable = mode == OpenMode::kReadWrite;
  struct stat sb {};
  const bool exists = ::stat(dir.c_str(), &sb) == 0;
  if (exists && !S_ISDIR(sb.st_mode))
    throw NoSuchStore(fmt::format("store: {} is not a directory; --store takes a directory", dir));
  if (!exists) {
    if (!writable)
      throw NoSuchStore(fmt::format("store: {} does not exist; run `kloop optimize` first or pass "
                                    "--store DIR (default $KLOOP_STORE or ./kloop-store)",
                                    dir));
    // EEXIST: another kloop created it a moment ago (two runs starting on one new store).
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) // an output path in a missing folder: the caller's
        throw NoSuchStore(fmt::format("store: cannot create {}: its parent folder does not "
                                      "exist; create it first or pass another --store",
                                      dir));
      throw StoreError(fmt::format("store: cannot create {} ({}); use a writable --store", dir,
                                   std::strerror(err)));
    }
  }
  const std::string db_path = dir + "/kloop.db";
  const bool dir_writable = ::access(dir.c_str(), W_OK) == 0;
  if (writable && !dir_writable)
    throw StoreError(fmt::format("store: {} is read-only ({}); kloop needs to write there: use "
                                 "a writable --store",
                                 dir, std::strerror(EACCES)));
  if (!writable && ::access(db_path.c_str(), F_OK) != 0)
    throw NoSuchStore(fmt::format("store: {} has no kloop.db; it is not a kloop store (pass the "
                                  "right --store)",
                                  dir));
  if (writable) refuse_leftovers(dir);
  const std::string label = db_path;
  std::string uri = "file:" + db_path;
  int flags = writable ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) : SQLITE_OPEN_READONLY;
  if (!writable && !dir_writable) uri += "?immutable=1"; // WAL needs -shm in a writable dir
  Db db(uri, flags, label);
  if (writable) {
    // The first statement that reads the file reveals corruption (SQLITE_NOTADB).
    db.exec(fmt::format("PRAGMA busy_timeout = {}", kBusyTimeoutMs));
    // The switch to WAL takes an exclusive lock for which SQLite answers SQLITE_BUSY at once,
    // without its busy handler, while another process creates or opens the same new store; it is
    // retried for as long as any other wait for the store (kBusyTimeoutMs).
    for (int attempt = 1;; ++attempt) {
      try {
        Stmt jm = db.prepare("PRAGMA journal_mode = WAL");
        jm.step();
        break;
      } catch (const StoreBusy&) {
        if (attempt >= kBusyTimeoutMs / 50) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    db.exec("PRAGMA synchronous = FULL");
  } else {
    db.exec(fmt::format("PRAGMA busy_timeout = {}", kBusyTimeoutMs));
  }
  db.exec("PRAGMA foreign_keys = ON");
  migrate(db, writable);
  Store store(dir, std::move(db));
  if (writable) store.mark_interrupted();
  return store;
}

// ---------------------------------------------------------------- sessions

std::int64_t Store::create_session(SessionRecord& s) {
  s.started_at = now_iso8601();
  s.status = SessionStatus::kRunning;
  s.owner_pid = ::getpid();
  s.owner_host = host_name();
  Transaction txn(db_);
  Stmt st = db_.prepare(
      "INSERT INTO sessions (operator, contract_version, contract_sha256, provider, model, "
      "budget, seed, kloop_version, kloop_commit, toolkit_version, driver_version, device_name, "
      "device_uuid, device_arch, started_at, status, params_json, owner_pid, owner_host, uid) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, s.operator_name).bind(2, s.contract_version).bind(3, s.contract_sha256);
  st.bind(4, s.provider).bind(5, s.model).bind(6, s.budget).bind(7, s.seed);
  st.bind(8, s.kloop_version).bind(9, s.kloop_commit).bind(10, s.toolkit_version);
  st.bind(11, s.driver_version).bind(12, s.device_name).bind(13, s.device_uuid);
  st.bind(14, s.device_arch).bind(15, s.started_at).bind(16, static_cast<int>(s.status));
  st.bind(17, json_text(s.params)).bind(18, s.owner_pid).bind(19, s.owner_host);
  st.bind(20, new_session_uid()).run();
  s.id = db_.last_insert_rowid();
  chain_row(db_, "sessions", s.id, LinkKind::kInsert);
  txn.commit();
  return s.id;
}

void Store::finish_session(std::int64_t id, SessionStatus status,
                           std::optional<VerdictCode> verdict) {
  Transaction txn(db_);
  Stmt st = db_.prepare("UPDATE sessions SET status = ?, verdict = ?, ended_at = ? WHERE id = ?");
  st.bind(1, static_cast<int>(status));
  if (verdict)
    st.bind(2, static_cast<int>(*verdict));
  else
    st.bind_null(2);
  st.bind(3, now_iso8601()).bind(4, id).run();
  chain_row(db_, "sessions", id, LinkKind::kUpdate);
  txn.commit();
}

void Store::set_session_param(std::int64_t id, const std::string& key,
                              const nlohmann::json& value) {
  Transaction txn(db_);
  Stmt read = db_.prepare("SELECT params_json FROM sessions WHERE id = ?");
  read.bind(1, id);
  if (!read.step())
    throw NoSuchSession(fmt::format("store: no session {} in {}; list them with `{}`", id, dir_,
                                    kloop_command("sessions", dir_)));
  nlohmann::json params = nlohmann::json::parse(read.text(0), nullptr, false);
  if (!params.is_object()) params = nlohmann::json::object();
  params[key] = value;
  Stmt write = db_.prepare("UPDATE sessions SET params_json = ? WHERE id = ?");
  write.bind(1, json_text(params)).bind(2, id).run();
  chain_row(db_, "sessions", id, LinkKind::kUpdate);
  txn.commit();
}

int Store::mark_interrupted() {
  const std::string host = host_name();
  std::vector<std::int64_t> dead;
  {
    Stmt st = db_.prepare("SELECT id, owner_pid, owner_host FROM sessions WHERE status = ?");
    st.bind(1, static_cast<int>(SessionStatus::kRunning));
    while (st.step())
      if (st.text(2) == host && !process_alive(st.int64(1))) dead.push_back(st.int64(0));
  }
  if (dead.empty()) return 0;
  Transaction txn(db_);
  for (std::int64_t id : dead) {
    Stmt up = db_.prepare("UPDATE sessions SET status = ?, ended_at = ? WHERE id = ?");
    up.bind(1, static_cast<int>(SessionStatus::kInterrupted)).bind(2, now_iso8601()).bind(3, id);
    up.run();
    chain_row(db_, "sessions", id, LinkKind::kUpdate);
  }
  txn.commit();
  return static_cast<int>(dead.size());
}

ResumeInfo Store::resume_info(std::int64_t id) {
  ResumeInfo info;
  info.session = load_session(id).session;
  Stmt st = db_.prepare("SELECT max(idx), count(*) FROM iterations WHERE session_id = ?");
  st.bind(1, id);
  if (st.step()) {
    if (!st.is_null(0)) info.last_committed_iteration = static_cast<int>(st.int64(0));
    info.committed_iterations = static_cast<int>(st.int64(1));
  }
  return info;
}

ResumeInfo Store::resume_session(std::int64_t id) {
  mark_interrupted();
  ResumeInfo info = resume_info(id);
  const auto status = info.session.status;
  if (status == SessionStatus::kRunning)
    throw StoreError(fmt::format("store: session {} is still running (pid {} on {}); wait for it "
                                 "to finish or stop it first",
                                 id, info.session.owner_pid, info.session.owner_host));
  if (status == SessionStatus::kCompleted)
    throw StoreError(fmt::format("store: session {} already completed; start a new session "
                                 "instead of resuming it",
                                 id));
  Transaction txn(db_);
  Stmt st = db_.prepare("UPDATE sessions SET status = ?, owner_pid = ?, owner_host = ?, ended_at = "
                        "NULL WHERE id = ?");
  st.bind(1, static_cast<int>(SessionStatus::kRunning)).bind(2, std::int64_t{::getpid()});
  st.bind(3, host_name()).bind(4, id).run();
  chain_row(db_, "sessions", id, LinkKind::kUpdate);
  txn.commit();
  info.session.status = SessionStatus::kRunning;
  info.session.owner_pid = ::getpid();
  info.session.owner_host = host_name();
  return info;
}

// ---------------------------------------------------------------- Step

Store::Step Store::begin_step() {
  return Step(*this);
}
Store::Step::Step(Store& s) : store_(&s), txn_(std::make_unique<Transaction>(s.db_)) {}
Store::Step::Step(Step&&) noexcept = default;
Store::Step::~Step() = default;

void Store::Step::commit() {
  txn_->commit();
}

std::string Store::Step::put_blob(std::string_view bytes) {
  const std::string sha = store_->blobs_.put(bytes);
  Stmt st = store_->db_.prepare("INSERT OR IGNORE INTO blobs (sha256, size) VALUES (?, ?)");
  st.bind(1, sha).bind(2, static_cast<std::int64_t>(bytes.size())).run();
  return sha;
}

namespace {
// Binds "" as NULL (optional blob references).
void bind_sha(Stmt& st, int i, const std::string& sha) {
  if (sha.empty())
    st.bind_null(i);
  else
    st.bind(i, sha);
}
} // namespace

std::int64_t Store::Step::add_iteration(IterationRecord& r) {
  if (r.started_at.empty()) r.started_at = now_iso8601();
  if (r.ended_at.empty()) r.ended_at = now_iso8601();
  Stmt st = store_->db_.prepare(
      "INSERT INTO iterations (session_id, idx, started_at, ended_at, wall_ms, notes_json) "
      "VALUES (?,?,?,?,?,?)");
  st.bind(1, r.session_id).bind(2, r.index).bind(3, r.started_at).bind(4, r.ended_at);
  st.bind(5, r.wall_ms).bind(6, json_text(r.notes)).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "iterations", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_prompt(PromptRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO prompts (iteration_id, role, blob_sha256, tokens) VALUES (?,?,?,?)");
  st.bind(1, r.iteration_id).bind(2, r.role).bind(3, r.blob_sha256).bind(4, r.tokens).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "prompts", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_response(ResponseRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO responses (iteration_id, prompt_id, blob_sha256, provider, model, http_status, "
      "latency_ms, retries, prompt_tokens, completion_tokens, error) VALUES "
      "(?,?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, r.iteration_id).bind(2, r.prompt_id);
  bind_sha(st, 3, r.blob_sha256);
  st.bind(4, r.provider).bind(5, r.model).bind(6, r.http_status).bind(7, r.latency_ms);
  st.bind(8, r.retries).bind(9, r.prompt_tokens).bind(10, r.completion_tokens).bind(11, r.error);
  st.run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "responses", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_candidate(CandidateRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO candidates (iteration_id, ordinal, source_sha256, manifest_sha256, verdict, "
      "speedup, speedup_lo, speedup_hi, report_json) VALUES (?,?,?,?,?,?,?,?,?)");
  st.bind(1, r.iteration_id).bind(2, r.ordinal);
  bind_sha(st, 3, r.source_sha256);
  bind_sha(st, 4, r.manifest_sha256);
  st.bind(5, static_cast<int>(r.verdict)).bind(6, r.speedup).bind(7, r.speedup_lo);
  st.bind(8, r.speedup_hi).bind(9, json_text(r.report)).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "candidates", r.id, LinkKind::kInsert);
  return r.id;
}

void Store::Step::update_candidate(const CandidateRecord& r) {
  Stmt st = store_->db_.prepare(
      "UPDATE candidates SET verdict = ?, speedup = ?, speedup_lo = ?, speedup_hi = ?, "
      "report_json = ? WHERE id = ?");
  st.bind(1, static_cast<int>(r.verdict)).bind(2, r.speedup).bind(3, r.speedup_lo);
  st.bind(4, r.speedup_hi).bind(5, json_text(r.report)).bind(6, r.id).run();
  chain_row(store_->db_, "candidates", r.id, LinkKind::kUpdate);
}

std::int64_t Store::Step::add_artifact(ArtifactRecord& r, std::string_view bytes) {
  r.sha256 = put_blob(bytes);
  r.size = static_cast<std::int64_t>(bytes.size());
  Stmt st = store_->db_.prepare(
      "INSERT INTO artifacts (iteration_id, candidate_id, kind, name, sha256, size) "
      "VALUES (?,?,?,?,?,?)");
  st.bind(1, r.iteration_id).bind(2, r.candidate_id).bind(3, static_cast<int>(r.kind));
  st.bind(4, r.name).bind(5, r.sha256).bind(6, r.size).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "artifacts", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_tool_call(ToolCallRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO tool_calls (iteration_id, candidate_id, tool, tool_version, argv_json, cwd, "
      "exit_code, signal, wall_ms, user_ms, sys_ms, max_rss_kb, stdout_sha256, stderr_sha256) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, r.iteration_id).bind(2, r.candidate_id).bind(3, r.tool).bind(4, r.tool_version);
  st.bind(5, json_text(nlohmann::json(r.argv))).bind(6, r.cwd).bind(7, r.exit_code);
  st.bind(8, r.signal).bind(9, r.wall_ms).bind(10, r.user_ms).bind(11, r.sys_ms);
  st.bind(12, r.max_rss_kb);
  bind_sha(st, 13, opt_sha(r.stdout_sha256));
  bind_sha(st, 14, opt_sha(r.stderr_sha256));
  st.run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "tool_calls", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_gate(GateRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO gate_results (candidate_id, ordinal, name, status, reason, evidence_json) "
      "VALUES (?,?,?,?,?,?)");
  st.bind(1, r.candidate_id).bind(2, r.ordinal).bind(3, r.name);
  st.bind(4, static_cast<int>(r.status)).bind(5, r.reason).bind(6, json_text(r.evidence)).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "gate_results", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_test_case(TestCaseRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO test_cases (candidate_id, gate, name, status, detail_json) VALUES (?,?,?,?,?)");
  st.bind(1, r.candidate_id).bind(2, r.gate).bind(3, r.name);
  st.bind(4, static_cast<int>(r.status)).bind(5, json_text(r.detail)).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "test_cases", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_benchmark(BenchmarkRecord& r) {
  Stmt st = store_->db_.prepare(
      "INSERT INTO benchmark_samples (candidate_id, series, samples_sha256, count, median_us, "
      "lo_us, hi_us) VALUES (?,?,?,?,?,?,?)");
  st.bind(1, r.candidate_id).bind(2, r.series).bind(3, r.samples_sha256).bind(4, r.count);
  st.bind(5, r.median_us).bind(6, r.lo_us).bind(7, r.hi_us).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "benchmark_samples", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_telemetry(TelemetryRecord& r) {
  Stmt st =
      store_->db_.prepare("INSERT INTO telemetry (candidate_id, kind, data_json) VALUES (?,?,?)");
  st.bind(1, r.candidate_id).bind(2, r.kind).bind(3, json_text(r.data)).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "telemetry", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_holdout_commitment(HoldoutCommitmentRecord& r) {
  r.created_at = now_iso8601();
  Stmt st = store_->db_.prepare(
      "INSERT INTO holdout_commitments (session_id, commitment_sha256, suite_version, created_at) "
      "VALUES (?,?,?,?)");
  st.bind(1, r.session_id).bind(2, r.commitment_sha256).bind(3, r.suite_version);
  st.bind(4, r.created_at).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "holdout_commitments", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_holdout_run(HoldoutRunRecord& r) {
  r.ran_at = now_iso8601();
  Stmt st = store_->db_.prepare(
      "INSERT INTO holdout_runs (commitment_id, candidate_id, status, result_json, report_sha256, "
      "retired, ran_at) VALUES (?,?,?,?,?,?,?)");
  st.bind(1, r.commitment_id).bind(2, r.candidate_id).bind(3, static_cast<int>(r.status));
  st.bind(4, json_text(r.result));
  bind_sha(st, 5, r.report_sha256);
  st.bind(6, r.retired ? 1 : 0).bind(7, r.ran_at).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "holdout_runs", r.id, LinkKind::kInsert);
  return r.id;
}

std::int64_t Store::Step::add_promotion(PromotionRecord& r) {
  r.decided_at = now_iso8601();
  Stmt st = store_->db_.prepare(
      "INSERT INTO promotion_decisions (session_id, candidate_id, decision, reason, "
      "evidence_json, decided_at) VALUES (?,?,?,?,?,?)");
  st.bind(1, r.session_id).bind(2, r.candidate_id).bind(3, static_cast<int>(r.decision));
  st.bind(4, r.reason).bind(5, json_text(r.evidence)).bind(6, r.decided_at).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "promotion_decisions", r.id, LinkKind::kInsert);
  return r.id;
}

void Store::Step::set_promotion_evidence(std::int64_t promotion_id,
                                         const nlohmann::json& evidence) {
  Stmt st = store_->db_.prepare("UPDATE promotion_decisions SET evidence_json = ? WHERE id = ?");
  st.bind(1, json_text(evidence)).bind(2, promotion_id).run();
  chain_row(store_->db_, "promotion_decisions", promotion_id, LinkKind::kUpdate);
}

std::int64_t Store::Step::add_receipt(ReceiptRecord& r) {
  r.signed_at = now_iso8601();
  Stmt st = store_->db_.prepare(
      "INSERT INTO receipts (session_id, payload_sha256, receipt_sha256, signing_key_id, "
      "reviewer, signed_at) VALUES (?,?,?,?,?,?)");
  st.bind(1, r.session_id).bind(2, r.payload_sha256).bind(3, r.receipt_sha256);
  st.bind(4, r.signing_key_id).bind(5, r.reviewer).bind(6, r.signed_at).run();
  r.id = store_->db_.last_insert_rowid();
  chain_row(store_->db_, "receipts", r.id, LinkKind::kInsert);
  return r.id;
}

} // namespace kloop::store
