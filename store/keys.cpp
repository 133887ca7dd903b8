// Ed25519 key generation and key files for receipts (libsodium).
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
  // As ssh does: a secret key that group or others have any access to is refused before it is
  // read. The mode bits decide, not whether open() fails (root opens any file). They are read
  // from the opened file (fstat), so the file checked is the file read; O_NONBLOCK keeps a FIFO
  // from blocking the open before it is refused.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    throw StoreError(fmt::format("keys: cannot read key file {} ({}); check the path", path,
                                 std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat sb {};
  if (::fstat(fd, &sb) != 0)
    throw StoreError(fmt::format("keys: cannot read key file {} ({}); check the path", path,
                                 std::strerror(errno)));
  if (!S_ISREG(sb.st_mode))
    throw StoreError(fmt::format("keys: {} is not a regular file; give the key file from `kloop "
                                 "keys generate`",
                                 path));
  if ((sb.st_mode & 077) != 0)
    throw StoreError(
        fmt::format("keys: permissions {:04o} of secret key file {} are too open (group "
                    "or others have access to it); run `chmod 600 {}` and keep it "
                    "private",
                    sb.st_mode & 07777, path, path));
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw StoreError(fmt::format("keys: cannot read key file {} ({}); check the path", path,
                                   std::strerror(errno)));
    }
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (1u << 20))
      throw StoreError(
          fmt::format("keys: {} is over 1 MiB, not a key file from `kloop keys generate`", path));
  }
  sodium_memzero(buf, sizeof buf);
  const auto j = nlohmann::json::parse(text, nullptr, false);
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
  // `key_id` is optional (the receipt uses the id derived from the public key), but one that is
  // present must be a plain identifier naming this key: it is what a reviewer reads.
  if (j.contains("key_id")) {
    const auto& id = j["key_id"];
    if (!id.is_string() || id.get_ref<const std::string&>().empty() ||
        id.get_ref<const std::string&>().find_first_not_of(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
            std::string::npos)
      throw StoreError(fmt::format("keys: {}: `key_id` must be a non-empty string of the "
                                   "characters [A-Za-z0-9._-]; set it to {} (the id of its "
                                   "public key)",
                                   path, kp.key_id));
    if (id.get<std::string>() != kp.key_id)
      throw StoreError(fmt::format("keys: {}: `key_id` {} is not the id of its `public_key` ({}); "
                                   "set it to {}",
                                   path, id.get<std::string>(), kp.key_id, kp.key_id));
  }
  return kp;
}

} // namespace kloop::store
