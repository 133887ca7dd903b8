// The static gate's PTX rules (evaluator/ptx_rules.cpp, evaluator/static_inspection.cpp), one test
// per rule, each with a negative twin: the construct is found, named and located, and the nearest
// legitimate spelling of it is not. The PTX is the rules' input language (NVRTC's output, and what
// a candidate writes in inline asm); the same rules on NVRTC's real output are in
// build_integration_test.cpp and the precision/defect corpus test.
#include <gtest/gtest.h>

#include "evaluator/ptx_module.h"
#include "evaluator/static_inspection.h"
#include "kernels/rmsnorm/operator.h"

namespace kloop::evaluator {
namespace {

// A weighted_rmsnorm/1 manifest of one variant whose float32 entry point is rms_f32.
op::Manifest f32_manifest() {
  op::Manifest m;
  m.variants.emplace_back().entry_points[DType::kFloat32] = "rms_f32";
  return m;
}

std::vector<PtxFinding> findings_of(std::string_view ptx, const op::Manifest& m) {
  return check_ptx(ptx, rmsnorm::declaration(), m);
}

PtxInspection inspection_of(std::string_view ptx, const op::Manifest& m) {
  return inspect_ptx(ptx, rmsnorm::declaration(), m);
}

// A module: `decls` at module scope, then rms_f32 (the contract's parameters) with `body`.
std::string module(const std::string& decls, const std::string& body) {
  return ".version 9.0\n.target sm_90\n.address_size 64\n" + decls +
         ".visible .entry rms_f32(\n"
         "\t.param .u64 .ptr .global .align 4 rms_f32_param_0,\n"
         "\t.param .u64 rms_f32_param_1,\n\t.param .u64 rms_f32_param_2,\n"
         "\t.param .u64 rms_f32_param_3,\n\t.param .u32 rms_f32_param_4,\n"
         "\t.param .u64 rms_f32_param_5,\n\t.param .u64 rms_f32_param_6,\n"
         "\t.param .f32 rms_f32_param_7\n)\n.maxntid 256, 1, 1\n{\n"
         "\t.reg .pred %p<4>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<20>;\n"
         "\tld.param.u64 %rd10, [rms_f32_param_2];\n" +
         body + "\tret;\n}\n";
}

std::vector<std::string> kinds(const std::vector<PtxFinding>& f) {
  std::vector<std::string> k;
  for (const auto& x : f)
    k.push_back(x.kind);
  return k;
}

std::vector<std::string> kinds_of(const std::string& ptx) {
  return kinds(findings_of(ptx, f32_manifest()));
}

const std::string kCounter = ".visible .global .align 4 .u32 counter;\n";

// --- module-scope state -----------------------------------------------------------------------

TEST(PtxModuleStateTest, DirectStoreToASymbolIsWritableState) {
  const std::string ptx = module(kCounter, "\tst.global.u32 [counter+4], %r1;\n");
  const auto f = findings_of(ptx, f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"module_state"});
  EXPECT_NE(f[0].message.find("'counter'"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("st.global.u32"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("PTX line " + std::to_string(f[0].line)), std::string::npos);
  // Twin: the same variable only read.
  EXPECT_TRUE(kinds_of(module(kCounter, "\tld.global.u32 %r1, [counter+4];\n")).empty());
}

TEST(PtxModuleStateTest, AtomicThroughADerivedAddressIsWritableState) {
  const std::string chain = "\tmov.u64 %rd1, counter;\n\tcvta.global.u64 %rd2, %rd1;\n"
                            "\tmul.wide.u32 %rd3, %r2, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
                            "\tselp.b64 %rd5, %rd4, %rd2, %p1;\n";
  EXPECT_EQ(kinds_of(module(kCounter, chain + "\tatom.add.u32 %r3, [%rd5], 1;\n")),
            std::vector<std::string>{"module_state"});
  EXPECT_EQ(kinds_of(module(kCounter, chain + "\tred.global.add.u32 [%rd5+8], 1;\n")),
            std::vector<std::string>{"module_state"});
  // Twin: the derived address is only loaded from (a table lookup) and prefetched.
  EXPECT_TRUE(
      kinds_of(module(kCounter, chain + "\tld.u32 %r3, [%rd5];\n\tprefetch.global.L2 [%rd5];\n"))
          .empty());
}

TEST(PtxModuleStateTest, AnAddressStoredToMemoryEscapes) {
  const std::string take = "\tmov.u64 %rd1, counter;\n\tcvta.global.u64 %rd2, %rd1;\n";
  const auto f =
      findings_of(module(kCounter, take + "\tst.global.u64 [%rd10], %rd2;\n"), f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"module_state"});
  EXPECT_NE(f[0].message.find("stored to memory"), std::string::npos) << f[0].message;
  // Twin: a value loaded through the address is stored, not the address.
  EXPECT_TRUE(
      kinds_of(module(kCounter, take + "\tld.u32 %r1, [%rd2];\n\tst.global.u32 [%rd10], %r1;\n"))
          .empty());
}

TEST(PtxModuleStateTest, AnAddressPassedToACallEscapesExceptToAssertAndPrintf) {
  const std::string decls = kCounter + ".visible .global .align 1 .b8 $str[3] = {104, 105, 0};\n"
                                       ".func use_pointer(.param .b64 use_pointer_param_0)\n{\n"
                                       "\tret;\n}\n"
                                       ".extern .func (.param .b32 func_retval0) vprintf(\n"
                                       "\t.param .b64 vprintf_param_0, .param .b64 p1\n);\n";
  const std::string call_user = "\tmov.u64 %rd1, counter;\n\t{ // callseq 0, 0\n"
                                "\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd1;\n"
                                "\tcall.uni \n\tuse_pointer, \n\t(\n\tparam0\n\t);\n\t}\n";
  const auto f = findings_of(module(decls, call_user), f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"module_state"});
  EXPECT_NE(f[0].message.find("passed to 'use_pointer'"), std::string::npos) << f[0].message;
  // Twin (the string exemption): a string passed to vprintf is read-only data; only printf itself
  // is found.
  const std::string call_printf = "\tmov.u64 %rd1, $str;\n\tcvta.global.u64 %rd2, %rd1;\n"
                                  "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd2;\n"
                                  "\t.param .b64 param1;\n\tst.param.b64 [param1+0], 0;\n"
                                  "\t.param .b32 retval0;\n"
                                  "\tcall.uni (retval0), vprintf, (param0, param1);\n\t}\n";
  EXPECT_EQ(kinds_of(module(decls, call_printf)), std::vector<std::string>{"printf"});
}

TEST(PtxModuleStateTest, WritesThroughAPointerTableReachTheTargets) {
  const std::string decls =
      kCounter + ".visible .global .align 8 .u64 ptrs[1] = {generic(counter)};\n";
  const std::string load = "\tmov.u64 %rd1, ptrs;\n\tld.global.u64 %rd2, [%rd1];\n";
  const auto f = findings_of(module(decls, load + "\tst.u32 [%rd2], %r1;\n"), f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"module_state"});
  EXPECT_NE(f[0].message.find("'counter'"), std::string::npos) << f[0].message;
  // Twin: the pointer loaded from the table is only read through.
  EXPECT_TRUE(kinds_of(module(decls, load + "\tld.u32 %r1, [%rd2];\n")).empty());
}

