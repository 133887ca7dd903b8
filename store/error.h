// The store's one exception type. store/ depends on nothing else of kloop, so it cannot throw
// evaluator::InfraError; callers above (agent, app) treat StoreError as an infrastructure failure.
// Every message names the store path or row, the cause, and the next step.
#pragma once

#include <stdexcept>

namespace kloop::store {

// Any failure to open, read or write the store (SQLite error, missing or altered blob, foreign
// or newer database, read-only directory, full disk).
class StoreError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A store that exists but whose content is damaged: a blob a record names is missing or no longer
// hashes to its name, or a row holds a code this binary does not know. Not the caller's mistake:
// the CLI exits 3 (could not finish) and points at `kloop store verify`.
class DamagedStore : public StoreError {
public:
  using StoreError::StoreError;
};

// The session ID names no session of this store: a caller's mistake (the CLI exits 2, usage),
// not a store fault.
class NoSuchSession : public StoreError {
public:
  using StoreError::StoreError;
};

// A request the stored session cannot meet as asked (signing a receipt whose rollout section is
// empty, say): the caller's to change, not a store fault (the CLI exits 2, usage).
class Refused : public StoreError {
public:
  using StoreError::StoreError;
};

// `kloop receipt sign` of a session whose latest promotion decision is not `promoted` (rejected,
// pending device validation, or none recorded): only promoted sessions are signed. A refusal of
// the caller's request, not a store fault (the CLI exits 2, usage).
class NotPromoted : public Refused {
public:
  using Refused::Refused;
};

// SQLite answered SQLITE_BUSY or SQLITE_LOCKED: another connection holds a lock this one needs
// (after the busy timeout, or at once where SQLite does not wait, as for the switch to WAL).
class StoreBusy : public StoreError {
public:
  using StoreError::StoreError;
};

// The store directory named by the caller (--store) is not a store: it does not exist, is not a
// directory, or holds no kloop.db. A caller's mistake (the CLI exits 2, usage); a store that
// exists but is damaged is a plain StoreError.
class NoSuchStore : public StoreError {
public:
  using StoreError::StoreError;
};

} // namespace kloop::store
