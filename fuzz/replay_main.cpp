// kloop_fuzz_replay: runs checked-in fuzz inputs through every fuzz target of this build without
// libFuzzer (any compiler). `kloop_fuzz_replay FUZZ_DIR` runs FUZZ_DIR/corpus/NAME/* and
// FUZZ_DIR/regressions/NAME/* through each registered target NAME and fails when a target has no
// seed corpus; `kloop_fuzz_replay --target NAME FILE...` runs the given files through one target.
// A finding (an escaped exception, a sanitizer report) ends the process, naming the input first.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/fuzz_target.h"

namespace kloop::fuzz {

namespace {
std::vector<std::pair<std::string, TargetFn>>& registry() {
  static std::vector<std::pair<std::string, TargetFn>> r;
  return r;
}

int run_file(TargetFn fn, const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::fprintf(stderr, "  %s (%zu bytes)\n", file.c_str(), bytes.size());
  return fn(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// Files of `dir` in name order (none when it does not exist).
std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
} // namespace

bool register_target(const char* name, TargetFn fn) {
  registry().emplace_back(name, fn);
  std::sort(registry().begin(), registry().end());
  return true;
}

const std::vector<std::pair<std::string, TargetFn>>& targets() {
  return registry();
}

} // namespace kloop::fuzz

int main(int argc, char** argv) {
  using kloop::fuzz::targets;
  if (argc >= 3 && std::string(argv[1]) == "--target") {
    for (const auto& [name, fn] : targets())
      if (name == argv[2]) {
        for (int i = 3; i < argc; ++i)
          kloop::fuzz::run_file(fn, argv[i]);
        return 0;
      }
    std::fprintf(stderr, "kloop_fuzz_replay: no target %s\n", argv[2]);
    return 2;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FUZZ_DIR | --target NAME FILE...\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];
  int missing = 0;
  for (const auto& [name, fn] : targets()) {
    const auto seeds = kloop::fuzz::files_in(root / "corpus" / name);
    const auto regressions = kloop::fuzz::files_in(root / "regressions" / name);
    std::fprintf(stderr, "%s: %zu seed inputs, %zu regression inputs\n", name.c_str(), seeds.size(),
                 regressions.size());
    if (seeds.empty()) {
      std::fprintf(stderr, "%s: no seed corpus in %s\n", name.c_str(),
                   (root / "corpus" / name).c_str());
      ++missing;
    }
    for (const auto& f : seeds)
      kloop::fuzz::run_file(fn, f);
    for (const auto& f : regressions)
      kloop::fuzz::run_file(fn, f);
  }
  std::printf("%zu fuzz targets replayed\n", targets().size());
  return missing == 0 ? 0 : 1;
}