TEST(PtxModuleStateTest, AnEscapingConstPointerTableLetsItsTargetsBeWritten) {
  const std::string decls = kCounter + ".const .align 8 .u64 table[1] = {generic(counter)};\n" +
                            ".func use_pointer(.param .b64 p0)\n{\n\tret;\n}\n";
  const std::string pass = "\tmov.u64 %rd1, table;\n\t{\n\t.param .b64 param0;\n"
                           "\tst.param.b64 [param0+0], %rd1;\n\tcall.uni use_pointer, (param0);\n"
                           "\t}\n";
  const auto f = findings_of(module(decls, pass), f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"module_state"});
  EXPECT_NE(f[0].message.find("stored in 'table'"), std::string::npos) << f[0].message;
  // Twin: the table read in place (ld.const), its target only read through.
  EXPECT_TRUE(
      kinds_of(module(decls, "\tld.const.u64 %rd2, [table];\n\tld.u32 %r1, [%rd2];\n")).empty());
}

TEST(PtxModuleStateTest, ExternGlobalIsRejectedButExternSharedIsNot) {
  const auto f =
      findings_of(module(".extern .global .align 4 .u32 elsewhere;\n", ""), f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"module_state"});
  EXPECT_NE(f[0].message.find(".extern"), std::string::npos) << f[0].message;
  // Twin: `extern __shared__` dynamic shared memory is per block, never module state.
  EXPECT_TRUE(kinds_of(module(".extern .shared .align 16 .b8 smem[];\n",
                              "\tmov.u32 %r1, smem;\n\tst.shared.f32 [%r1], %f1;\n"))
                  .empty());
}

