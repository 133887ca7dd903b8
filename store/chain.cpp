// Row chain: hashing rows, appending links, checking every session's chain (store/chain.h).
#include "store/chain.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "store/blobs.h"
#include "store/error.h"
#include "store/hash.h"
#include "store/sqlite.h"

namespace kloop::store {
namespace {

// One chained table: how its rows find their session, which columns are foreign keys to other
// chained rows (hashed as chain positions), and which columns the hash leaves out.
struct TableDef {
  std::string_view name;
  std::string_view from;    // FROM clause with the table aliased as x
  std::string_view session; // expression giving the session id over `from`
  std::vector<std::pair<std::string_view, std::string_view>> fks; // column -> table
  std::vector<std::string_view> skip;                             // besides id
};

const std::vector<TableDef>& defs() {
  static const std::vector<TableDef> d = {
      {"sessions", "sessions x", "x.id", {}, {"owner_pid", "owner_host"}},
      {"iterations", "iterations x", "x.session_id", {}, {"session_id"}},
      {"prompts",
       "prompts x JOIN iterations i ON x.iteration_id = i.id",
       "i.session_id",
       {{"iteration_id", "iterations"}},
       {}},
      {"responses",
       "responses x JOIN iterations i ON x.iteration_id = i.id",
       "i.session_id",
       {{"iteration_id", "iterations"}, {"prompt_id", "prompts"}},
       {}},
      {"candidates",
       "candidates x JOIN iterations i ON x.iteration_id = i.id",
       "i.session_id",
       {{"iteration_id", "iterations"}},
       {}},
      {"artifacts",
       "artifacts x JOIN iterations i ON x.iteration_id = i.id",
       "i.session_id",
       {{"iteration_id", "iterations"}, {"candidate_id", "candidates"}},
       {}},
      {"tool_calls",
       "tool_calls x JOIN iterations i ON x.iteration_id = i.id",
       "i.session_id",
       {{"iteration_id", "iterations"}, {"candidate_id", "candidates"}},
       {}},
      {"gate_results",
       "gate_results x JOIN candidates c ON x.candidate_id = c.id JOIN iterations i ON "
       "c.iteration_id = i.id",
       "i.session_id",
       {{"candidate_id", "candidates"}},
       {}},
      {"test_cases",
       "test_cases x JOIN candidates c ON x.candidate_id = c.id JOIN iterations i ON "
       "c.iteration_id = i.id",
       "i.session_id",
       {{"candidate_id", "candidates"}},
       {}},
      {"benchmark_samples",
       "benchmark_samples x JOIN candidates c ON x.candidate_id = c.id JOIN iterations i ON "
       "c.iteration_id = i.id",
       "i.session_id",
       {{"candidate_id", "candidates"}},
       {}},
      {"telemetry",
       "telemetry x JOIN candidates c ON x.candidate_id = c.id JOIN iterations i ON "
       "c.iteration_id = i.id",
       "i.session_id",
       {{"candidate_id", "candidates"}},
       {}},
      {"holdout_commitments", "holdout_commitments x", "x.session_id", {}, {"session_id"}},
      {"holdout_runs",
       "holdout_runs x JOIN holdout_commitments h ON x.commitment_id = h.id",
       "h.session_id",
       {{"commitment_id", "holdout_commitments"}, {"candidate_id", "candidates"}},
       {}},
      {"promotion_decisions",
       "promotion_decisions x",
       "x.session_id",
       {{"candidate_id", "candidates"}},
       {"session_id"}},
      {"receipts", "receipts x", "x.session_id", {}, {"session_id"}},
  };
  return d;
}

const TableDef& def_of(std::string_view table) {
  for (const auto& d : defs())
    if (d.name == table) return d;
  throw StoreError(fmt::format("store: table `{}` is not a chained session table", table));
}

std::optional<std::int64_t> session_of(Db& db, const TableDef& d, std::int64_t rowid) {
  Stmt st = db.prepare(fmt::format("SELECT {} FROM {} WHERE x.id = ?", d.session, d.from));
  st.bind(1, rowid);
  if (!st.step() || st.is_null(0)) return std::nullopt;
  return st.int64(0);
}

// The chain position (origin_seq) of row `rowid` of `table` in session `session`, if chained.
std::optional<std::int64_t> origin_of(Db& db, std::int64_t session, std::string_view table,
                                      std::int64_t rowid) {
  Stmt st = db.prepare("SELECT origin_seq FROM row_chain WHERE session_id = ? AND tbl = ? AND "
                       "row_id = ? ORDER BY seq LIMIT 1");
  st.bind(1, session).bind(2, table).bind(3, rowid);
  if (!st.step()) return std::nullopt;
  return st.int64(0);
}

std::string link_sha256(const std::string& prev, std::int64_t seq, std::string_view table,
                        std::int64_t origin_seq, LinkKind kind, const std::string& row_sha) {
  return sha256_hex(fmt::format("kloop-row-chain/1\n{}\n{}\n{}\n{}\n{}\n{}", prev, seq, table,
                                origin_seq, kind == LinkKind::kInsert ? "insert" : "update",
                                row_sha));
}

std::string_view kind_name(LinkKind k) {
  return k == LinkKind::kInsert ? "insert" : "update";
}

} // namespace

const std::vector<std::string_view>& chained_tables() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n;
    for (const auto& d : defs())
      n.push_back(d.name);
    return n;
  }();
  return names;
}

