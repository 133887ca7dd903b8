// CPU-only checks of the build gate's helpers: #include pre-scan, path redaction, diagnostic
// reduction, ptxas report parsing, PTX checks on canned PTX text, candidate byte checks.
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

TEST(IncludeScanTest, ToolkitHeadersAreAccepted) {
  if (!has_toolkit()) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda";
  EXPECT_TRUE(scan_includes("#include <cuda_fp16.h>\n#  include \"cuda_bf16.h\"\n", kInc).empty());
}

TEST(IncludeScanTest, EscapesAreRejectedWithLineNumbers) {
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
  auto p = scan_includes(src, kInc);
  std::vector<int> lines;
  for (const auto& x : p)
    lines.push_back(x.line);
  const std::vector<int> want = has_toolkit() ? std::vector<int>{2, 3, 4, 5, 7, 8, 9, 11}
                                              : std::vector<int>{1, 2, 3, 4, 5, 7, 8, 9, 11};
  EXPECT_EQ(lines, want);
  EXPECT_NE(p.at(has_toolkit() ? 0 : 1).message.find("absolute"), std::string::npos);
  EXPECT_NE(p.at(has_toolkit() ? 1 : 2).message.find("'..'"), std::string::npos);
}

TEST(IncludeScanTest, SymlinkOutOfIncludeDirIsRejected) {
  auto dir = std::filesystem::temp_directory_path() / "kloop-scan-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "inc");
  std::ofstream(dir / "secret.h") << "x";
  std::filesystem::create_symlink(dir / "secret.h", dir / "inc" / "link.h");
  std::ofstream(dir / "inc" / "ok.h") << "x";
  auto p = scan_includes("#include <link.h>\n#include <ok.h>\n", (dir / "inc").string());
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].line, 1);
  EXPECT_NE(p[0].message.find("outside the CUDA include directory"), std::string::npos);
  std::filesystem::remove_all(dir);
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

rmsnorm::Manifest f32_manifest() {
  rmsnorm::Manifest m;
  m.entry_points[DType::kFloat32] = "rms_f32";
  return m;
}

const std::string kGoodEntry = ".visible .entry rms_f32(\n"
                               "\t.param .u64 .ptr .global .align 4 rms_f32_param_0,\n"
                               "\t.param .u64 rms_f32_param_1,\n\t.param .u64 rms_f32_param_2,\n"
                               "\t.param .u64 rms_f32_param_3,\n\t.param .u32 rms_f32_param_4,\n"
                               "\t.param .u64 rms_f32_param_5,\n\t.param .u64 rms_f32_param_6,\n"
                               "\t.param .f32 rms_f32_param_7\n)\n{\n";

std::vector<std::string> kinds(const std::vector<PtxFinding>& f) {
  std::vector<std::string> k;
  for (const auto& x : f)
    k.push_back(x.kind);
  return k;
}

TEST(PtxCheckTest, CleanModulePasses) {
  const std::string ptx = ".version 9.0\n.target sm_90\n"
                          ".shared .align 4 .b8 smem[128];\n"
                          ".const .align 4 .u32 table[4] = {1, 2, 3, 4};\n" +
                          kGoodEntry + "\tld.global.f32 %f1, [%rd1];\n\tret;\n}\n";
  EXPECT_TRUE(check_ptx(ptx, f32_manifest()).empty());
}

TEST(PtxCheckTest, EachForbiddenConstructIsNamedWithItsLine) {
  const std::string ptx = ".version 9.0\n"                                                    // 1
                          ".global .align 4 .u32 counter;\n"                                  // 2
                          ".extern .func (.param .b32 func_retval0) vprintf(\n"               // 3
                          ".param .b64 a, .param .b64 b);\n"                                  // 4
                          ".extern .func (.param .b64 func_retval0) malloc(.param .b64 s);\n" // 5
                          + kGoodEntry +                            // 6..16
                          "\tmov.u64 %rd1, %clock64;\n"             // 17
                          "\tmov.u64 %rd2, %globaltimer;\n"         // 18
                          "\tcall.uni (retval0), free, (param0);\n" // 19
                          "\t@%p1 trap;\n"                          // 20
                          "\tbrkpt;\n"                              // 21
                          "\tret;\n}\n";
  auto f = check_ptx(ptx, f32_manifest());
  std::vector<std::string> want = {"module_state", "printf", "malloc", "clock",
                                   "globaltimer",  "free",   "trap",   "brkpt"};
  EXPECT_EQ(kinds(f), want);
  std::vector<int> lines;
  for (const auto& x : f)
    lines.push_back(x.line);
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 5, 17, 18, 19, 20, 21}));
  EXPECT_NE(f[0].message.find("PTX line 2"), std::string::npos);
  EXPECT_NE(f[0].message.find("counter"), std::string::npos);
}

TEST(PtxCheckTest, WrongSignatureAndMissingEntryAreFailures) {
  auto m = f32_manifest();
  m.entry_points[DType::kFloat16] = "rms_f16";
  const std::string ptx =
      ".visible .entry rms_f32(\n\t.param .u64 p0,\n\t.param .u64 p1\n)\n{\n}\n";
  auto f = check_ptx(ptx, m);
  EXPECT_EQ(kinds(f), (std::vector<std::string>{"signature", "missing_entry"}));
  EXPECT_EQ(f[0].line, 1);
}

TEST(PtxCheckTest, FunctionLocalGlobalAccessIsNotModuleState) {
  const std::string ptx = kGoodEntry + "\tst.global.f32 [%rd1], %f1;\n\tret;\n}\n";
  EXPECT_TRUE(check_ptx(ptx, f32_manifest()).empty());
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
  c.source_file_bytes = rmsnorm::kMaxSourceBytes + 1;
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
