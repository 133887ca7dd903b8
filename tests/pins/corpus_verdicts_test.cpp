// The defect corpus's verdicts as the operators refactor (issue 25) must keep them, on a machine
// without a GPU: every corpus kernel (kernels/rmsnorm/corpus/*) goes through the public pipeline
// with the device gates not run. A kernel whose expected rejecting gate is `contract` or `static`
// must be rejected there; every other kernel must pass contract, build and static inspection and
// end pending_device_validation (its rejection belongs to a device gate, checked by
// gpu_corpus_test on the GPU machine). The expectation table itself (name -> verdict, gate,
// status) is pinned as recorded at commit 7b3a281, so no expectation is loosened on the way;
// kernels added to the corpus since (by other issues, merged from main) are listed with their
// expectation.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "evaluator/pipeline.h"
#include "evaluator/sandbox.h"
#include "store/hash.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<fs::path> corpus_dirs(const fs::path& root) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "expect.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

const fs::path kCorpus = fs::path(KLOOP_SOURCE_DIR) / "kernels/rmsnorm/corpus";

// Corpus kernels added after 7b3a281, with their expectation row (name:verdict,gate,status,fault):
// issue 21 (main at 934d936) added a kernel whose entry points have C++ linkage.
const std::map<std::string, std::string> kAddedSince7b3a281 = {
    {"missing_entry_cxx_linkage", "reject,static,,"}};

TEST(PinnedCorpusTest, ExpectationTableIsUnchanged) {
  std::string table;
  std::map<std::string, std::string> added;
  for (const fs::path& d : corpus_dirs(kCorpus)) {
    const auto e = nlohmann::json::parse(slurp(d / "expect.json"));
    const std::string name = d.filename().string();
    const std::string row = e.value("verdict", "") + "," + e.value("gate", "") + "," +
                            e.value("status", "") + "," + e.value("fault_class", "");
    if (kAddedSince7b3a281.contains(name))
      added[name] = row;
    else
      table += name + ":" + row + "\n";
  }
  EXPECT_EQ(store::sha256_hex(table),
            "37069d38e51db47f0fc7ede0faad331a11a8918fbd5cd9a143da646bcbf26a73")
      << table;
  EXPECT_EQ(added, kAddedSince7b3a281);
}

TEST(PinnedCorpusTest, CpuVisibleVerdictsAreUnchanged) {
  if (!fs::exists("/usr/local/cuda/include/cuda_fp16.h"))
    GTEST_SKIP() << "CUDA toolkit not installed at /usr/local/cuda";
  try {
    resolve_sandbox(SandboxRequest::kAuto);
  } catch (const InfraError& e) {
    GTEST_SKIP() << e.what();
  }
  int checked = 0;
  for (const fs::path& d : corpus_dirs(kCorpus)) {
    const auto expect = nlohmann::json::parse(slurp(d / "expect.json"));
    const std::string gate = expect.value("gate", "");
    const std::string src = slurp(d / "kernel.cu"), man = slurp(d / "manifest.json");
    NoDeviceGates dev;
    const Evaluation ev =
        evaluate_candidate(Candidate{src, man, src.size(), man.size()}, EvaluateOptions{}, dev);
    const std::string name = d.filename().string();
    if (gate == "contract" || gate == "static") {
      const GateResult* g = ev.report.find(gate);
      ASSERT_NE(g, nullptr) << name;
      EXPECT_EQ(g->status, GateStatus::kFail) << name << ": " << ev.report.to_json().dump(1);
      EXPECT_EQ(ev.report.verdict, Verdict::kReject) << name;
    } else {
      for (const char* g : {"contract", "build", "static"})
        EXPECT_EQ(ev.report.find(g)->status, GateStatus::kPass)
            << name << " " << g << ": " << ev.report.find(g)->reason;
      EXPECT_EQ(ev.report.verdict, Verdict::kPendingDeviceValidation) << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 27 + static_cast<int>(kAddedSince7b3a281.size()));
}

} // namespace
} // namespace kloop::evaluator