bool is_chained_table(std::string_view table) {
  const auto& t = chained_tables();
  return std::find(t.begin(), t.end(), table) != t.end();
}

bool has_row_chain(Db& db) {
  Stmt st = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'row_chain'");
  return st.step();
}

std::string row_sha256(Db& db, std::string_view table, std::int64_t rowid,
                       std::int64_t session_id) {
  const TableDef& d = def_of(table);
  Stmt st = db.prepare(fmt::format("SELECT * FROM {} WHERE id = ?", d.name));
  st.bind(1, rowid);
  if (!st.step()) return "";
  // Sorted by column name; each value tagged with its storage class and length, so no two rows
  // encode alike (text is hashed as bytes, valid UTF-8 or not).
  std::map<std::string, std::string> cols;
  for (int c = 0; c < st.column_count(); ++c) {
    const std::string name = st.column_name(c);
    if (name == "id" || st.type(c) == SQLITE_NULL) continue;
    if (std::find(d.skip.begin(), d.skip.end(), name) != d.skip.end()) continue;
    std::string value;
    const auto fk =
        std::find_if(d.fks.begin(), d.fks.end(), [&](const auto& f) { return f.first == name; });
    if (fk != d.fks.end()) {
      const auto origin = origin_of(db, session_id, fk->second, st.int64(c));
      value = origin ? fmt::format("@{}", *origin) : fmt::format("#{}", st.int64(c));
      cols[name] = fmt::format("k{}:{}", value.size(), value);
      continue;
    }
    switch (st.type(c)) {
    case SQLITE_INTEGER:
      value = fmt::format("i{}", st.int64(c));
      break;
    case SQLITE_FLOAT:
      value = fmt::format("r{:.17g}", st.real(c));
      break;
    case SQLITE_TEXT:
      value = "t" + st.bytes(c);
      break;
    default:
      value = "b" + st.bytes(c);
    }
    cols[name] = fmt::format("{}:{}", value.size(), value);
  }
  std::string enc = fmt::format("{}\n", d.name);
  for (const auto& [k, v] : cols)
    enc += k + "\x1f" + v + "\x1e";
  return sha256_hex(enc);
}

