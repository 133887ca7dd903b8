// Integration test: every curated variant of the offline family compiles with NVRTC for sm_90
// (the build gate's options) with no spills and no stack frame, and contains none of the forbidden
// constructs (printf, clock/timer reads, device malloc, trap, module-scope __device__ state, inline
// asm other than the L2 cache-policy loads). No GPU needed.
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <tuple>
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
  std::string ptx;
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
  if (out.result == NVRTC_SUCCESS && nvrtcGetPTXSize(prog.get(), &n) == NVRTC_SUCCESS) {
    out.ptx.resize(n);
    nvrtcGetPTX(prog.get(), out.ptx.data());
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
    // Three entries, and an out-of-line peeled path per composite entry (an entry handed to the
    // baseline, e.g. float32's under float32_baseline, is the baseline's own).
    const int composite_entries =
        3 - v->float32_baseline - v->float16_baseline - v->bfloat16_baseline;
    EXPECT_EQ(mine.size(), 3u + composite_entries) << b.log;
    EXPECT_EQ(out_of_line, composite_entries) << b.log;
    return;
  }
  // One resource report per entry, each without spills or a stack frame.
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes spill stores)")), 3) << c.name << "\n" << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes spill loads)")), 3) << c.name << "\n" << b.log;
  EXPECT_EQ(count(b.log, std::regex(R"(\b0 bytes stack frame)")), 3) << c.name << "\n" << b.log;
}

// A mangled C++ symbol in PTX.
const std::regex& mangled_symbol() {
  static const std::regex re(R"(_Z[A-Za-z0-9_]+)");
  return re;
}

// The PTX text of entry `name` as compiled (from ".entry name" to its closing brace at column 0);
// empty when absent.
std::string raw_entry_ptx(const std::string& ptx, const std::string& name) {
  const std::size_t at = ptx.find(".entry " + name + "(");
  if (at == std::string::npos) return {};
  const std::size_t end = ptx.find("\n}", at);
  if (end == std::string::npos) return {};
  return ptx.substr(at, end + 2 - at);
}

// The PTX of entry `name` (from ".entry name" to its closing brace at column 0), normalised: every
// mangled symbol becomes "SYM", and line-info directives (.loc, from -lineinfo), comments and the
// function index in branch labels are dropped. Inside a composite the baseline's device code sits
// in namespace bl at other source lines, so those are all that differ. Empty when absent.
std::string entry_ptx(const std::string& ptx, const std::string& name) {
  static const std::regex loc(R"(\n\t\.loc\t[^\n]*|//[^\n]*)");
  static const std::regex label(R"(\$L__BB\d+_)"); // numbered per function of the module
  std::string body = std::regex_replace(raw_entry_ptx(ptx, name), loc, std::string());
  body = std::regex_replace(body, label, "$$L__BB_");
  return std::regex_replace(body, mangled_symbol(), "SYM");
}

std::string fmt_names(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += n + " ";
  return out;
}

// Variant::float32_baseline: the composite's float32 entry compiles to the baseline's own float32
// entry (the same PTX, names aside, and the same ptxas resources), while its half-precision
// entries stay composite. Without the option the combined float32 entry differs: the comparison
// can tell the two apart.
TEST(FamilyNvrtcFloat32Baseline, Float32EntryIsTheBaselinesEntry) {
  const BuildResult base = build(std::string(embedded_baseline_source()));
  ASSERT_EQ(base.result, NVRTC_SUCCESS) << base.log;
  const std::string base_f32 = entry_ptx(base.ptx, "rms_f32");
  ASSERT_GT(base_f32.size(), 1000u) << base.ptx.substr(0, 2000);
  static const std::regex f32_props(
      R"(Function properties for rms_f32\s*\n([^\n]*)\n[^\n]*?(Used \d+ registers[^\n]*))");
  std::smatch base_props;
  ASSERT_TRUE(std::regex_search(base.log, base_props, f32_props)) << base.log;

  const auto with = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl");
  const auto without = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl");
  ASSERT_TRUE(with && without);
  const BuildResult a = build(generate(*with).kernel_cu);
  const BuildResult b = build(generate(*without).kernel_cu);
  ASSERT_EQ(a.result, NVRTC_SUCCESS) << a.log;
  ASSERT_EQ(b.result, NVRTC_SUCCESS) << b.log;
  EXPECT_EQ(entry_ptx(a.ptx, "rms_f32"), base_f32);
  // The baseline's entry calls nothing out of line and names one mangled symbol (its shared
  // reduction array), so the normalisation above cannot hide a different callee.
  EXPECT_EQ(base_f32.find("call"), std::string::npos);
  {
    const std::string raw = raw_entry_ptx(base.ptx, "rms_f32");
    std::set<std::string> names;
    for (auto it = std::sregex_iterator(raw.begin(), raw.end(), mangled_symbol());
         it != std::sregex_iterator(); ++it)
      names.insert(it->str());
    EXPECT_EQ(names.size(), 1u) << fmt_names(names);
  }
  std::smatch props;
  ASSERT_TRUE(std::regex_search(a.log, props, f32_props)) << a.log;
  EXPECT_EQ(props[1].str(), base_props[1].str()); // stack frame and spill bytes
  EXPECT_EQ(props[2].str(), base_props[2].str()); // registers, barriers, shared memory
  EXPECT_NE(entry_ptx(b.ptx, "rms_f32"), base_f32);
  for (const char* half : {"rms_f16", "rms_bf16"}) {
    EXPECT_NE(entry_ptx(a.ptx, half), entry_ptx(base.ptx, half)) << half;
    EXPECT_EQ(entry_ptx(a.ptx, half), entry_ptx(b.ptx, half)) << half;
  }
}

