// Tamper-evident rows: every row a session writes (its sessions row, iterations, prompts,
// responses, candidates, artifacts, tool calls, gate results, test cases, benchmark samples,
// telemetry, holdout commitments and runs, promotion decisions, receipts) is hashed when it is
// inserted or updated, and the hash is appended to the session's chain in `row_chain`: link k
// commits to link k-1, so editing, deleting or inserting a row, or editing a link, breaks the
// chain from that point. A row's hash covers its column values (NULLs left out, so a later
// migration that adds a column keeps old hashes) except the row id, the session id it belongs to
// and the owner pid/host of a session row (operational, not evidence); a foreign key is hashed as
// the chain position of the row it names, not as a rowid, so `kloop store merge` (which renumbers
// rows) keeps every hash valid. The head (last link) is carried in the receipt, so a chain
// rewritten after signing no longer contains the signed head.
//
// Sessions recorded before chaining (schema without row_chain) have no links: `store verify`
// reports them as unchained, not as damaged. A pre-chain session resumed later is partially
// chained: its new rows are chained, its old rows carry no hash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kloop::store {

class Db;
class BlobStore;

// The session tables, in an order where every row's parents come first (merge inserts in it).
const std::vector<std::string_view>& chained_tables();

// Whether rows of `table` are chained (one of chained_tables()).
bool is_chained_table(std::string_view table);

// Whether the open database has the row_chain table (a store written by a chaining kloop).
bool has_row_chain(Db& db);

// Appends a link for row `rowid` of `table` (an insert, or an update of a row already stored) to
// the chain of the session the row belongs to. Call inside the transaction that wrote the row.
// No-op on a database without row_chain. Throws StoreError when the row does not exist.
enum class LinkKind { kInsert, kUpdate };
void chain_row(Db& db, std::string_view table, std::int64_t rowid, LinkKind kind);

// The last link of a session's chain: its position (1-based count of links) and hash.
struct ChainHead {
  std::int64_t links = 0;
  std::string sha256;
};
std::optional<ChainHead> chain_head(Db& db, std::int64_t session_id); // nullopt: no links

// Result of checking every session's chain (part of `kloop store verify`).
struct ChainReport {
  int chained = 0;                     // sessions whose chain starts at their creation
  int partially_chained = 0;           // pre-chain sessions resumed later
  std::vector<std::int64_t> unchained; // sessions recorded before chaining (no links)
  std::int64_t links = 0;              // links checked
  std::vector<std::string> problems;   // one line per finding: session, table, row, what
  bool ok() const { return problems.empty(); }
};

// Recomputes every link and every chained row's hash; finds edited, deleted and (in fully chained
// sessions) inserted rows, edited or missing links, and receipts whose recorded head the chain no
// longer contains (the receipt blobs are read from `blobs`; a missing receipt blob is reported by
// the blob check, not here).
ChainReport verify_chains(Db& db, const BlobStore& blobs);

// Hash of one row as the chain records it (exposed for tests and merge): "" when absent.
std::string row_sha256(Db& db, std::string_view table, std::int64_t rowid, std::int64_t session_id);

// The session's identity across stores: sessions.uid, or for a session recorded before uids (a
// pre-chain store) "legacy-" + 32 hex of a hash of its immutable fields (operator, contract,
// provider, model, budget, seed, kloop version and commit, started_at).
std::string session_uid(Db& db, std::int64_t session_id);

} // namespace kloop::store
