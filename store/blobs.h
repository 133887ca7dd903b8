// Content-addressed blob folder: every large byte string the store keeps (sources, manifests, PTX,
// cubins, prompts, responses, logs, sanitizer reports, raw benchmark samples) lives in
// DIR/blobs/ab/cdef... named by its SHA-256. Writes are atomic (temp file + fsync + rename +
// directory fsync) and deduplicated; reads re-hash, so an altered or missing blob is reported,
// never returned.
#pragma once

#include <string>
#include <string_view>

namespace kloop::store {

// Result of checking one blob on disk.
enum class BlobState { kOk, kMissing, kAltered };

class BlobStore {
public:
  explicit BlobStore(std::string root); // root = DIR/blobs (created on first put)

  // Writes `bytes` (if no intact copy exists) and returns its lower-case hex SHA-256.
  // Throws StoreError naming the path and errno cause (ENOSPC, EFBIG, EACCES, ...).
  std::string put(std::string_view bytes) const;

  // The bytes of blob `sha256`, re-hashed; throws StoreError when missing or altered.
  std::string get(const std::string& sha256) const;

  BlobState check(const std::string& sha256) const;  // re-hashes the file
  std::string path(const std::string& sha256) const; // DIR/blobs/ab/cdef...
  const std::string& root() const { return root_; }

private:
  std::string verify_command() const; // `kloop store verify --store DIR` of this store
  std::string root_;
};

// True when `s` is 64 lower-case hex characters.
bool is_sha256_hex(std::string_view s);

} // namespace kloop::store
