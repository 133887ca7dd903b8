// One libFuzzer target per file (fuzz/README.md). A target file writes
//   KLOOP_FUZZ_TARGET(name) { ... uses `data` and `size` ...; return 0; }
// Built with -DKLOOP_FUZZ=ON (clang), each target file becomes its own libFuzzer executable
// fuzz_NAME (KLOOP_FUZZ_LIBFUZZER defined: the body is LLVMFuzzerTestOneInput). In every other
// build all target files are compiled into one kloop_fuzz_replay executable that registers each
// body under its name and runs the checked-in inputs (fuzz/corpus/NAME, fuzz/regressions/NAME)
// through it: the CTest `fuzz_regressions`, in the normal and the ASan+UBSan tiers.
//
// A body returns 0 for every input. It catches only the exceptions its API documents for bad
// input; any other exception, a sanitizer report or an abort is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kloop::fuzz {

using TargetFn = int (*)(const std::uint8_t* data, std::size_t size);

// Registers `fn` as target `name` for kloop_fuzz_replay; returns true (for a static initialiser).
bool register_target(const char* name, TargetFn fn);
// The registered targets, by name.
const std::vector<std::pair<std::string, TargetFn>>& targets();

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut into `n` parts at its first n-1 NUL bytes (missing parts are empty): one input
// feeds a target several values (a manifest and a kernel source, a receipt and a key registry).
inline std::vector<std::string> split_input(std::string_view text, std::size_t n) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const auto nul = text.find('\0');
    parts.emplace_back(text.substr(0, nul));
    text = nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1);
  }
  parts.emplace_back(text);
  return parts;
}

} // namespace kloop::fuzz

#if defined(KLOOP_FUZZ_LIBFUZZER)
#define KLOOP_FUZZ_TARGET(name)                                                                    \
  static int kloop_fuzz_##name(const std::uint8_t* data, std::size_t size);                        \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {              \
    return kloop_fuzz_##name(data, size);                                                          \
  }                                                                                                \
  static int kloop_fuzz_##name(const std::uint8_t* data, std::size_t size)
#else
#define KLOOP_FUZZ_TARGET(name)                                                                    \
  static int kloop_fuzz_##name(const std::uint8_t* data, std::size_t size);                        \
  [[maybe_unused]] static const bool kloop_fuzz_registered_##name =                                \
      ::kloop::fuzz::register_target(#name, &kloop_fuzz_##name);                                   \
  static int kloop_fuzz_##name(const std::uint8_t* data, std::size_t size)
#endif
