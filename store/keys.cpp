// Ed25519 key generation and key files for receipts (libsodium).
#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "store/error.h"
#include "store/hash.h"
#include "store/receipt.h"

namespace kloop::store {
namespace {

std::string hex(const unsigned char* p, std::size_t n) {
  std::string out(n * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), p, n);
  out.pop_back();
  return out;
}

} // namespace

// Decodes exactly `n` bytes of hex; false when malformed.
bool unhex(const std::string& s, unsigned char* out, std::size_t n) {
  if (s.size() != 2 * n) return false;
  std::size_t got = 0;
  return sodium_hex2bin(out, n, s.data(), s.size(), nullptr, &got, nullptr) == 0 && got == n;
}

std::string key_id_of(const std::string& public_hex) {
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  if (!unhex(public_hex, pk, sizeof pk))
    throw StoreError(
        fmt::format("keys: public key `{}` is not {} bytes of hex", public_hex, sizeof pk));
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(pk), sizeof pk)).substr(0, 16);
}

KeyPair generate_keypair() {
  if (sodium_init() < 0) throw StoreError("keys: libsodium failed to initialise");
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_keypair(pk, sk);
  KeyPair kp{"", hex(pk, sizeof pk), hex(sk, sizeof sk)};
  sodium_memzero(sk, sizeof sk);
  kp.key_id = key_id_of(kp.public_hex);
  return kp;
}

void write_secret_key(const std::string& path, const KeyPair& kp) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw StoreError(fmt::format("keys: cannot create {} ({}); pick a new file name", path,
                                 std::strerror(errno)));
  const std::string text = nlohmann::json{{"key_id", kp.key_id},
                                          {"public_key", kp.public_hex},
                                          {"secret_key", kp.secret_hex}}
                               .dump(2) +
                           "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw StoreError(fmt::format("keys: cannot write {} ({})", path, std::strerror(err)));
  }
}

KeyPair read_secret_key(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw StoreError(fmt::format("keys: cannot read key file {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object())
    throw StoreError(
        fmt::format("keys: {} is not a JSON key file from `kloop keys generate`", path));
  for (const char* f : {"public_key", "secret_key"})
    if (!j.contains(f) || !j[f].is_string())
      throw StoreError(fmt::format("keys: {} lacks the string field `{}`", path, f));
  KeyPair kp{"", j["public_key"].get<std::string>(), j["secret_key"].get<std::string>()};
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  if (!unhex(kp.secret_hex, sk, sizeof sk))
    throw StoreError(fmt::format("keys: {}: `secret_key` is not {} bytes of hex", path, sizeof sk));
  unsigned char pk_from_sk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_ed25519_sk_to_pk(pk_from_sk, sk);
  sodium_memzero(sk, sizeof sk);
  if (hex(pk_from_sk, sizeof pk_from_sk) != kp.public_hex)
    throw StoreError(fmt::format("keys: {}: `public_key` does not belong to `secret_key`", path));
  kp.key_id = key_id_of(kp.public_hex);
  return kp;
}

} // namespace kloop::store
