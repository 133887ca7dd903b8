// The store's SQLite schema as ordered migrations. Migration i (0-based) brings PRAGMA
// user_version from i to i+1; kSchemaVersion is the number of migrations. Never edit a shipped
// migration: append a new one. PRAGMA application_id marks a file as a kloop store.
#pragma once

#include <cstdint>
#include <string_view>

namespace kloop::store {

class Db;

inline constexpr std::int64_t kApplicationId = 0x6B6C6F70; // "klop"
int schema_version(); // the version this binary writes (number of migrations)

// Checks application_id/user_version of an open database and applies pending migrations, all in
// one write transaction that re-reads the version first (safe when several processes create or
// migrate the same store at once). `writable` false: applies none (an older store is read as it
// is).
// Throws StoreError for a foreign SQLite file or a schema newer than this binary.
void migrate(Db& db, bool writable);

} // namespace kloop::store
