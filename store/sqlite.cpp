#include "store/sqlite.h"

#include <sqlite3.h>

#include <filesystem>

#include <fmt/core.h>

#include "store/error.h"
#include "store/text_view.h"

namespace kloop::store {

Db::Db(const std::string& uri, int flags, const std::string& label) : label_(label) {
  const int rc = sqlite3_open_v2(uri.c_str(), &db_, flags | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw StoreError(fmt::format("store: cannot open {} ({}); check the path and permissions, "
                                 "or use another --store",
                                 label_, msg));
  }
  sqlite3_extended_result_codes(db_, 1);
}

Db::Db(Db&& other) noexcept : db_(other.db_), label_(std::move(other.label_)) {
  other.db_ = nullptr;
}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = other.db_;
    label_ = std::move(other.label_);
    other.db_ = nullptr;
  }
  return *this;
}

Db::~Db() {
  sqlite3_close_v2(db_);
}

void Db::fail(int rc, std::string_view what) const {
  const int primary = rc & 0xFF;
  // label_ is the database file, DIR/kloop.db.
  const std::string dir = std::filesystem::path(label_).parent_path().string();
  std::string hint =
      fmt::format("check the store, or run `{}`", kloop_command("store verify", dir));
  if (primary == SQLITE_FULL || (rc == SQLITE_IOERR_WRITE) || rc == SQLITE_IOERR_FSYNC)
    hint = "the disk (or file-size limit) is full: free space and retry; committed steps are kept";
  else if (primary == SQLITE_READONLY)
    hint = "the store is read-only: use a writable --store";
  else if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT)
    hint = "the database file is corrupt: restore it from a backup or use another --store";
  else if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    hint = "another kloop holds the store: wait for it or use another --store";
  const std::string message =
      fmt::format("store: {}: {} failed: {} (sqlite code {}); {}", label_, what,
                  db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc), rc, hint);
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw StoreBusy(message);
  throw StoreError(message);
}

void Db::exec(std::string_view sql) {
  char* err = nullptr;
  const std::string s(sql);
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc, s.substr(0, 60));
}

Stmt Db::prepare(std::string_view sql) {
  sqlite3_stmt* st = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) fail(rc, fmt::format("prepare `{}`", sql.substr(0, 60)));
  return Stmt(*this, st, std::string(sql));
}

std::int64_t Db::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Db::pragma_int(std::string_view name) {
  Stmt st = prepare(fmt::format("PRAGMA {}", name));
  return st.step() ? st.int64(0) : 0;
}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}

Stmt::~Stmt() {
  sqlite3_finalize(stmt_);
}

Stmt& Stmt::bind(int i, std::int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  const int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view v) {
  const int rc = sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  const int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc, fmt::format("`{}`", sql_.substr(0, 60)));
}

bool Stmt::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
std::int64_t Stmt::int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double Stmt::real(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string Stmt::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

std::optional<std::int64_t> Stmt::opt_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return int64(col);
}
std::optional<double> Stmt::opt_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return real(col);
}
std::optional<std::string> Stmt::opt_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}

int Stmt::column_count() const {
  return sqlite3_column_count(stmt_);
}
std::string Stmt::column_name(int col) const {
  const char* n = sqlite3_column_name(stmt_, col);
  return n ? n : "";
}
int Stmt::type(int col) const {
  return sqlite3_column_type(stmt_, col);
}
std::string Stmt::bytes(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}
Stmt& Stmt::bind_column(int i, const Stmt& from, int col) {
  const int rc = sqlite3_bind_value(stmt_, i, sqlite3_column_value(from.stmt_, col));
  if (rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}

Transaction::Transaction(Db& db) : db_(&db) {
  db_->exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_ && sqlite3_get_autocommit(db_->handle()) == 0)
    sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_->exec("COMMIT");
  done_ = true;
}

ReadSnapshot::ReadSnapshot(Db& db) : db_(&db), owns_(sqlite3_get_autocommit(db.handle()) != 0) {
  if (owns_) db_->exec("BEGIN");
}

ReadSnapshot::~ReadSnapshot() {
  if (owns_ && sqlite3_get_autocommit(db_->handle()) == 0)
    sqlite3_exec(db_->handle(), "COMMIT", nullptr, nullptr, nullptr);
}

} // namespace kloop::store
