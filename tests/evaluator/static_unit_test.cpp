// CPU-only checks of the build gate's helpers: #include pre-scan, path redaction, diagnostic
// reduction, ptxas report parsing, SASS summary, candidate byte checks. The PTX rules are in
// ptx_rules_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "evaluator/build.h"
#include "evaluator/candidate.h"
#include "evaluator/static_inspection.h"

namespace kloop::evaluator {
namespace {

const std::string kInc = "/usr/local/cuda/include";

bool has_toolkit() {
  return std::filesystem::exists(kInc + "/cuda_fp16.h");
}

std::vector<int> lines_of(const std::vector<IncludeProblem>& problems) {
  std::vector<int> lines;
  for (const auto& p : problems)
    lines.push_back(p.line);
  return lines;
}

std::vector<std::string> physical_lines(const std::string& s) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (std::size_t e; (e = s.find('\n', b)) != std::string::npos; b = e + 1)
    out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

TEST(IncludeScanTest, ToolkitHeadersAreAccepted) {
  if (!has_toolkit()) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda";
  const std::string src = "#include <cuda_fp16.h>\n#  include \"cuda_bf16.h\"\n";
  const auto scan = scan_includes(src, kInc);
  EXPECT_TRUE(scan.rejected.empty());
  EXPECT_TRUE(scan.neutralised.empty());
  EXPECT_EQ(scan.source_to_compile, src);
}

// CUDA 13 keeps cub/, cuda/std/, nv/, cuda/ptx and libcu++ under include/cccl/ (nvcc's -isystem).
TEST(IncludeScanTest, CcclHeadersAreToolkitHeaders) {
  if (!has_toolkit()) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda";
  const auto scan = scan_includes("#include <cub/block/block_reduce.cuh>\n"
                                  "#include <cub/warp/warp_reduce.cuh>\n"
                                  "#include <cuda/std/limits>\n#include <cuda/ptx>\n"
                                  "#include <nv/target>\n#include <cooperative_groups/reduce.h>\n",
                                  kInc);
  EXPECT_TRUE(scan.rejected.empty()) << scan.rejected.at(0).message;
  EXPECT_TRUE(scan.neutralised.empty()) << scan.neutralised.at(0).message;
}

TEST(IncludeScanTest, EscapesAreRejectedAndMissingHeadersNeutralisedWithLineNumbers) {
  const std::string src = "#include <cuda_fp16.h>\n"                       // 1 ok
                          "#include \"/etc/passwd\"\n"                     // 2 absolute
                          "#include \"../holdout/suite.h\"\n"              // 3 ..
                          "#include <cuda/../../../../etc/passwd>\n"       // 4 ..
                          "/* c */ # /* c */ include <no_such_header.h>\n" // 5 missing
                          "#define P \"/etc/passwd\"\n#include P\n"        // 7 computed
                          "%:include </etc/shadow>\n"                      // 8 digraph absolute
                          "#inc\\\nlude \"/etc/hosts\"\n"                  // 9 continuation
                          "#if __has_include(\"/etc/passwd\")\n#endif\n"   // 11 __has_include
                          "// #include \"/etc/passwd\" is a comment\n";
  const auto scan = scan_includes(src, kInc);
  EXPECT_EQ(lines_of(scan.rejected), (std::vector<int>{2, 3, 4, 8, 9, 11}));
  const std::vector<int> missing =
      has_toolkit() ? std::vector<int>{5, 7} : std::vector<int>{1, 5, 7};
  EXPECT_EQ(lines_of(scan.neutralised), missing);
  EXPECT_NE(scan.rejected.at(0).message.find("absolute"), std::string::npos);
  EXPECT_NE(scan.rejected.at(1).message.find("'..'"), std::string::npos);
  EXPECT_NE(scan.neutralised.back().message.find("computed includes"), std::string::npos);
}

TEST(IncludeScanTest, SymlinkOutOfIncludeDirIsRejected) {
  auto dir = std::filesystem::temp_directory_path() / "kloop-scan-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "inc");
  std::ofstream(dir / "secret.h") << "x";
  std::filesystem::create_symlink(dir / "secret.h", dir / "inc" / "link.h");
  std::ofstream(dir / "inc" / "ok.h") << "x";
  const auto scan = scan_includes("#include <link.h>\n#include <ok.h>\n", (dir / "inc").string());
  ASSERT_EQ(scan.rejected.size(), 1u);
  EXPECT_EQ(scan.rejected[0].line, 1);
  EXPECT_NE(scan.rejected[0].message.find("outside the CUDA include directory"), std::string::npos);
  EXPECT_TRUE(scan.neutralised.empty());
  std::filesystem::remove_all(dir);
}

// Another vendor's header in an #else branch is the preprocessor's business: the directive
// becomes an #error on the same line, which fires only if the branch is compiled.
TEST(IncludeScanTest, NonToolkitHeaderBecomesAnErrorLineInPlace) {
  const std::string src = "#ifdef USE_ROCM\n#include <hipcub/hipcub.hpp>\n#else\n"
                          "#include <cuda_fp16.h>\n#endif\n#include \\\n  <rocm/x.h>\nint k;\n";
  const auto scan = scan_includes(src, kInc);
  EXPECT_TRUE(scan.rejected.empty());
  const std::vector<int> want = has_toolkit() ? std::vector<int>{2, 6} : std::vector<int>{2, 4, 6};
  ASSERT_EQ(lines_of(scan.neutralised), want);
  EXPECT_EQ(scan.neutralised[0].header, "hipcub/hipcub.hpp");
  const auto in = physical_lines(src);
  const auto out = physical_lines(scan.source_to_compile);
  ASSERT_EQ(out.size(), in.size());
  const std::string error = "#error " + std::string(kNeutralisedIncludeMarker);
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (i == 1 || i == 5) {
      EXPECT_EQ(out[i], error) << i;
    } else if (i == 6) {
      EXPECT_EQ(out[i], "") << "the continuation line of the replaced directive";
    } else if (i != 3 || has_toolkit()) {
      EXPECT_EQ(out[i], in[i]) << i;
    }
  }
}

TEST(IncludeScanTest, StandardHeadersNameTheirLibcuxxReplacement) {
  if (!has_toolkit()) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda";
  const auto scan = scan_includes("#include <cstdint>\n#include <type_traits>\n#include <limits>\n"
                                  "#include <cmath>\n#include <stdint.h>\n#include <vector>\n",
                                  kInc);
  ASSERT_EQ(scan.neutralised.size(), 6u);
  EXPECT_NE(scan.neutralised[0].message.find("<cuda/std/cstdint>"), std::string::npos);
  EXPECT_NE(scan.neutralised[1].message.find("<cuda/std/type_traits>"), std::string::npos);
  EXPECT_NE(scan.neutralised[2].message.find("<cuda/std/limits>"), std::string::npos);
  EXPECT_NE(scan.neutralised[3].message.find("rsqrtf"), std::string::npos);
  EXPECT_NE(scan.neutralised[4].message.find("<cuda/std/cstdint>"), std::string::npos);
  EXPECT_NE(scan.neutralised[5].message.find("no such CUDA toolkit header"), std::string::npos);
}

TEST(IncludeScanTest, HeadersNvrtcCannotCompileNameWhatToUse) {
  if (!has_toolkit()) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda";
  const auto scan =
      scan_includes("#include <cub/cub.cuh>\n#include <cub/device/device_reduce.cuh>\n"
                    "#include <thrust/complex.h>\n#include <cuda.h>\n",
                    kInc);
  ASSERT_EQ(scan.neutralised.size(), 4u);
  EXPECT_NE(scan.neutralised[0].message.find("<cub/block/block_reduce.cuh>"), std::string::npos);
  EXPECT_NE(scan.neutralised[1].message.find("host code"), std::string::npos);
  EXPECT_NE(scan.neutralised[2].message.find("thrust"), std::string::npos);
  EXPECT_NE(scan.neutralised[3].message.find("driver API"), std::string::npos);
}

TEST(IncludeScanTest, HasIncludeOfAMissingHeaderEvaluatesToZero) {
  const auto scan = scan_includes("#if __has_include(<hip/hip_runtime.h>) && X\n#endif\n", kInc);
  EXPECT_TRUE(scan.rejected.empty());
  EXPECT_EQ(scan.source_to_compile, "#if 0 && X\n#endif\n");
}

TEST(RedactTest, KnownPrefixesAndOtherAbsolutePathsAreReplaced) {
  const std::string log = "/tmp/kloop-build-ab12/kernel.cu(3): error: x\n"
                          "/usr/local/cuda-13.0/include/cuda_fp16.hpp(10): note\n"
                          "see \"/home/alice/secret/store.db\" and (/work/main/x)\n";
  auto out = redact_paths(
      log, {{"/tmp/kloop-build-ab12/", ""}, {"/usr/local/cuda-13.0/include/", "<cuda-include>/"}});
  EXPECT_EQ(out, "kernel.cu(3): error: x\n<cuda-include>/cuda_fp16.hpp(10): note\n"
                 "see \"<path>\" and (<path>)\n");
}

TEST(ReduceDiagnosticsTest, KeepsFirstErrorsWithContextAndCountsTheRest) {
  std::string log;
  for (int i = 1; i <= 7; ++i)
    log += "kernel.cu(" + std::to_string(i * 10) + "): error: identifier \"v" + std::to_string(i) +
           "\" is undefined\n    int a = v;\n            ^\n\n";
  log += "7 errors detected in the compilation of \"kernel.cu\".\n";
  auto out = reduce_diagnostics(log, 5);
  EXPECT_NE(out.find("kernel.cu(10): error"), std::string::npos);
  EXPECT_NE(out.find("kernel.cu(50): error"), std::string::npos);
  EXPECT_EQ(out.find("kernel.cu(60)"), std::string::npos);
  EXPECT_NE(out.find("    int a = v;"), std::string::npos);
  EXPECT_NE(out.find("(2 more errors)"), std::string::npos);
  EXPECT_EQ(out.find("detected in the compilation"), std::string::npos);
}

const char* kPtxasLog =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'rms_f32' for 'sm_90'\n"
    "ptxas info    : Function properties for rms_f32\n"
    "ptxas         .     24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 1 barriers, 132 bytes smem, 400 bytes cmem[0]\n";

TEST(PtxasReportTest, ParsesResourcesPerEntry) {
  auto r = parse_ptxas_report(kPtxasLog);
  ASSERT_EQ(r.count("rms_f32"), 1u);
  const auto& f = r.at("rms_f32");
  EXPECT_EQ(f.registers, 40);
  EXPECT_EQ(f.barriers, 1);
  EXPECT_EQ(f.stack_frame_bytes, 24);
  EXPECT_EQ(f.spill_store_bytes, 8);
  EXPECT_EQ(f.spill_load_bytes, 4);
  EXPECT_EQ(f.smem_bytes, 132);
}

TEST(SassSummaryTest, CountsLocalTrafficAndWidestAccess) {
  const char* sass = "\t\tFunction : rms_f32\n"
                     "        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;\n"
                     "        /*0020*/                   STL [R1], R4 ;\n"
                     "        /*0030*/                   LDL R5, [R1] ;\n"
                     "        /*0040*/              @P0  STG.E.64 desc[UR4][R6.64], R8 ;\n";
  auto s = parse_sass_summary(sass);
  EXPECT_EQ(s["rms_f32"]["local_loads"], 1);
  EXPECT_EQ(s["rms_f32"]["local_stores"], 1);
  EXPECT_EQ(s["rms_f32"]["widest_global_load_bits"], 128);
  EXPECT_EQ(s["rms_f32"]["widest_global_store_bits"], 64);
}

TEST(SassInspectTest, MissingCuobjdumpIsReportedNotRun) {
  auto s = inspect_sass("cubin", "/nonexistent-cuda");
  EXPECT_EQ(s["status"], "not_run");
  EXPECT_NE(s["reason"].get<std::string>().find("cuobjdump"), std::string::npos);
}

TEST(CandidateBytesTest, NulInvalidUtf8AndOversizeAreNamed) {
  Candidate c{"ok", "{}", 2, 2};
  EXPECT_TRUE(check_candidate_bytes(c).empty());
  c.source = std::string("ab\0cd", 5);
  auto e = check_candidate_bytes(c);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].field, "kernel.cu");
  EXPECT_NE(e[0].message.find("NUL byte at offset 2"), std::string::npos);
  c.source = "ok";
  c.manifest_text = "{\"a\": \"\xC3\x28\"}";
  e = check_candidate_bytes(c);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].field, "manifest.json");
  EXPECT_NE(e[0].message.find("not valid UTF-8"), std::string::npos);
  c.manifest_text = "{}";
  c.source_file_bytes = op::kMaxSourceBytes + 1;
  e = check_candidate_bytes(c);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].message.find("the limit is 262144 bytes"), std::string::npos);
}

TEST(Utf8Test, RejectsOverlongsAndSurrogates) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));     // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80")); // surrogate
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));     // truncated
}

} // namespace
} // namespace kloop::evaluator