void chain_row(Db& db, std::string_view table, std::int64_t rowid, LinkKind kind) {
  if (!has_row_chain(db)) return;
  const TableDef& d = def_of(table);
  const auto session = session_of(db, d, rowid);
  if (!session)
    throw StoreError(
        fmt::format("store: cannot chain row {} of {}: it belongs to no session", rowid, table));
  std::int64_t seq = 1;
  std::string prev;
  {
    Stmt last = db.prepare(
        "SELECT seq, link_sha256 FROM row_chain WHERE session_id = ? ORDER BY seq DESC LIMIT 1");
    last.bind(1, *session);
    if (last.step()) {
      seq = last.int64(0) + 1;
      prev = last.text(1);
    }
  }
  // An update keeps the row's chain position; a row first seen by an update (written before
  // chaining) takes this one.
  const std::int64_t origin =
      kind == LinkKind::kUpdate ? origin_of(db, *session, table, rowid).value_or(seq) : seq;
  const std::string row = row_sha256(db, table, rowid, *session);
  Stmt ins = db.prepare("INSERT INTO row_chain (session_id, seq, tbl, row_id, origin_seq, kind, "
                        "row_sha256, link_sha256) VALUES (?,?,?,?,?,?,?,?)");
  ins.bind(1, *session).bind(2, seq).bind(3, table).bind(4, rowid).bind(5, origin);
  ins.bind(6, kind_name(kind))
      .bind(7, row)
      .bind(8, link_sha256(prev, seq, table, origin, kind, row));
  ins.run();
}

std::optional<ChainHead> chain_head(Db& db, std::int64_t session_id) {
  if (!has_row_chain(db)) return std::nullopt;
  Stmt st = db.prepare(
      "SELECT seq, link_sha256 FROM row_chain WHERE session_id = ? ORDER BY seq DESC LIMIT 1");
  st.bind(1, session_id);
  if (!st.step()) return std::nullopt;
  return ChainHead{st.int64(0), st.text(1)};
}

std::string session_uid(Db& db, std::int64_t session_id) {
  bool has_uid = false;
  {
    Stmt cols = db.prepare("SELECT 1 FROM pragma_table_info('sessions') WHERE name = 'uid'");
    has_uid = cols.step();
  }
  if (has_uid) {
    Stmt st = db.prepare("SELECT uid FROM sessions WHERE id = ?");
    st.bind(1, session_id);
    if (st.step() && !st.is_null(0)) return st.text(0);
  }
  Stmt st = db.prepare("SELECT operator, contract_version, contract_sha256, provider, model, "
                       "budget, seed, kloop_version, kloop_commit, started_at FROM sessions WHERE "
                       "id = ?");
  st.bind(1, session_id);
  if (!st.step()) throw NoSuchSession(fmt::format("store: no session {}", session_id));
  nlohmann::json j = nlohmann::json::array();
  for (int c = 0; c < 10; ++c)
    j.push_back(st.type(c) == SQLITE_INTEGER ? nlohmann::json(st.int64(c))
                                             : nlohmann::json(st.text(c)));
  return "legacy-" +
         sha256_hex(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)).substr(0, 32);
}