TEST(PtxModuleStateTest, WeakGlobalIsJudgedByItsWrites) {
  const std::string weak = ".weak .global .align 4 .u32 _ZN6TraitsIfE5widthE = 4;\n";
  EXPECT_EQ(kinds_of(module(weak, "\tst.global.u32 [_ZN6TraitsIfE5widthE], %r1;\n")),
            std::vector<std::string>{"module_state"});
  // Twin: a static constexpr member (NVRTC emits it .weak/.global, initialised) that is only read.
  EXPECT_TRUE(kinds_of(module(weak, "\tld.global.u32 %r1, [_ZN6TraitsIfE5widthE];\n")).empty());
}

TEST(PtxModuleStateTest, ConstAndSharedSymbolsAreNeverModuleState) {
  const std::string decls = ".const .align 4 .f32 cscale = 0f3F800000;\n"
                            ".shared .align 4 .b8 red[128];\n";
  EXPECT_TRUE(kinds_of(module(decls, "\tld.const.f32 %f1, [cscale];\n"
                                     "\tst.shared.f32 [red], %f1;\n"))
                  .empty());
}

TEST(PtxModuleStateTest, ReadOnlyDataIsListedAsReadOnly) {
  const std::string decls =
      ".global .align 4 .b8 table[8] = {0, 0, 128, 63, 0, 0, 0, 64};\n" + kCounter;
  const auto ins = inspection_of(
      module(decls, "\tld.global.f32 %f1, [table];\n\tst.global.u32 [counter], %r1;\n"),
      f32_manifest());
  ASSERT_EQ(ins.module_data.size(), 2u);
  EXPECT_EQ(ins.module_data[0].name, "table");
  EXPECT_FALSE(ins.module_data[0].writable);
  EXPECT_EQ(ins.module_data[1].name, "counter");
  EXPECT_TRUE(ins.module_data[1].writable);
  EXPECT_GT(ins.module_data[1].write_line, ins.module_data[1].line);
}

// --- clock and timer reads --------------------------------------------------------------------

TEST(PtxClockTest, EveryClockRegisterIsFound) {
  for (const char* reg : {"%clock", "%clock64", "%clock_hi"}) {
    const std::string type = std::string(reg) == "%clock64" ? "u64 %rd1" : "u32 %r1";
    EXPECT_EQ(kinds_of(module("", "\tmov." + type + ", " + reg + ";\n")),
              std::vector<std::string>{"clock"})
        << reg;
  }
  // Twin: mentioned in a comment, and a register whose name starts with "clock".
  EXPECT_TRUE(kinds_of(module("", "\t// mov.u64 %rd1, %clock64;\n\t.reg .b32 %clock_hint;\n"
                                  "\tmov.u32 %clock_hint, 1;\n"))
                  .empty());
}

TEST(PtxClockTest, EveryGlobaltimerRegisterIsFound) {
  for (const char* reg : {"%globaltimer", "%globaltimer_lo", "%globaltimer_hi"}) {
    const std::string type = std::string(reg) == "%globaltimer" ? "u64 %rd1" : "u32 %r1";
    EXPECT_EQ(kinds_of(module("", "\tmov." + type + ", " + reg + ";\n")),
              std::vector<std::string>{"globaltimer"})
        << reg;
  }
  // Twin: only in a comment.
  EXPECT_TRUE(kinds_of(module("", "\t/* mov.u64 %rd1, %globaltimer; */\n")).empty());
}

// --- abort: trap, brkpt, assert ---------------------------------------------------------------

