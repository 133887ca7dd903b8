#include "store/schema.h"

#include <array>

#include <fmt/core.h>

#include "store/error.h"
#include "store/sqlite.h"

namespace kloop::store {
namespace {

// Migration 0 -> 1: the initial schema. Enum columns hold the values of records.h.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE blobs (sha256 TEXT PRIMARY KEY NOT NULL, size INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE sessions (
  id INTEGER PRIMARY KEY, operator TEXT NOT NULL, contract_version TEXT NOT NULL,
  contract_sha256 TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
  budget INTEGER NOT NULL, seed INTEGER NOT NULL, kloop_version TEXT NOT NULL,
  kloop_commit TEXT NOT NULL, toolkit_version TEXT NOT NULL, driver_version TEXT NOT NULL,
  device_name TEXT NOT NULL, device_uuid TEXT NOT NULL, device_arch TEXT NOT NULL,
  started_at TEXT NOT NULL, ended_at TEXT, status INTEGER NOT NULL, verdict INTEGER,
  params_json TEXT NOT NULL, owner_pid INTEGER NOT NULL, owner_host TEXT NOT NULL);
CREATE TABLE iterations (
  id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id), idx INTEGER NOT NULL,
  started_at TEXT NOT NULL, ended_at TEXT NOT NULL, wall_ms REAL NOT NULL, notes_json TEXT NOT NULL,
  UNIQUE(session_id, idx));
CREATE TABLE prompts (
  id INTEGER PRIMARY KEY, iteration_id INTEGER NOT NULL REFERENCES iterations(id),
  role TEXT NOT NULL, blob_sha256 TEXT NOT NULL REFERENCES blobs(sha256), tokens INTEGER);
CREATE TABLE responses (
  id INTEGER PRIMARY KEY, iteration_id INTEGER NOT NULL REFERENCES iterations(id),
  prompt_id INTEGER REFERENCES prompts(id), blob_sha256 TEXT REFERENCES blobs(sha256),
  provider TEXT NOT NULL, model TEXT NOT NULL, http_status INTEGER, latency_ms REAL NOT NULL,
  retries INTEGER NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER, error TEXT NOT NULL);
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY, iteration_id INTEGER NOT NULL REFERENCES iterations(id),
  ordinal INTEGER NOT NULL, source_sha256 TEXT REFERENCES blobs(sha256),
  manifest_sha256 TEXT REFERENCES blobs(sha256), verdict INTEGER NOT NULL, speedup REAL,
  speedup_lo REAL, speedup_hi REAL, report_json TEXT NOT NULL);
CREATE TABLE artifacts (
  id INTEGER PRIMARY KEY, iteration_id INTEGER NOT NULL REFERENCES iterations(id),
  candidate_id INTEGER REFERENCES candidates(id), kind INTEGER NOT NULL, name TEXT NOT NULL,
  sha256 TEXT NOT NULL REFERENCES blobs(sha256), size INTEGER NOT NULL);
CREATE TABLE tool_calls (
  id INTEGER PRIMARY KEY, iteration_id INTEGER NOT NULL REFERENCES iterations(id),
  candidate_id INTEGER REFERENCES candidates(id), tool TEXT NOT NULL, tool_version TEXT NOT NULL,
  argv_json TEXT NOT NULL, cwd TEXT NOT NULL, exit_code INTEGER, signal INTEGER,
  wall_ms REAL NOT NULL, user_ms REAL NOT NULL, sys_ms REAL NOT NULL, max_rss_kb INTEGER NOT NULL,
  stdout_sha256 TEXT REFERENCES blobs(sha256), stderr_sha256 TEXT REFERENCES blobs(sha256));
CREATE TABLE gate_results (
  id INTEGER PRIMARY KEY, candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  ordinal INTEGER NOT NULL, name TEXT NOT NULL, status INTEGER NOT NULL, reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL);
CREATE TABLE test_cases (
  id INTEGER PRIMARY KEY, candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  gate TEXT NOT NULL, name TEXT NOT NULL, status INTEGER NOT NULL, detail_json TEXT NOT NULL);
CREATE TABLE benchmark_samples (
  id INTEGER PRIMARY KEY, candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  series TEXT NOT NULL, samples_sha256 TEXT NOT NULL REFERENCES blobs(sha256),
  count INTEGER NOT NULL, median_us REAL, lo_us REAL, hi_us REAL);
CREATE TABLE telemetry (
  id INTEGER PRIMARY KEY, candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  kind TEXT NOT NULL, data_json TEXT NOT NULL);
CREATE TABLE holdout_commitments (
  id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id),
  commitment_sha256 TEXT NOT NULL, suite_version TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE holdout_runs (
  id INTEGER PRIMARY KEY, commitment_id INTEGER NOT NULL REFERENCES holdout_commitments(id),
  candidate_id INTEGER NOT NULL REFERENCES candidates(id), status INTEGER NOT NULL,
  result_json TEXT NOT NULL, report_sha256 TEXT REFERENCES blobs(sha256), retired INTEGER NOT NULL,
  ran_at TEXT NOT NULL);
