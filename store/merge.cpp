// `kloop store merge OUT STORE...`: Store::merge_from (store/store.h).
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "store/chain.h"
#include "store/error.h"
#include "store/schema.h"
#include "store/store.h"

namespace kloop::store {
namespace fs = std::filesystem;
namespace {

// The source database, read-only and never migrated (a store of an older schema merges as it is).
Db open_source(const std::string& dir) {
  const std::string db_path = dir + "/kloop.db";
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !fs::exists(db_path, ec))
    throw NoSuchStore(fmt::format("store merge: {} is not a kloop store (no kloop.db); give the "
                                  "store directory of a task (e.g. SWEEP/tasks/ID/attempt-1/store)",
                                  dir));
  std::string uri = "file:" + db_path + "?mode=ro";
  if (::access(dir.c_str(), W_OK) != 0) uri = "file:" + db_path + "?immutable=1";
  Db db(uri, SQLITE_OPEN_READONLY, db_path);
  db.exec(fmt::format("PRAGMA busy_timeout = {}", kBusyTimeoutMs));
  const std::int64_t app = db.pragma_int("application_id");
  const std::int64_t version = db.pragma_int("user_version");
  if (app != kApplicationId || version < 1)
    throw StoreError(fmt::format("store merge: {} is not a kloop store (application_id {:#x}, "
                                 "schema version {}); nothing merged from it",
                                 db_path, app, version));
  if (version > schema_version())
    throw StoreError(fmt::format("store merge: {} has schema version {}, newer than this kloop "
                                 "({}); merge it with the kloop that wrote it",
                                 db_path, version, schema_version()));
  return db;
}

std::set<std::string> columns(Db& db, std::string_view table) {
  std::set<std::string> out;
  Stmt st = db.prepare(fmt::format("SELECT name FROM pragma_table_info('{}')", table));
  while (st.step())
    out.insert(st.text(0));
  return out;
}

// Every source column must exist here; a store of an older schema has fewer columns.
void check_layout(Db& src, Db& dst, const std::string& label) {
  std::vector<std::string_view> tables = chained_tables();
  tables.push_back("blobs");
  for (std::string_view t : tables) {
    const auto here = columns(dst, t);
    for (const auto& c : columns(src, t))
      if (!here.count(c))
        throw StoreError(fmt::format("store merge: {} has column {}.{} that this kloop's schema "
                                     "does not know (an incompatible schema); nothing merged",
                                     label, t, c));
  }
}

// Source rows of `table` that belong to session `session`, as `SELECT x.* ...`.
std::string rows_sql(std::string_view table) {
  // The same membership as the chain (store/chain.cpp), spelled out for the copy.
  static const std::map<std::string_view, std::string_view> from = {
      {"sessions", "sessions x WHERE x.id = ?"},
      {"iterations", "iterations x WHERE x.session_id = ?"},
      {"holdout_commitments", "holdout_commitments x WHERE x.session_id = ?"},
      {"promotion_decisions", "promotion_decisions x WHERE x.session_id = ?"},
      {"receipts", "receipts x WHERE x.session_id = ?"},
      {"holdout_runs", "holdout_runs x JOIN holdout_commitments h ON x.commitment_id = h.id "
                       "WHERE h.session_id = ?"},
  };
  if (const auto it = from.find(table); it != from.end())
    return fmt::format("SELECT x.* FROM {} ORDER BY x.id", it->second);
  const bool via_candidate = table == "gate_results" || table == "test_cases" ||
                             table == "benchmark_samples" || table == "telemetry";
  if (via_candidate)
    return fmt::format("SELECT x.* FROM {} x JOIN candidates c ON x.candidate_id = c.id JOIN "
                       "iterations i ON c.iteration_id = i.id WHERE i.session_id = ? ORDER BY x.id",
                       table);
  return fmt::format("SELECT x.* FROM {} x JOIN iterations i ON x.iteration_id = i.id WHERE "
                     "i.session_id = ? ORDER BY x.id",
                     table);
}

// Foreign-key column -> referenced table (session_id is mapped separately).
std::string_view fk_table(std::string_view column) {
  static const std::map<std::string_view, std::string_view> fk = {
      {"iteration_id", "iterations"},
      {"prompt_id", "prompts"},
      {"candidate_id", "candidates"},
      {"commitment_id", "holdout_commitments"}};
  const auto it = fk.find(column);
  return it == fk.end() ? std::string_view() : it->second;
}

using IdMap = std::map<std::pair<std::string, std::int64_t>, std::int64_t>;

// Copies one session's rows of every table, then its chain links; returns the new session id.
std::int64_t copy_session(Db& src, Db& dst, std::int64_t sid, IdMap& ids) {
  std::int64_t new_sid = 0;
  for (std::string_view table : chained_tables()) {
    Stmt rows = src.prepare(rows_sql(table));
    rows.bind(1, sid);
    std::string insert_sql;
    std::vector<int> src_cols; // source column index per insert parameter
    while (rows.step()) {
      if (insert_sql.empty()) {
        std::string names, marks;
        for (int c = 0; c < rows.column_count(); ++c) {
          if (rows.column_name(c) == "id") continue;
          names += (names.empty() ? "" : ", ") + rows.column_name(c);
          marks += marks.empty() ? "?" : ",?";
          src_cols.push_back(c);
        }
        insert_sql = fmt::format("INSERT INTO {} ({}) VALUES ({})", table, names, marks);
      }
      Stmt ins = dst.prepare(insert_sql);
      std::int64_t old_id = 0;
      for (int c = 0; c < rows.column_count(); ++c)
        if (rows.column_name(c) == "id") old_id = rows.int64(c);
      for (std::size_t p = 0; p < src_cols.size(); ++p) {
        const int c = src_cols[p];
        const int param = static_cast<int>(p + 1);
        const std::string name = rows.column_name(c);
        const std::string_view ref = fk_table(name);
        if (name == "session_id") {
          ins.bind(param, new_sid);
        } else if (!ref.empty() && !rows.is_null(c)) {
          const auto it = ids.find({std::string(ref), rows.int64(c)});
          if (it == ids.end())
            throw DamagedStore(fmt::format("store merge: {} row {} names {} {} of another "
                                           "session or none; nothing merged",
                                           table, old_id, ref, rows.int64(c)));
          ins.bind(param, it->second);
        } else {
          ins.bind_column(param, rows, c);
        }
      }
      ins.run();
      const std::int64_t new_id = dst.last_insert_rowid();
      ids[{std::string(table), old_id}] = new_id;
      if (table == "sessions") new_sid = new_id;
    }
  }
  if (has_row_chain(src)) {
    Stmt links = src.prepare("SELECT seq, tbl, row_id, origin_seq, kind, row_sha256, link_sha256 "
                             "FROM row_chain WHERE session_id = ? ORDER BY seq");
    links.bind(1, sid);
    while (links.step()) {
      const auto it = ids.find({links.text(1), links.int64(2)});
      if (it == ids.end())
        throw DamagedStore(fmt::format("store merge: chain link {} of source session {} names {} "
                                       "row {}, which is not there; run `kloop store verify`",
                                       links.int64(0), sid, links.text(1), links.int64(2)));
      Stmt ins = dst.prepare("INSERT INTO row_chain (session_id, seq, tbl, row_id, origin_seq, "
                             "kind, row_sha256, link_sha256) VALUES (?,?,?,?,?,?,?,?)");
      ins.bind(1, new_sid).bind(2, links.int64(0)).bind(3, links.text(1)).bind(4, it->second);
      ins.bind(5, links.int64(3)).bind(6, links.text(4)).bind(7, links.text(5));
      ins.bind(8, links.text(6)).run();
    }
  }
  return new_sid;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The sealed (or retired) holdout file of source session `sid`, checked against the session's
// recorded commitments; "" path when the session has none.
fs::path holdout_file(Db& src, const std::string& dir, std::int64_t sid) {
  for (const char* ext : {".sealed", ".retired"}) {
    const fs::path p = fs::path(dir) / "holdout" / fmt::format("session-{}{}", sid, ext);
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    const auto body = nlohmann::json::parse(read_all(p), nullptr, false);
    const std::string commitment =
        body.is_object() ? body.value("commitment", std::string()) : std::string();
    Stmt st = src.prepare(
        "SELECT 1 FROM holdout_commitments WHERE session_id = ? AND commitment_sha256 = ?");
    st.bind(1, sid).bind(2, commitment);
    if (!st.step())
      throw DamagedStore(fmt::format("store merge: holdout suite {} does not hold a commitment "
                                     "that session {} recorded; nothing merged",
                                     p.string(), sid));
    return p;
  }
  return {};
}

} // namespace

MergeReport Store::merge_from(const std::string& source_dir) {
  MergeReport rep;
  std::error_code ec;
  rep.source = fs::weakly_canonical(source_dir, ec).string();
  if (rep.source == fs::weakly_canonical(dir_, ec).string())
    throw StoreError(
        fmt::format("store merge: {} is the output store itself; give other stores", source_dir));
  Db src = open_source(source_dir);
  check_layout(src, db_, src.label());
  BlobStore src_blobs(source_dir + "/blobs");
  std::vector<std::pair<std::string, std::int64_t>> blob_rows; // (sha256, size)
  {
    Stmt st = src.prepare("SELECT sha256, size FROM blobs ORDER BY sha256");
    while (st.step())
      blob_rows.emplace_back(st.text(0), st.int64(1));
  }
  for (const auto& [sha, size] : blob_rows)
    if (src_blobs.check(sha) != BlobState::kOk)
      throw DamagedStore(fmt::format("store merge: blob {} of {} is missing or altered; nothing "
                                     "merged from it (run `kloop store verify --store {}`)",
                                     sha, source_dir, source_dir));
  if (const ChainReport chains = verify_chains(src, src_blobs); !chains.ok())
    throw DamagedStore(fmt::format("store merge: {} fails its row-chain check ({}{}); nothing "
                                   "merged from it (run `kloop store verify --store {}`)",
                                   source_dir, chains.problems.front(),
                                   chains.problems.size() > 1 ? ", ..." : "", source_dir));
  // Sessions here, by identity.
  std::map<std::string, std::int64_t> here;
  {
    Stmt st = db_.prepare("SELECT id FROM sessions");
    std::vector<std::int64_t> ids;
    while (st.step())
      ids.push_back(st.int64(0));
    for (std::int64_t id : ids)
      here[session_uid(db_, id)] = id;
  }
  std::vector<std::int64_t> todo;
  {
    Stmt st = src.prepare("SELECT id, status FROM sessions ORDER BY id");
    std::vector<std::pair<std::int64_t, int>> all;
    while (st.step())
      all.emplace_back(st.int64(0), static_cast<int>(st.int64(1)));
    for (const auto& [id, status] : all) {
      const std::string uid = session_uid(src, id);
      if (const auto it = here.find(uid); it != here.end()) {
        std::string line = fmt::format("session {}: already here as session {}", id, it->second);
        const auto a = store::chain_head(src, id), b = store::chain_head(db_, it->second);
        if (a && b && a->sha256 != b->sha256)
          line += fmt::format(" (the source has {} chain links now, this copy {}: it changed "
                              "after the first merge; merge it into a new store to take the "
                              "newer record)",
                              a->links, b->links);
        rep.skipped.push_back(line);
      } else if (status == static_cast<int>(SessionStatus::kRunning)) {
        rep.skipped.push_back(
            fmt::format("session {}: still running; merge again when it has ended", id));
      } else {
        todo.push_back(id);
      }
    }
  }
  Transaction txn(db_);
  for (const auto& [sha, size] : blob_rows) {
    if (blobs_.check(sha) == BlobState::kOk) {
      ++rep.blobs_present;
    } else {
      if (blobs_.put(src_blobs.get(sha)) != sha)
        throw DamagedStore(fmt::format("store merge: blob {} changed while it was copied", sha));
      ++rep.blobs_copied;
    }
    Stmt st = db_.prepare("INSERT OR IGNORE INTO blobs (sha256, size) VALUES (?, ?)");
    st.bind(1, sha).bind(2, size).run();
  }
  // Holdout files go under temporary names first and take their final names after the commit,
  // so a failed merge leaves no suite under a session id that does not exist.
  std::vector<std::pair<fs::path, fs::path>> renames;
  const auto cleanup = [&] {
    for (const auto& [tmp, final_path] : renames)
      fs::remove(tmp, ec);
  };
  try {
    for (std::int64_t sid : todo) {
      IdMap ids;
      const std::int64_t new_sid = copy_session(src, db_, sid, ids);
      nlohmann::json origin = {
          {"store", rep.source}, {"session_id", sid}, {"uid", session_uid(src, sid)}};
      if (const auto head = store::chain_head(src, sid))
        origin["chain_head"] = {{"links", head->links}, {"sha256", head->sha256}};
      if (columns(src, "session_origins").count("origin_json")) {
        Stmt o = src.prepare("SELECT origin_json FROM session_origins WHERE session_id = ?");
        o.bind(1, sid);
        if (o.step()) origin["merged_from"] = nlohmann::json::parse(o.text(0), nullptr, false);
      }
      Stmt ins = db_.prepare(
          "INSERT INTO session_origins (session_id, origin_json, merged_at) VALUES (?,?,?)");
      ins.bind(1, new_sid).bind(2, origin.dump()).bind(3, now_iso8601()).run();
      if (const fs::path h = holdout_file(src, source_dir, sid); !h.empty()) {
        const fs::path dir = fs::path(dir_) / "holdout";
        fs::create_directories(dir);
        fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
        const fs::path final_path =
            dir / fmt::format("session-{}{}", new_sid, h.extension().string());
        if (fs::exists(final_path))
          throw StoreError(fmt::format("store merge: {} exists already; this store's holdout "
                                       "folder holds a suite of no session",
                                       final_path.string()));
        const fs::path tmp = final_path.string() + ".merge-tmp";
        const mode_t old = ::umask(077);
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        ::umask(old);
        if (!(out << read_all(h)) || !out.flush())
          throw StoreError(fmt::format("store merge: cannot write {}", tmp.string()));
        renames.emplace_back(tmp, final_path);
      }
      rep.merged.emplace_back(sid, new_sid);
    }
    txn.commit();
  } catch (...) {
    cleanup();
    throw;
  }
  for (const auto& [tmp, final_path] : renames) {
    fs::rename(tmp, final_path);
    ++rep.holdout_files;
  }
  return rep;
}

} // namespace kloop::store