TEST(PtxAbortTest, TrapPlainAndPredicatedAndBrkptAreFound) {
  EXPECT_EQ(kinds_of(module("", "\ttrap;\n")), std::vector<std::string>{"trap"});
  EXPECT_EQ(kinds_of(module("", "\t@%p1 trap;\n")), std::vector<std::string>{"trap"});
  EXPECT_EQ(kinds_of(module("", "\t@!%p2 trap;\n")), std::vector<std::string>{"trap"});
  EXPECT_EQ(kinds_of(module("", "$L__BB0_3:\n\tbrkpt;\n")), std::vector<std::string>{"brkpt"});
  // Twin: a label named trap, a commented trap and a module function named trap_handler.
  EXPECT_TRUE(kinds_of(module(".func trap_handler()\n{\n\tret;\n}\n",
                              "trap:\n\t// trap;\n\tcall.uni trap_handler, ();\n"))
                  .empty());
}

TEST(PtxAbortTest, DeviceAssertIsNamedByItsCallee) {
  const std::string decls = ".extern .func __assertfail(\n\t.param .b64 a0,\n\t.param .b64 a1,\n"
                            "\t.param .b32 a2,\n\t.param .b64 a3,\n\t.param .b64 a4\n);\n"
                            ".global .align 1 .b8 __unnamed_1[4] = {114, 109, 115, 0};\n";
  const std::string call = "\tmov.u64 %rd1, __unnamed_1;\n\tcvta.global.u64 %rd2, %rd1;\n"
                           "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd2;\n"
                           "\tcall.uni \n\t__assertfail, \n\t(\n\tparam0\n\t);\n\t}\n";
  const auto f = findings_of(module(decls, call), f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"assert"}); // its message string is not state
  EXPECT_NE(f[0].message.find("__assertfail"), std::string::npos);
  EXPECT_NE(f[0].message.find("aborts the CUDA context"), std::string::npos);
  EXPECT_NE(f[0].message.find("-DNDEBUG"), std::string::npos);
  // Twin: declared but never called (the release build compiled the asserts out).
  EXPECT_TRUE(kinds_of(module(decls, "")).empty());
}

// --- device heap and printf -------------------------------------------------------------------

TEST(PtxHeapTest, MallocFreeAndPrintfCallsAreFound) {
  const std::string decls =
      ".extern .func (.param .b64 func_retval0) malloc(\n\t.param .b64 malloc_param_0\n);\n"
      ".extern .func free(\n\t.param .b64 free_param_0\n);\n"
      ".extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);\n";
  const std::string calls = "\t{\n\t.param .b64 param0;\n\t.param .b64 retval0;\n"
                            "\tcall.uni (retval0), malloc, (param0);\n\t}\n"
                            "\t{\n\t.param .b64 param0;\n\tcall.uni free, (param0);\n\t}\n"
                            "\t{\n\t.param .b64 param0;\n\t.param .b64 param1;\n"
                            "\t.param .b32 retval0;\n"
                            "\tcall.uni (retval0), vprintf, (param0, param1);\n\t}\n";
  EXPECT_EQ(kinds_of(module(decls, calls)), (std::vector<std::string>{"malloc", "free", "printf"}));
  // Twin: the declarations alone (no call), and the module's own function named free_slot.
  EXPECT_TRUE(
      kinds_of(module(decls + ".func free_slot()\n{\n\tret;\n}\n", "\tcall.uni free_slot, ();\n"))
          .empty());
}

// --- entry points -----------------------------------------------------------------------------

