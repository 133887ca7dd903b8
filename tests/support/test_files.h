// Files in tests: one temp-folder type and one file reader for every test (no copies per file).
// read_file throws when the file cannot be opened, so a missing fixture or output fails the test
// that reads it instead of reading as "".
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kloop::test_support {

// The bytes of `path`. Throws std::runtime_error naming the path when it cannot be opened.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("test: cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh private folder under $TMPDIR (mkdtemp, mode 0700), removed with its contents by the
// destructor (write permission is restored first, so read-only test folders go too).
class TempDir {
public:
  explicit TempDir(const std::string& tag = "test") {
    std::string t =
        (std::filesystem::temp_directory_path() / ("kloop-" + tag + "-XXXXXX")).string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("test: mkdtemp failed for " + t);
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path_, ec))
      std::filesystem::permissions(e.path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }   // as a string
  std::filesystem::path dir() const { return path_; } // as a path

private:
  std::string path_;
};

} // namespace kloop::test_support
