#include "store/blobs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "store/error.h"
#include "store/hash.h"
#include "store/text_view.h"

namespace kloop::store {
namespace {

namespace fs = std::filesystem;

// RAII file descriptor.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }

private:
  int fd_;
};

[[noreturn]] void fail_errno(const std::string& what, const std::string& path, int err) {
  std::string hint = "check the store directory";
  if (err == ENOSPC || err == EFBIG || err == EDQUOT)
    hint = "the disk (or file-size limit) is full: free space and retry; committed steps are kept";
  else if (err == EACCES || err == EROFS || err == EPERM)
    hint = "the store is not writable: use a writable --store";
  throw StoreError(
      fmt::format("store: cannot {} {} ({}); {}", what, path, std::strerror(err), hint));
}

void fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

void make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail_errno("create", dir, errno);
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

} // namespace

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

BlobStore::BlobStore(std::string root) : root_(std::move(root)) {}

std::string BlobStore::path(const std::string& sha256) const {
  if (!is_sha256_hex(sha256))
    throw StoreError(fmt::format("store: `{}` is not a SHA-256 hex digest", sha256));
  return fmt::format("{}/{}/{}", root_, sha256.substr(0, 2), sha256.substr(2));
}

std::string BlobStore::verify_command() const {
  return kloop_command("store verify", fs::path(root_).parent_path().string());
}

BlobState BlobStore::check(const std::string& sha256) const {
  std::string bytes;
  if (!read_file(path(sha256), bytes)) return BlobState::kMissing;
  return sha256_hex(bytes) == sha256 ? BlobState::kOk : BlobState::kAltered;
}

std::string BlobStore::get(const std::string& sha256) const {
  std::string bytes;
  const std::string p = path(sha256);
  if (!read_file(p, bytes))
    throw DamagedStore(fmt::format("store: blob {} is missing ({}); run `{}` and restore the "
                                   "store from a backup",
                                   sha256, p, verify_command()));
  if (sha256_hex(bytes) != sha256)
    throw DamagedStore(fmt::format("store: blob {} was altered (its bytes hash to {}); run `{}` "
                                   "and restore the store from a backup",
                                   sha256, sha256_hex(bytes), verify_command()));
  return bytes;
}

std::string BlobStore::put(std::string_view bytes) const {
  const std::string sha = sha256_hex(bytes);
  if (check(sha) == BlobState::kOk) return sha; // deduplicated
  const std::string dir = fmt::format("{}/{}", root_, sha.substr(0, 2));
  make_dir(root_);
  make_dir(dir);
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      fmt::format("{}/.tmp-{}-{}-{}", dir, ::getpid(), counter++, sha.substr(2, 8));
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444));
    if (fd.get() < 0) fail_errno("create", tmp, errno);
    std::size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::write(fd.get(), bytes.data() + off, bytes.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::unlink(tmp.c_str());
        fail_errno("write blob", tmp, err);
      }
      off += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      fail_errno("fsync blob", tmp, err);
    }
  }
  const std::string final_path = path(sha);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_errno("rename blob into", final_path, err);
  }
  fsync_dir(dir);
  return sha;
}

} // namespace kloop::store
