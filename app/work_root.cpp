#include "app/work_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/core.h>

#include "store/store.h"

namespace kloop::app {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "kloop-work-";

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

} // namespace

int remove_stale_work_roots(const std::string& parent) {
  const std::string host_prefix = std::string(kPrefix) + this_host() + ".";
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(host_prefix, 0) != 0 || !entry.is_directory(ec)) continue;
    const std::string_view pid_text = std::string_view(name).substr(host_prefix.size());
    long long pid = 0;
    const auto [end, err] =
        std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    if (err != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0) continue;
    if (store::process_alive(pid)) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    removed += rm ? 0 : 1;
  }
  return removed;
}

WorkRoot::WorkRoot() {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  const std::string parent = ec ? std::string("/tmp") : tmp.string();
  remove_stale_work_roots(parent);
  path_ = (fs::path(parent) / fmt::format("{}{}.{}", kPrefix, this_host(), ::getpid())).string();
  fs::remove_all(path_, ec); // a folder of an earlier process with this PID
  if (::mkdir(path_.c_str(), 0700) != 0)
    throw std::runtime_error(fmt::format("cannot create the work folder {} ({}); set TMPDIR to a "
                                         "writable folder",
                                         path_, std::strerror(errno)));
  if (const char* old = std::getenv("TMPDIR")) {
    had_tmpdir_ = true;
    previous_tmpdir_ = old;
  }
  ::setenv("TMPDIR", path_.c_str(), 1);
}

WorkRoot::~WorkRoot() {
  if (had_tmpdir_)
    ::setenv("TMPDIR", previous_tmpdir_.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  std::error_code ec;
  fs::remove_all(path_, ec);
}

} // namespace kloop::app
