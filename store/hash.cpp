#include "store/hash.h"

#include <sodium.h>

#include <array>
#include <fstream>
#include <stdexcept>

namespace kloop::store {
namespace {

void ensure_sodium() {
  static const bool ok = sodium_init() >= 0;
  if (!ok) throw std::runtime_error("libsodium: sodium_init failed");
}

std::string to_hex(const unsigned char* digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(crypto_hash_sha256_BYTES * 2, '0');
  for (std::size_t i = 0; i < crypto_hash_sha256_BYTES; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xF];
  }
  return out;
}

} // namespace

std::string sha256_hex(std::string_view bytes) {
  ensure_sodium();
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(bytes.data()),
                     bytes.size());
  return to_hex(digest.data());
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string sha256_file_hex(const std::string& path) {
  ensure_sodium();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + " to hash it");
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::array<char, 1 << 16> buf{};
  while (in) {
    in.read(buf.data(), buf.size());
    const auto got = in.gcount();
    if (got > 0)
      crypto_hash_sha256_update(&state, reinterpret_cast<const unsigned char*>(buf.data()),
                                static_cast<unsigned long long>(got));
  }
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256_final(&state, digest.data());
  return to_hex(digest.data());
}

} // namespace kloop::store