CREATE TABLE promotion_decisions (
  id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id),
  candidate_id INTEGER REFERENCES candidates(id), decision INTEGER NOT NULL, reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL, decided_at TEXT NOT NULL);
CREATE TABLE receipts (
  id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id),
  payload_sha256 TEXT NOT NULL, receipt_sha256 TEXT NOT NULL REFERENCES blobs(sha256),
  signing_key_id TEXT NOT NULL, reviewer TEXT NOT NULL, signed_at TEXT NOT NULL);
CREATE INDEX iterations_session ON iterations(session_id);
CREATE INDEX candidates_iteration ON candidates(iteration_id);
CREATE INDEX gate_results_candidate ON gate_results(candidate_id);
CREATE INDEX test_cases_candidate ON test_cases(candidate_id);
CREATE INDEX artifacts_candidate ON artifacts(candidate_id);
)sql";

// Migration: tamper-evident rows (store/chain.h): each session's row_chain (link `seq` commits to
// link seq-1; row_id is the local rowid, renumbered by `kloop store merge` and not hashed), a
// random uid per session (its identity across stores; NULL for sessions recorded before), and
// session_origins: where `kloop store merge` took a session from.
constexpr std::string_view kRowChain = R"sql(
ALTER TABLE sessions ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX sessions_uid ON sessions(uid);
CREATE TABLE row_chain (
  session_id INTEGER NOT NULL REFERENCES sessions(id), seq INTEGER NOT NULL, tbl TEXT NOT NULL,
  row_id INTEGER NOT NULL, origin_seq INTEGER NOT NULL, kind TEXT NOT NULL,
  row_sha256 TEXT NOT NULL, link_sha256 TEXT NOT NULL, PRIMARY KEY (session_id, seq))
  WITHOUT ROWID;
CREATE INDEX row_chain_row ON row_chain(session_id, tbl, row_id);
CREATE TABLE session_origins (
  session_id INTEGER PRIMARY KEY REFERENCES sessions(id), origin_json TEXT NOT NULL,
  merged_at TEXT NOT NULL);
)sql";

constexpr std::array<std::string_view, 2> kMigrations = {kV1, kRowChain};

} // namespace

int schema_version() {
  return static_cast<int>(kMigrations.size());
}

namespace {

// What a database holds before migrating: its application_id, schema version and object count.
struct SchemaState {
  std::int64_t app_id = 0, version = 0, tables = 0;
};

// The three values come from one snapshot: read one by one, a store that another process is
// creating at that moment could show its tables but not yet its application_id ("not a kloop
// store").
SchemaState read_state(Db& db) {
  ReadSnapshot snapshot(db);
  SchemaState s;
  s.app_id = db.pragma_int("application_id");
  s.version = db.pragma_int("user_version");
  Stmt st = db.prepare("SELECT count(*) FROM sqlite_master");
  if (st.step()) s.tables = st.int64(0);
  return s;
}

// Throws StoreError unless `s` is a kloop store this binary can read (or an empty database).
void check_state(const Db& db, const SchemaState& s) {
  if (s.app_id != kApplicationId && (s.app_id != 0 || s.version != 0 || s.tables != 0))
    throw StoreError(fmt::format(
        "store: {} is a SQLite database but not a kloop store (application_id {:#x}, {} schema "
        "objects); use another --store",
        db.label(), s.app_id, s.tables));
  if (s.version > schema_version())
    throw StoreError(fmt::format(
        "store: schema version {} is newer than this kloop ({}); upgrade kloop or use another "
        "--store",
        s.version, schema_version()));
}

} // namespace

void migrate(Db& db, bool writable) {
  SchemaState state = read_state(db);
  check_state(db, state);
  if (state.version == schema_version()) return;
  if (!writable && state.version == 0 && state.tables == 0)
    throw StoreError(
        fmt::format("store: {} is an empty database (no kloop tables, e.g. a zero-byte "
                    "file): nothing is stored there yet; point --store at a store "
                    "that `kloop optimize` wrote, or remove the empty file",
                    db.label()));
  // A store of an older schema is read as it is: every reader works on the oldest layout (row
  // chains and session uids are absent there, and reported so), and a read never changes it.
  if (!writable) return;
  // All pending migrations in one write transaction (BEGIN IMMEDIATE), and the version read again
  // inside it: another process creating or migrating the same store at the same moment either
  // finished first (nothing left to do here) or waits for this one (busy_timeout), so no process
  // ever runs a migration that is already applied ("table ... already exists").
  Transaction txn(db);
  state = read_state(db);
  check_state(db, state);
  for (; state.version < schema_version(); ++state.version)
    db.exec(kMigrations[static_cast<std::size_t>(state.version)]);
  db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
  db.exec(fmt::format("PRAGMA user_version = {}", state.version));
  txn.commit();
}

} // namespace kloop::store
