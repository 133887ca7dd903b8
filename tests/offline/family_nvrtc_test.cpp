// Integration test: every curated variant of the offline family compiles with NVRTC for sm_90
// (the build gate's options) with no spills and no stack frame, and contains none of the forbidden
// constructs (printf, clock/timer reads, device malloc, trap, module-scope __device__ state, inline
// asm other than the L2 cache-policy loads). No GPU needed.
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nvrtc.h>

#include "kernels/rmsnorm/family.h"
#include "tests/offline/variant_param_name.h"

namespace kloop::rmsnorm {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

struct BuildResult {
  nvrtcResult result;
  std::string log;
  std::string cubin;
};

BuildResult build(const std::string& source) {
  nvrtcProgram raw = nullptr;
  EXPECT_EQ(nvrtcCreateProgram(&raw, source.c_str(), "kernel.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  Program prog(raw);
  const std::string include = std::string("-I") + KLOOP_CUDA_INCLUDE_DIR;
  const std::vector<const char*> opts = {"--gpu-architecture=sm_90", "-lineinfo",
                                         "--ptxas-options=-v", "-default-device", include.c_str()};
  BuildResult out;
  out.result = nvrtcCompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
  std::size_t n = 0;
  nvrtcGetProgramLogSize(prog.get(), &n); // the log is read before the result is judged
  out.log.resize(n);
  if (n) nvrtcGetProgramLog(prog.get(), out.log.data());
  if (out.result == NVRTC_SUCCESS && nvrtcGetCUBINSize(prog.get(), &n) == NVRTC_SUCCESS) {
    out.cubin.resize(n);
    nvrtcGetCUBIN(prog.get(), out.cubin.data());
  }
  return out;
}

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

struct Spill {
  int stores = 0, loads = 0;
};

// ptxas -v's "Function properties for NAME" blocks: spill bytes per function (entries and
// out-of-line device functions alike).
std::map<std::string, Spill> spills_by_function(const std::string& log) {
  static const std::regex re(
      R"(Function properties for (\S+)\s*\n[^\n]*?(\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::map<std::string, Spill> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it)
    out[(*it)[1].str()] = Spill{std::stoi((*it)[2].str()), std::stoi((*it)[3].str())};
  return out;
}

class FamilyNvrtc : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyNvrtc, CompilesForSm90WithoutSpillsOrForbiddenConstructs) {
  const auto v = variant_by_name(GetParam());
  ASSERT_TRUE(v.has_value());
  const GeneratedCandidate c = generate(*v);

  // Source-level forbidden constructs.
  for (const char* bad :
       {R"(\bprintf\b)", R"(\bclock(64)?\b)", R"(globaltimer)", R"(\bmalloc\b)",
        R"(__trap|\btrap\b)", R"(__device__\s+[A-Za-z_][\w:<>]*\s+\w+\s*(\[|=|;))"})
    EXPECT_EQ(count(c.kernel_cu, std::regex(bad)), 0) << c.name << " contains " << bad;
  // Inline PTX only for L2 cache-policy loads (the evict_last option; the baseline's per-call
  // policy, which composites embed): every asm statement is a createpolicy or a cache-hinted
  // vector load.
  // Each allowed statement is one string literal followed by its operand list, so neither a
  // second concatenated literal nor an __asm__ spelling can slip another instruction in.
  const int asm_all = count(c.kernel_cu, std::regex(R"(\b(__)?asm(__)?\b)"));
  const int asm_policy = count(
      c.kernel_cu,
      std::regex(R"(\basm\("(createpolicy\.fractional\.L2::evict_(last|first)\.b64 %0, 1\.0;"|)"
                 R"(ld\.global\.L1::evict_(last|first)\.L2::cache_hint\.v[24]\.u32 )"
                 R"(\{[%0-9, ]+\}, \[%[0-9]\], %[0-9];")\s*:)"));
  EXPECT_EQ(asm_all, asm_policy) << c.name << " has inline asm other than the cache-policy loads";

  const BuildResult b = build(c.kernel_cu);
  ASSERT_EQ(b.result, NVRTC_SUCCESS) << c.name << "\n" << b.log;
  // Nothing in the cubin that calls printf, malloc or a trap helper.
  for (const char* sym : {"vprintf", "malloc", "__assertfail"})
    EXPECT_EQ(b.cubin.find(sym), std::string::npos) << c.name << " cubin references " << sym;
  EXPECT_EQ(count(b.log, std::regex(R"(Compiling entry function)")), 3) << b.log;
  if (v->baseline_aligned) {
    // A composite inlines the baseline's code into each entry and calls its peeled path out of
    // line (an ABI call, hence a stack frame). The out-of-line functions may not spill at all;
    // each entry may spill no more than the baseline's own entry does (stores and loads).
    const BuildResult base = build(std::string(embedded_baseline_source()));
    ASSERT_EQ(base.result, NVRTC_SUCCESS) << base.log;
    const std::map<std::string, Spill> mine = spills_by_function(b.log);
    const std::map<std::string, Spill> theirs = spills_by_function(base.log);
    int out_of_line = 0;
    for (const auto& [fn, sp] : mine) {
      if (fn == "rms_f32" || fn == "rms_f16" || fn == "rms_bf16") {
        ASSERT_TRUE(theirs.count(fn)) << fn << "\n" << base.log;
        EXPECT_LE(sp.stores, theirs.at(fn).stores) << c.name << " " << fn << "\n" << b.log;
        EXPECT_LE(sp.loads, theirs.at(fn).loads) << c.name << " " << fn << "\n" << b.log;
      } else {
        ++out_of_line;
        EXPECT_EQ(sp.stores, 0) << c.name << " " << fn << "\n" << b.log;
        EXPECT_EQ(sp.loads, 0) << c.name << " " << fn << "\n" << b.log;
      }
    }
    EXPECT_EQ(mine.size(), 6u) << b.log; // three entries, three out-of-line peeled paths
    EXPECT_EQ(out_of_line, 3) << b.log;
    return;
  }
  // One resource report per entry, each without spills or a stack frame.
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes spill stores)")), 3) << c.name << "\n" << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes spill loads)")), 3) << c.name << "\n" << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes stack frame)")), 3) << c.name << "\n" << b.log;
}

std::vector<std::string> curated_names() {
  std::vector<std::string> names;
  for (const auto& v : all_variants())
    names.push_back(variant_name(v));
  return names;
}

INSTANTIATE_TEST_SUITE_P(Curated, FamilyNvrtc, ::testing::ValuesIn(curated_names()),
                         kloop::test_support::variant_param_name);

} // namespace
} // namespace kloop::rmsnorm