namespace {

struct Link {
  std::int64_t seq = 0, row_id = 0, origin = 0;
  std::string table, kind, row_sha, link_sha;
};

// The receipts of `session` whose payload records a chain head the chain does not contain.
void check_receipts(Db& db, const BlobStore& blobs, std::int64_t session,
                    const std::vector<Link>& links, std::vector<std::string>& problems) {
  Stmt st = db.prepare("SELECT id, receipt_sha256 FROM receipts WHERE session_id = ?");
  st.bind(1, session);
  while (st.step()) {
    const std::string sha = st.text(1);
    if (blobs.check(sha) != BlobState::kOk) continue; // reported by the blob check
    const auto receipt = nlohmann::json::parse(blobs.get(sha), nullptr, false);
    const auto head = receipt.is_object()
                          ? receipt.value("/payload/row_chain"_json_pointer, nlohmann::json())
                          : nlohmann::json();
    if (!head.is_object()) continue; // a receipt of an unchained session (says so itself)
    const auto n = head.value("links", std::int64_t{0});
    const auto h = head.value("head_sha256", std::string());
    if (n < 1 || n > static_cast<std::int64_t>(links.size()) ||
        links[static_cast<std::size_t>(n - 1)].link_sha != h)
      problems.push_back(fmt::format(
          "session {}: receipt {} was signed over chain head {} (link {}), which the chain no "
          "longer contains: rows or links were rewritten after signing",
          session, st.int64(0), h, n));
  }
}

enum class ChainState { kUnchained, kFull, kPartial, kBroken };

// Checks one session's links and rows, adding findings to `rep`.
ChainState check_session(Db& db, const BlobStore& blobs, std::int64_t session, ChainReport& rep) {
  std::vector<Link> links;
  {
    Stmt st = db.prepare("SELECT seq, tbl, row_id, origin_seq, kind, row_sha256, link_sha256 "
                         "FROM row_chain WHERE session_id = ? ORDER BY seq");
    st.bind(1, session);
    while (st.step())
      links.push_back(
          {st.int64(0), st.int64(2), st.int64(3), st.text(1), st.text(4), st.text(5), st.text(6)});
  }
  if (links.empty()) {
    rep.unchained.push_back(session);
    return ChainState::kUnchained;
  }
  rep.links += static_cast<std::int64_t>(links.size());
  std::string prev;
  std::map<std::pair<std::string, std::int64_t>, const Link*> latest; // (table, origin) -> link
  for (std::size_t k = 0; k < links.size(); ++k) {
    const Link& l = links[k];
    const LinkKind kind = l.kind == "insert" ? LinkKind::kInsert : LinkKind::kUpdate;
    if (l.seq != static_cast<std::int64_t>(k + 1) || !is_chained_table(l.table) ||
        (l.kind != "insert" && l.kind != "update") ||
        link_sha256(prev, l.seq, l.table, l.origin, kind, l.row_sha) != l.link_sha) {
      rep.problems.push_back(fmt::format(
          "session {}: chain link {} ({} row {}) does not hash to its recorded value: the chain "
          "was edited at or before this link",
          session, k + 1, l.table, l.row_id));
      return ChainState::kBroken;
    }
    prev = l.link_sha;
    latest[{l.table, l.origin}] = &l;
  }
  const bool full = links.front().table == "sessions" && links.front().kind == "insert";
  std::map<std::string, std::set<std::int64_t>> chained_rows;
  for (const auto& [key, l] : latest) {
    chained_rows[l->table].insert(l->row_id);
    const std::string now = row_sha256(db, l->table, l->row_id, session);
    if (now.empty())
      rep.problems.push_back(fmt::format("session {}: {} row {} (chain link {}) was deleted",
                                         session, l->table, l->row_id, l->seq));
    else if (now != l->row_sha)
      rep.problems.push_back(fmt::format(
          "session {}: {} row {} was edited after it was recorded (its values no longer hash to "
          "chain link {})",
          session, l->table, l->row_id, l->seq));
    else if (session_of(db, def_of(l->table), l->row_id) != session)
      rep.problems.push_back(fmt::format("session {}: {} row {} was moved to another session",
                                         session, l->table, l->row_id));
  }
  if (full)
    for (const auto& d : defs()) {
      Stmt st = db.prepare(fmt::format("SELECT x.id FROM {} WHERE {} = ?", d.from, d.session));
      st.bind(1, session);
      while (st.step())
        if (!chained_rows[std::string(d.name)].count(st.int64(0)))
          rep.problems.push_back(
              fmt::format("session {}: {} row {} is in no chain link (inserted after the fact)",
                          session, d.name, st.int64(0)));
    }
  check_receipts(db, blobs, session, links, rep.problems);
  return full ? ChainState::kFull : ChainState::kPartial;
}

} // namespace

ChainReport verify_chains(Db& db, const BlobStore& blobs) {
  ChainReport rep;
  std::vector<std::int64_t> sessions;
  {
    Stmt st = db.prepare("SELECT id FROM sessions ORDER BY id");
    while (st.step())
      sessions.push_back(st.int64(0));
  }
  const bool chaining = has_row_chain(db);
  for (std::int64_t s : sessions) {
    if (!chaining) {
      rep.unchained.push_back(s);
      continue;
    }
    const ChainState state = check_session(db, blobs, s, rep);
    if (state == ChainState::kFull) ++rep.chained;
    if (state == ChainState::kPartial) ++rep.partially_chained;
  }
  return rep;
}

} // namespace kloop::store