// The float32 entry takes the baseline's launch bound even where the variant's own bound differs:
// eight cached vectors give the composite's half entries __launch_bounds__(256, 2), while the
// baseline declares rms_f32 with (256, 4).
TEST(FamilyNvrtcFloat32Baseline, Float32EntryCopiesTheBaselinesLaunchBound) {
  const std::string base(embedded_baseline_source());
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(base, m, std::regex(R"(__launch_bounds__\(([^()]*)\)\s*rms_f32\s*\()")));
  const auto v = variant_by_name("v16-tauto-b256-c8-shfl-pers-peel-bl-f32bl");
  ASSERT_TRUE(v.has_value());
  const std::string src = generate(*v).kernel_cu;
  EXPECT_NE(src.find("__launch_bounds__(" + m[1].str() + ") rms_f32("), std::string::npos) << src;
  EXPECT_NE(src.find("__launch_bounds__(256, 2) rms_f16("), std::string::npos);
  EXPECT_NE(m[1].str(), "256, 2");
  const BuildResult b = build(src);
  ASSERT_EQ(b.result, NVRTC_SUCCESS) << b.log;
  const BuildResult ref = build(base);
  ASSERT_EQ(ref.result, NVRTC_SUCCESS) << ref.log;
  EXPECT_EQ(entry_ptx(b.ptx, "rms_f32"), entry_ptx(ref.ptx, "rms_f32"));
}

// Variant::float16_baseline and bfloat16_baseline: a handed half-precision entry compiles to the
// baseline's own entry (same PTX, names aside, same ptxas resources); the dtype that stays
// composite keeps the composite's entry.
TEST(FamilyNvrtcDtypeBaseline, HandedHalfEntryIsTheBaselinesEntry) {
  const BuildResult base = build(std::string(embedded_baseline_source()));
  ASSERT_EQ(base.result, NVRTC_SUCCESS) << base.log;
  const auto composite = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl");
  ASSERT_TRUE(composite.has_value());
  const BuildResult plain = build(generate(*composite).kernel_cu);
  ASSERT_EQ(plain.result, NVRTC_SUCCESS) << plain.log;
  const auto props = [](const std::string& log, const std::string& fn) {
    std::smatch m;
    const std::regex re("Function properties for " + fn +
                        R"(\s*\n([^\n]*)\n[^\n]*?(Used \d+ registers[^\n]*))");
    return std::regex_search(log, m, re) ? m[1].str() + " | " + m[2].str() : std::string();
  };
  for (const auto& [name, handed, kept] :
       {std::tuple{"v16-tauto-b256-c2-shfl-pers-peel-wr-bl-bf16bl", "rms_bf16", "rms_f16"},
        std::tuple{"v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl-f16bl", "rms_f16", "rms_bf16"}}) {
    const auto v = variant_by_name(name);
    ASSERT_TRUE(v.has_value()) << name;
    const BuildResult a = build(generate(*v).kernel_cu);
    ASSERT_EQ(a.result, NVRTC_SUCCESS) << a.log;
    const std::string base_entry = entry_ptx(base.ptx, handed);
    ASSERT_GT(base_entry.size(), 1000u) << handed;
    EXPECT_EQ(entry_ptx(a.ptx, handed), base_entry) << name;
    EXPECT_NE(entry_ptx(plain.ptx, handed), base_entry) << name; // the comparison can tell
    ASSERT_FALSE(props(base.log, handed).empty()) << base.log;
    EXPECT_EQ(props(a.log, handed), props(base.log, handed)) << name;
    EXPECT_EQ(entry_ptx(a.ptx, kept), entry_ptx(plain.ptx, kept)) << name; // still composite
    EXPECT_NE(entry_ptx(a.ptx, kept), entry_ptx(base.ptx, kept)) << name;
  }
}

std::vector<std::string> curated_names() {
  std::vector<std::string> names;
  for (const auto& v : all_variants())
    names.push_back(variant_name(v));
  return names;
}

INSTANTIATE_TEST_SUITE_P(Curated, FamilyNvrtc, ::testing::ValuesIn(curated_names()),
                         kloop::test_support::variant_param_name);

// Members outside the curated set (which the GPU sweep and the explore rule use) that the policy
// reaches: tune:dtype_baseline's half-type handoffs (the eighth session's call 3 promoted the
// first).
INSTANTIATE_TEST_SUITE_P(
    PolicyReached, FamilyNvrtc,
    ::testing::Values("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl-f16bl",
                      "v16-tauto-b256-c2-shfl-pers-peel-wr-bl-bf16bl",
                      "v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl-f16bl-bf16bl"),
    kloop::test_support::variant_param_name);

} // namespace
} // namespace kloop::rmsnorm
