// SHA-256 helpers (libsodium's crypto_hash_sha256). Every artifact kloop records is named by the
// lower-case hex SHA-256 of its bytes; the same function hashes blobs, sources, cubins and
// receipts.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace kloop::store {

// Lower-case hex SHA-256 (64 characters) of `bytes`. Never fails (libsodium is initialised on
// first use; an initialisation failure throws std::runtime_error).
std::string sha256_hex(std::string_view bytes);
std::string sha256_hex(std::span<const std::byte> bytes);

// SHA-256 of a file's contents; throws std::runtime_error naming the path if it cannot be read.
std::string sha256_file_hex(const std::string& path);

} // namespace kloop::store
