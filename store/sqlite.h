// Thin RAII layer over the SQLite C API: a connection (Db), a prepared statement (Stmt) and a
// transaction (Transaction) that rolls back unless committed. Move-only; every error becomes a
// StoreError carrying SQLite's message and the failing SQL. Used only inside store/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kloop::store {

class Stmt;

// How long a statement waits for another process's lock on the store before it fails with
// StoreBusy (SQLite's busy_timeout, ms). A step holds the write lock while it writes and syncs its
// blobs; on a loaded machine with a slow disk (CI, a shared sweep node) that has taken over 5 s.
inline constexpr int kBusyTimeoutMs = 30000;

// One SQLite connection. Opening never touches the schema; see Store::open for that.
class Db {
public:
  // Opens `uri` (a file: URI) with sqlite3_open_v2 flags; throws StoreError naming `label`.
  Db(const std::string& uri, int flags, const std::string& label);
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  void exec(std::string_view sql); // runs one or more statements; throws StoreError
  Stmt prepare(std::string_view sql);
  std::int64_t last_insert_rowid() const;
  std::int64_t pragma_int(std::string_view name); // "PRAGMA name" as an integer
  const std::string& label() const { return label_; }
  sqlite3* handle() const { return db_; }
  [[noreturn]] void fail(int rc, std::string_view what) const; // throws StoreError

private:
  sqlite3* db_ = nullptr;
  std::string label_;
};

// One prepared statement. Bind indexes start at 1 (SQLite's convention).
class Stmt {
public:
  Stmt(Db& db, sqlite3_stmt* stmt, std::string sql) : db_(&db), stmt_(stmt), sql_(std::move(sql)) {}
  Stmt(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  Stmt& bind(int i, std::int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind_null(int i);
  template <class T> Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  bool step();           // true while a row is available; throws StoreError on error
  void run() { step(); } // for statements without results

  bool is_null(int col) const;
  std::int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::optional<std::int64_t> opt_int64(int col) const;
  std::optional<double> opt_real(int col) const;
  std::optional<std::string> opt_text(int col) const;
  // Generic access (row hashing and store merge): result columns, a column's name and storage
  // class (SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL), its raw bytes.
  int column_count() const;
  std::string column_name(int col) const;
  int type(int col) const;
  std::string bytes(int col) const; // text or blob bytes as stored
  // Binds parameter i to column `col` of `from`'s current row, keeping its storage class.
  Stmt& bind_column(int i, const Stmt& from, int col);

private:
  Db* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK in the destructor unless commit() ran.
class Transaction {
public:
  explicit Transaction(Db& db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit(); // throws StoreError (the transaction is rolled back then)
  bool committed() const { return done_; }

private:
  Db* db_;
  bool done_ = false;
};

// BEGIN (deferred) on construction, COMMIT in the destructor: every read between them sees one
// snapshot of the database, so a value and the count read after it cannot straddle another
// process's commit. Inside a transaction already open it does nothing (that one is the snapshot).
// Only for reads; a failed BEGIN throws StoreError.
class ReadSnapshot {
public:
  explicit ReadSnapshot(Db& db);
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  ~ReadSnapshot();

private:
  Db* db_;
  bool owns_; // false inside a transaction that the caller opened
};

} // namespace kloop::store