TEST(PtxEntryTest, MissingEntryNamesTheKernelsTheModuleDefines) {
  auto m = f32_manifest();
  m.variants[0].entry_points[DType::kFloat16] = "rms_f16";
  const std::string ptx =
      module("", "") + ".visible .entry _Z7rms_f16PK6__halfS1_PS_xixxf(\n\t.param .u64 p0\n)\n{\n"
                       "\tret;\n}\n";
  const auto f = findings_of(ptx, m);
  ASSERT_EQ(kinds(f), std::vector<std::string>{"missing_entry"});
  EXPECT_EQ(f[0].line, 0);
  const std::string& msg = f[0].message;
  EXPECT_NE(msg.find("entry_points.float16 = \"rms_f16\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("rms_f32, _Z7rms_f16PK6__halfS1_PS_xixxf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("with C++ linkage"), std::string::npos) << msg;
  EXPECT_NE(msg.find("extern \"C\""), std::string::npos) << msg;
  // Twin: the manifest names only what the module has.
  EXPECT_TRUE(findings_of(module("", ""), f32_manifest()).empty());
}

// Format 2: the finding names the variant's own field, which the manifest really has.
TEST(PtxEntryTest, MissingEntryOfAVariantNamesTheVariantsField) {
  op::Manifest m = f32_manifest();
  m.format = 2;
  m.variants[0].name = "narrow";
  op::Variant& wide = m.variants.emplace_back();
  wide.name = "wide";
  wide.entry_points[DType::kFloat16] = "wide_f16";
  const auto f = findings_of(module("", ""), m);
  ASSERT_EQ(kinds(f), std::vector<std::string>{"missing_entry"});
  EXPECT_NE(f[0].message.find("manifest variants[1].entry_points.float16 (variant 'wide') = "
                              "\"wide_f16\""),
            std::string::npos)
      << f[0].message;
  // Twin: format 1 keeps its top-level path.
  op::Manifest one = f32_manifest();
  one.variants[0].entry_points[DType::kFloat16] = "wide_f16";
  const auto g = findings_of(module("", ""), one);
  ASSERT_EQ(kinds(g), std::vector<std::string>{"missing_entry"});
  EXPECT_NE(g[0].message.find("manifest entry_points.float16 = \"wide_f16\""), std::string::npos)
      << g[0].message;
}

// A kernel of that name inside a namespace (C++ linkage) gets the extern "C" hint too.
TEST(PtxEntryTest, NamespacedKernelOfTheEntrysNameGetsTheExternCHint) {
  auto m = f32_manifest();
  m.variants[0].entry_points[DType::kFloat16] = "rms_f16";
  const std::string ptx = module("", "") + ".visible .entry _ZN3lib7rms_f16EPKfPfxixxf(\n\t.param "
                                           ".u64 p0\n)\n{\n\tret;\n}\n";
  const auto f = findings_of(ptx, m);
  ASSERT_EQ(kinds(f), std::vector<std::string>{"missing_entry"});
  EXPECT_NE(f[0].message.find("with C++ linkage as _ZN3lib7rms_f16EPKfPfxixxf (lib::rms_f16("),
            std::string::npos)
      << f[0].message;
  // Twin: a kernel whose name only ends like the entry's gets no hint.
  const std::string other = module("", "") + ".visible .entry _ZN3lib8xrms_f16EPKfPfxixxf(\n\t"
                                             ".param .u64 p0\n)\n{\n\tret;\n}\n";
  const auto g = findings_of(other, m);
  ASSERT_EQ(kinds(g), std::vector<std::string>{"missing_entry"});
  EXPECT_EQ(g[0].message.find("C++ linkage"), std::string::npos) << g[0].message;
}

TEST(PtxEntryTest, WrongParameterListIsASignatureFinding) {
  const std::string ptx = ".visible .entry rms_f32(\n\t.param .u64 p0,\n\t.param .u64 p1\n)\n"
                          "{\n\tret;\n}\n";
  const auto f = findings_of(ptx, f32_manifest());
  ASSERT_EQ(kinds(f), std::vector<std::string>{"signature"});
  EXPECT_EQ(f[0].line, 1);
  PtxEntry e{"k", 3, {".u64", ".u64", ".u64", ".u64", ".u32", ".u64", ".u64", ".f32"}, ""};
  EXPECT_EQ(contract_signature_problem(e), "");
  e.param_types[7] = ".b8[16]"; // an aggregate where eps belongs
  EXPECT_NE(contract_signature_problem(e).find(".b8[16]"), std::string::npos);
  EXPECT_NE(contract_signature_problem(e).find("parameter 8 ('float eps') is .b8[16] in the PTX"),
            std::string::npos)
      << contract_signature_problem(e);
  e.param_types[7] = ".f32";
  e.param_types[3] = ".u32"; // int rows where the contract has long long rows
  EXPECT_NE(contract_signature_problem(e).find("parameter 4 ('long long rows') is .u32"),
            std::string::npos)
      << contract_signature_problem(e);
  e.param_types.pop_back();
  EXPECT_NE(contract_signature_problem(e).find("7 parameters where the contract has 8"),
            std::string::npos)
      << contract_signature_problem(e);
}

// __launch_bounds__ below the manifest's block size: the launch would fail, so the static gate says
// so from the PTX header's .maxntid (or .reqntid: exactly that many threads).
TEST(PtxLaunchBoundsTest, BlockLargerThanTheLaunchBoundsIsALaunchBoundsFinding) {
  op::Manifest m = f32_manifest(); // module(): .maxntid 256, 1, 1
  m.variants[0].launch.block_threads = 512;
  const auto f = findings_of(module("", ""), m);
  ASSERT_EQ(kinds(f), std::vector<std::string>{"launch_bounds"});
  EXPECT_EQ(f[0].line, 4);
  EXPECT_NE(f[0].message.find("at most 256 threads per block"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("launch.block_threads = 512"), std::string::npos) << f[0].message;
  // Twins: the bound itself and fewer threads launch.
  for (int block : {256, 128}) {
    m.variants[0].launch.block_threads = block;
    EXPECT_TRUE(findings_of(module("", ""), m).empty()) << block;
  }
  // .reqntid 128, 2, 1 requires exactly 256 threads.
  std::string req = module("", "");
  req.replace(req.find(".maxntid 256, 1, 1"), 18, ".reqntid 128, 2, 1");
  m.variants[0].launch.block_threads = 256;
  EXPECT_TRUE(findings_of(req, m).empty());
  m.variants[0].launch.block_threads = 128;
  const auto g = findings_of(req, m);
  ASSERT_EQ(kinds(g), std::vector<std::string>{"launch_bounds"});
  EXPECT_NE(g[0].message.find("requires exactly 256 threads"), std::string::npos) << g[0].message;
  // Format 2 names the variant's own launch field.
  op::Manifest two = f32_manifest();
  two.format = 2;
  two.variants[0].launch.block_threads = 1024;
  const auto h = findings_of(module("", ""), two);
  ASSERT_EQ(kinds(h), std::vector<std::string>{"launch_bounds"});
  EXPECT_NE(h[0].message.find("variants[0].launch.block_threads = 1024"), std::string::npos)
      << h[0].message;
}

TEST(PtxEntryTest, KernelsTheManifestDoesNotNameAreListed) {
  const std::string ptx =
      module("", "") + ".weak .entry _ZN3cub6detail11EmptyKernelIvEEvv()\n{\n\tret;\n}\n";
  const auto ins = inspection_of(ptx, f32_manifest());
  EXPECT_TRUE(ins.findings.empty());
  ASSERT_EQ(ins.entries.size(), 2u);
  EXPECT_EQ(ins.unlisted_entries, std::vector<std::string>{"_ZN3cub6detail11EmptyKernelIvEEvv"});
  EXPECT_EQ(ins.entries[1].demangled, "void cub::detail::EmptyKernel<void>()");
}

// --- the statement reader ---------------------------------------------------------------------

TEST(PtxStatementsTest, BracesOfInitialisersAndVectorsAreNoScopes) {
  const std::string ptx = ".global .align 4 .b8 t[4] = {1, 2, 3, 4};\n"
                          ".visible .entry k()\n{\n"
                          "\tld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];\n"
                          "$L__BB0_1:\n\tmov.b64 {%r5, %r6}, %rd2;\n"
                          "\tcall.uni \n\tf, \n\t(\n\tparam0\n\t);\n}\n";
  const auto mod = ptx::parse_module(ptx);
  ASSERT_EQ(mod.variables.size(), 1u);
  EXPECT_EQ(mod.variables[0].name, "t");
  EXPECT_TRUE(mod.variables[0].initialised);
  ASSERT_EQ(mod.functions.size(), 1u);
  const auto& body = mod.functions[0].body;
  ASSERT_EQ(body.size(), 3u);
  EXPECT_EQ(body[0].text, "ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1]");
  EXPECT_EQ(body[1].text, "mov.b64 {%r5, %r6}, %rd2"); // the label is dropped
  EXPECT_EQ(body[1].line, 6);
  EXPECT_EQ(ptx::parse_instruction(body[2].text).operands,
            (std::vector<std::string>{"f", "( param0 )"}));
}

} // namespace
} // namespace kloop::evaluator
