// Integration test: every curated variant of the offline family compiles with NVRTC for sm_90
// (the build gate's options) with no spills and no stack frame, and contains none of the forbidden
// constructs (printf, clock/timer reads, device malloc, trap, inline asm, module-scope __device__
// state). No GPU needed.
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nvrtc.h>

#include "kernels/rmsnorm/family.h"

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

class FamilyNvrtc : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyNvrtc, CompilesForSm90WithoutSpillsOrForbiddenConstructs) {
  const auto v = variant_by_name(GetParam());
  ASSERT_TRUE(v.has_value());
  const GeneratedCandidate c = generate(*v);

  // Source-level forbidden constructs.
  for (const char* bad :
       {R"(\bprintf\b)", R"(\bclock(64)?\b)", R"(globaltimer)", R"(\bmalloc\b)",
        R"(__trap|\btrap\b)", R"(\basm\b)", R"(__device__\s+[A-Za-z_][\w:<>]*\s+\w+\s*(\[|=|;))"})
    EXPECT_EQ(count(c.kernel_cu, std::regex(bad)), 0) << c.name << " contains " << bad;

  const BuildResult b = build(c.kernel_cu);
  ASSERT_EQ(b.result, NVRTC_SUCCESS) << c.name << "\n" << b.log;
  if (v->baseline_aligned) {
    // A composite inlines the baseline's code and calls its peeled path out of line (an ABI call,
    // hence a small stack frame). Each entry may spill only where the baseline's own entry spills.
    const BuildResult base = build(std::string(embedded_baseline_source()));
    ASSERT_EQ(base.result, NVRTC_SUCCESS) << base.log;
    for (const char* entry : {"rms_f32", "rms_f16", "rms_bf16"}) {
      const std::regex spill(std::string("Function properties for ") + entry +
                             R"(\s*\n[^\n]*?(\d+) bytes spill stores)");
      std::smatch mc, mb;
      ASSERT_TRUE(std::regex_search(b.log, mc, spill)) << entry << "\n" << b.log;
      ASSERT_TRUE(std::regex_search(base.log, mb, spill)) << entry << "\n" << base.log;
      if (std::stoi(mb[1].str()) == 0) {
        EXPECT_EQ(std::stoi(mc[1].str()), 0) << c.name << " " << entry << " spills\n" << b.log;
      }
    }
    return;
  }
  // One resource report per entry, each without spills or a stack frame.
  EXPECT_EQ(count(b.log, std::regex(R"(Compiling entry function)")), 3) << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes spill stores)")), 3) << c.name << "\n" << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes spill loads)")), 3) << c.name << "\n" << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes stack frame)")), 3) << c.name << "\n" << b.log;
  // Nothing in the cubin that calls printf, malloc or a trap helper.
  for (const char* sym : {"vprintf", "malloc", "__assertfail"})
    EXPECT_EQ(b.cubin.find(sym), std::string::npos) << c.name << " cubin references " << sym;
}

std::vector<std::string> curated_names() {
  std::vector<std::string> names;
  for (const auto& v : all_variants())
    names.push_back(variant_name(v));
  return names;
}

INSTANTIATE_TEST_SUITE_P(Curated, FamilyNvrtc, ::testing::ValuesIn(curated_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

} // namespace
} // namespace kloop::rmsnorm
