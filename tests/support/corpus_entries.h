// The kernels of every registered operator's defect and precision corpora, for the tests that walk
// them (CPU gates: tests/evaluator/corpus_cpu_test.cpp; device: tests/gpu/gpu_corpus_test.cpp,
// tests/gpu/gpu_precision_corpus_test.cpp): kernels/<op>/corpus/<name>/ and
// kernels/<op>/precision/<name>/, each a folder with kernel.cu, manifest.json and expect.json.
#pragma once

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/registry.h"
#include "tests/support/test_files.h"

namespace kloop::test_support {

struct CorpusEntry {
  std::string op;     // the operator's folder under kernels/: "rmsnorm", "softmax"
  std::string corpus; // "corpus" (defects) or "precision" (correct kernels)
  std::string name;   // the kernel's folder
  std::filesystem::path dir;
  nlohmann::json expect; // expect.json

  // "<op>_<name>": the gtest parameter name.
  std::string param_name() const { return op + "_" + name; }
  // Where tests/gpu/CMakeLists.txt writes its nvcc-built kernel.cubin and kernel.ptx, below
  // KLOOP_CORPUS_BIN: RMSNorm's defects at <name>/ and precision kernels at precision/<name>/
  // (their folders from before the second operator), every other operator's at <op>/<corpus>/.
  std::string bin_dir() const {
    if (op == "rmsnorm") return corpus == "corpus" ? name : "precision/" + name;
    return op + "/" + corpus + "/" + name;
  }
};

// gtest's printout of a parameter: "<op>/<corpus>/<name>".
inline void PrintTo(const CorpusEntry& e, std::ostream* os) {
  *os << e.op << "/" << e.corpus << "/" << e.name;
}

// The entries of `corpus` ("corpus" or "precision") of every registered operator (or of `only_op`
// alone), by operator folder then kernel folder; a folder without expect.json is not an entry.
// Throws when an expect.json does not parse.
inline std::vector<CorpusEntry> corpus_entries(const std::string& corpus,
                                               const std::string& only_op = "") {
  namespace fs = std::filesystem;
  std::vector<CorpusEntry> out;
  for (std::string_view folder : op::registered_folders()) {
    const std::string op(folder);
    if (!only_op.empty() && op != only_op) continue;
    const fs::path root = fs::path(KLOOP_SOURCE_DIR) / "kernels" / op / corpus;
    if (!fs::is_directory(root)) continue;
    std::vector<CorpusEntry> here;
    for (const auto& d : fs::directory_iterator(root)) {
      if (!fs::exists(d.path() / "expect.json")) continue;
      here.push_back({op, corpus, d.path().filename().string(), d.path(),
                      nlohmann::json::parse(read_file(d.path() / "expect.json"))});
    }
    std::sort(here.begin(), here.end(),
              [](const CorpusEntry& a, const CorpusEntry& b) { return a.name < b.name; });
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

} // namespace kloop::test_support
