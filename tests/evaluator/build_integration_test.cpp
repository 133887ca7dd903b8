// Real NVRTC through the real sandbox (no GPU): the good fixture builds and passes static
// inspection; each forbidden construct is caught; each #include escape fails without leaking a
// byte of the target file; a compile bomb is stopped; malformed manifests give named errors.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "evaluator/build.h"
#include "evaluator/pipeline.h"
#include "evaluator/static_inspection.h"
#include "tests/support/sandbox_check.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;
const fs::path kFixtures = fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures";
constexpr const char* kMarker = "KLOOP-SECRET-MARKER-7f3a9c2e51";

using test_support::read_file;

Candidate candidate_from(const std::string& source, const std::string& manifest) {
  return Candidate{source, manifest, source.size(), manifest.size()};
}

// A private temp folder with a planted secret file, removed afterwards.
class PlantedDir {
public:
  explicit PlantedDir(const std::string& tag) : tmp_("plant-" + tag), root_(tmp_.dir()) {}
  fs::path plant(const std::string& rel) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << "#error " << kMarker << "\nint " << kMarker << "_x;\n";
    return root_ / rel;
  }
  const fs::path& root() const { return root_; }

private:
  test_support::TempDir tmp_;
  fs::path root_;
};

std::string everything(const Evaluation& ev) {
  std::string s = ev.report.to_json().dump();
  if (ev.build) {
    s += ev.build->log + ev.build->log_ptx;
    for (const auto& c : ev.build->tool_calls)
      s += c.stdout_text + c.stderr_text;
  }
  return s;
}

class BuildIntegrationTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!fs::exists("/usr/local/cuda/include/cuda_fp16.h"))
      GTEST_SKIP() << "CUDA toolkit not installed at /usr/local/cuda";
    KLOOP_REQUIRE_SANDBOX_OR_SKIP();
  }
  Evaluation evaluate(const Candidate& c, BuildOptions b = {}) {
    EvaluateOptions o;
    o.build = b;
    NoDeviceGates dev;
    return evaluate_candidate(c, o, dev);
  }
  std::string forbidden_manifest = read_file(kFixtures / "forbidden/manifest.json");
};

TEST_F(BuildIntegrationTest, GoodCandidateBuildsAndIsPendingDeviceValidation) {
  auto c = candidate_from(read_file(kFixtures / "good/kernel.cu"),
                          read_file(kFixtures / "good/manifest.json"));
  auto ev = evaluate(c);
  ASSERT_EQ(ev.report.find("build")->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  EXPECT_EQ(ev.report.find("static")->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  // A pass whose SASS summary did not run (no cuobjdump here) says so; a full pass says nothing.
  const GateResult* st = ev.report.find("static");
  if (st->evidence["sass"]["status"] == "ran")
    EXPECT_EQ(st->reason, "");
  else
    EXPECT_EQ(st->reason.rfind("PTX checks passed; SASS summary not run: ", 0), 0u) << st->reason;
  EXPECT_EQ(ev.report.find("correctness")->status, GateStatus::kNotRun);
  EXPECT_EQ(ev.report.find("correctness")->reason, "GPU worker not built");
  EXPECT_EQ(ev.report.verdict, Verdict::kPendingDeviceValidation);
  for (auto a : {"kernel.cu", "manifest.json", "kernel.ptx", "kernel.cubin"})
    EXPECT_EQ(ev.report.artifacts.at(a).size(), 64u) << a;
  const auto& res = ev.report.find("static")->evidence["resources"];
  for (auto e : {"rms_f32", "rms_f16", "rms_bf16"}) {
    ASSERT_TRUE(res.contains(e)) << res.dump();
    EXPECT_GT(res[e]["registers"].get<int>(), 0);
    EXPECT_EQ(res[e]["spill_store_bytes"], 0);
  }
  const auto& b = ev.report.find("build")->evidence;
  EXPECT_EQ(b["sandbox"], "bubblewrap");
  EXPECT_EQ(b["seccomp"], true);
  EXPECT_FALSE(b["nvrtc_version"].get<std::string>().empty());
  ASSERT_EQ(ev.tool_calls.size(), 1u);
  EXPECT_EQ(ev.tool_calls[0].exit_code, 0);
  EXPECT_EQ(ev.build->cubin.substr(1, 3), "ELF");
}

// Candidate format 2 (issue 25): a manifest of two variants over the good fixture's kernels passes
// the contract gate (its dispatch predicate lists both, then the reference), builds, and the
// static gate checks the entry points of every variant against the compiled module.
std::string two_variants(const std::string& second_bf16_entry) {
  return R"({"contract": "weighted_rmsnorm/1", "format": 2, "target": "sm_90", "variants": [
    {"name": "wide", "when": {"h_multiple_of": 8, "alignment_bytes": 16},
     "entry_points": {"float16": "rms_f16", "bfloat16": "rms_bf16"},
     "launch": {"block_threads": 256, "rows_per_block": 1, "grid": "persistent",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}},
    {"name": "rest", "when": {"alignment_bytes": 2},
     "entry_points": {"float32": "rms_f32", "float16": "rms_f16", "bfloat16": ")" +
         second_bf16_entry + R"("},
     "launch": {"block_threads": 128, "rows_per_block": 1, "grid": "per_rows",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}}]})";
}

TEST_F(BuildIntegrationTest, FormatTwoManifestWithTwoVariantsIsPendingDeviceValidation) {
  const std::string source = read_file(kFixtures / "good/kernel.cu");
  auto ev = evaluate(candidate_from(source, two_variants("rms_bf16")));
  const GateResult* contract = ev.report.find("contract");
  ASSERT_EQ(contract->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  const std::string predicate = contract->evidence["dispatch_predicate"];
  EXPECT_NE(predicate.find("v0 wide: dtype in {float16,bfloat16}"), std::string::npos) << predicate;
  EXPECT_NE(predicate.find("v1 rest: dtype in {float32,float16,bfloat16}"), std::string::npos)
      << predicate;
  EXPECT_NE(predicate.find("else reference"), std::string::npos) << predicate;
  ASSERT_EQ(ev.report.find("build")->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  EXPECT_EQ(ev.report.find("static")->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  EXPECT_EQ(ev.report.verdict, Verdict::kPendingDeviceValidation);
  ASSERT_TRUE(ev.manifest.has_value());
  EXPECT_EQ(ev.manifest->variants.size(), 2u);

  // The second variant's bfloat16 entry point is not a kernel of the module: the static gate.
  auto missing = evaluate(candidate_from(source, two_variants("rms_bf16_fast")));
  ASSERT_EQ(missing.report.find("contract")->status, GateStatus::kPass);
  const GateResult* st = missing.report.find("static");
  EXPECT_EQ(st->status, GateStatus::kFail);
  EXPECT_NE(st->reason.find("rms_bf16_fast"), std::string::npos) << st->reason;
  // It names the field the manifest really has: the second variant's entry point.
  EXPECT_NE(st->reason.find("manifest variants[1].entry_points.bfloat16 (variant 'rest')"),
            std::string::npos)
      << st->reason;
  EXPECT_EQ(missing.report.verdict, Verdict::kReject);
}

// Two builds of the same source (each in its own random build directory) give the same PTX and
// cubin bytes, so an auditor can rebuild a stored source and match the receipt's cubin hash. The
// line info names "/kernel.cu", not the build directory.
TEST_F(BuildIntegrationTest, RebuildingTheSameSourceGivesTheSameArtifactHashes) {
  auto c = candidate_from(read_file(kFixtures / "good/kernel.cu"),
                          read_file(kFixtures / "good/manifest.json"));
  const auto a = evaluate(c);
  const auto b = evaluate(c);
  ASSERT_EQ(a.report.find("build")->status, GateStatus::kPass);
  ASSERT_EQ(b.report.find("build")->status, GateStatus::kPass);
  for (auto art : {"kernel.ptx", "kernel.cubin"})
    EXPECT_EQ(a.report.artifacts.at(art), b.report.artifacts.at(art)) << art;
  ASSERT_TRUE(a.build.has_value());
  EXPECT_NE(a.build->ptx.find(".file\t1 \"/kernel.cu\""), std::string::npos)
      << a.build->ptx.substr(0, 600);
}

TEST_F(BuildIntegrationTest, EachForbiddenConstructIsCaughtByTheStaticGate) {
  const std::map<std::string, std::string> cases = {{"device_counter", "module_state"},
                                                    {"local_static", "module_state"},
                                                    {"address_escape", "module_state"},
                                                    {"clock64", "clock"},
                                                    {"globaltimer", "globaltimer"},
                                                    {"malloc", "malloc"},
                                                    {"printf", "printf"},
                                                    {"assert", "assert"},
                                                    {"trap", "trap"}};
  for (const auto& [file, kind] : cases) {
    auto ev = evaluate(
        candidate_from(read_file(kFixtures / ("forbidden/" + file + ".cu")), forbidden_manifest));
    ASSERT_EQ(ev.report.find("build")->status, GateStatus::kPass)
        << file << ": " << ev.report.to_json().dump(2);
    const GateResult* st = ev.report.find("static");
    EXPECT_EQ(st->status, GateStatus::kFail) << file;
    bool found = false;
    for (const auto& f : st->evidence["findings"])
      found = found || f["kind"] == kind;
    EXPECT_TRUE(found) << file << " wants " << kind << ": " << st->evidence["findings"].dump();
    EXPECT_NE(st->reason.find("PTX line"), std::string::npos) << st->reason;
    EXPECT_EQ(ev.report.verdict, Verdict::kReject) << file;
  }
}

TEST_F(BuildIntegrationTest, IncludeEscapesFailWithoutLeakingTheTarget) {
  PlantedDir secret("escape");
  const fs::path etc_like = secret.plant("etc/passwd");
  const fs::path store_blob = secret.plant("store/blobs/ab/cdef0123");
  const fs::path holdout = secret.plant("holdout/suite.json");
  // Relative escapes resolve against the CUDA include dir; plant them where `..` would land too.
  const std::vector<std::pair<std::string, std::string>> attempts = {
      {"absolute path", "#include \"" + etc_like.string() + "\"\n"},
      {"store blob", "#include \"" + store_blob.string() + "\"\n"},
      {"holdout dir", "#include <" + holdout.string() + ">\n"},
      {"dot-dot", "#include \"../../../../../.." + holdout.string() + "\"\n"},
      {"dot-dot in cuda dir", "#include <cuda/../../../../../.." + store_blob.string() + ">\n"},
      {"etc passwd", "#include </etc/passwd>\n"},
  };
  const std::string good = read_file(kFixtures / "good/kernel.cu");
  const std::string manifest = read_file(kFixtures / "good/manifest.json");
  for (const auto& [name, directive] : attempts) {
    auto ev = evaluate(candidate_from(directive + good, manifest));
    const GateResult* b = ev.report.find("build");
    EXPECT_EQ(b->status, GateStatus::kFail) << name;
    EXPECT_NE(b->reason.find("rejected"), std::string::npos) << name << ": " << b->reason;
    EXPECT_EQ(ev.report.verdict, Verdict::kReject) << name;
    EXPECT_EQ(everything(ev).find(kMarker), std::string::npos) << name << " leaked the marker";
    EXPECT_EQ(everything(ev).find("root:x:0"), std::string::npos) << name;
    EXPECT_TRUE(ev.tool_calls.empty()) << name << ": the compiler must never start";
  }
}

// A relative include of a host file (which NVRTC, running from "/", would resolve) names no
// toolkit header: the directive is neutralised, so the file is never opened, and the build fails
// with the pre-scan's reason where the directive is reached.
TEST_F(BuildIntegrationTest, RelativeIncludeOfAHostFileIsNeverOpened) {
  PlantedDir secret("relative");
  const fs::path target = secret.plant("store/secret.h");
  const std::string rel = target.string().substr(1); // "tmp/kloop-plant-.../store/secret.h"
  const std::string good = read_file(kFixtures / "good/kernel.cu");
  auto ev = evaluate(candidate_from("#include \"" + rel + "\"\n" + good,
                                    read_file(kFixtures / "good/manifest.json")));
  const GateResult* b = ev.report.find("build");
  EXPECT_EQ(b->status, GateStatus::kFail) << ev.report.to_json().dump(2);
  EXPECT_NE(b->reason.find("line 1: #include"), std::string::npos) << b->reason;
  EXPECT_NE(b->reason.find("no such CUDA toolkit header"), std::string::npos) << b->reason;
  EXPECT_EQ(everything(ev).find(kMarker), std::string::npos) << "the planted file was read";
}

// Q5: a header in a preprocessor branch that is not compiled is no error; the same header in the
// branch that is compiled fails the build naming the directive and the replacement.
TEST_F(BuildIntegrationTest, IncludesFollowThePreprocessor) {
  const std::string good = read_file(kFixtures / "good/kernel.cu");
  const std::string manifest = read_file(kFixtures / "good/manifest.json");
  const std::string branches = "#if defined(USE_ROCM) || defined(__HIP_PLATFORM_AMD__)\n"
                               "#include <hip/hip_runtime.h>\n#include <hipcub/hipcub.hpp>\n"
                               "#else\n#include <cub/block/block_reduce.cuh>\n#endif\n"
                               "#if __has_include(<cstdint>)\n#include <cstdint>\n#endif\n";
  auto ev = evaluate(candidate_from(branches + good, manifest));
  ASSERT_EQ(ev.report.find("build")->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  EXPECT_EQ(ev.report.find("static")->status, GateStatus::kPass);
  EXPECT_EQ(ev.report.find("build")->evidence["neutralised_includes"].size(), 3u);

  ev = evaluate(candidate_from("#include <cuda_fp16.h>\n#include <cstdint>\n" + good, manifest));
  const GateResult* b = ev.report.find("build");
  ASSERT_EQ(b->status, GateStatus::kFail) << ev.report.to_json().dump(2);
  EXPECT_EQ(b->reason.rfind("kernel.cu line 2: #include <cstdint> rejected: ", 0), 0u) << b->reason;
  EXPECT_NE(b->reason.find("<cuda/std/cstdint>"), std::string::npos) << b->reason;

  ev = evaluate(candidate_from("#include <cub/cub.cuh>\n" + good, manifest));
  b = ev.report.find("build");
  ASSERT_EQ(b->status, GateStatus::kFail) << ev.report.to_json().dump(2);
  EXPECT_NE(b->reason.find("<cub/block/block_reduce.cuh>"), std::string::npos) << b->reason;
}

// Q1/Q2/Q4 on NVRTC's real output: entries from a macro in an extern "C" block; static constexpr
// members, a __device__ const table, a __constant__ scalar and libcu++'s numeric_limits are
// read-only module data; a template kernel the manifest does not name is listed, never an error.
TEST_F(BuildIntegrationTest, ReadOnlyModuleDataAndUnlistedKernelsPass) {
  auto ev = evaluate(candidate_from(read_file(kFixtures / "readonly/kernel.cu"),
                                    read_file(kFixtures / "readonly/manifest.json")));
  ASSERT_EQ(ev.report.find("build")->status, GateStatus::kPass) << ev.report.to_json().dump(2);
  const GateResult* st = ev.report.find("static");
  ASSERT_EQ(st->status, GateStatus::kPass) << st->reason;
  EXPECT_EQ(st->evidence["unlisted_entries"], nlohmann::json::array({"_Z13helper_kernelIfEvPT_"}));
  EXPECT_NE(st->reason.find("never launched: _Z13helper_kernelIfEvPT_"), std::string::npos)
      << st->reason;
  std::set<std::string> read_only;
  for (const auto& u : st->evidence["module_data"]) {
    EXPECT_FALSE(u["writable"].get<bool>()) << u.dump();
    read_only.insert(u["name"].get<std::string>());
  }
  for (auto name : {"kTable", "_ZN6TraitsIfE6kWidthE", "_ZN6TraitsI6__halfE6kWidthE"})
    EXPECT_TRUE(read_only.contains(name)) << name;
  EXPECT_EQ(ev.report.verdict, Verdict::kPendingDeviceValidation);
}

// The manifest may name an entry the module lacks: the contract gate cannot know (the source text
// is not the module), the static gate rejects it and names the kernels the module has.
TEST_F(BuildIntegrationTest, MissingEntryIsRejectedByTheStaticGateNamingTheModulesKernels) {
  std::string m = read_file(kFixtures / "good/manifest.json");
  const std::string from = R"("float16": "rms_f16")";
  ASSERT_NE(m.find(from), std::string::npos);
  m.replace(m.find(from), from.size(), R"("float16": "rms_half")");
  auto ev = evaluate(candidate_from(read_file(kFixtures / "good/kernel.cu"), m));
  EXPECT_EQ(ev.report.find("contract")->status, GateStatus::kPass);
  EXPECT_EQ(ev.report.find("build")->status, GateStatus::kPass);
  const GateResult* st = ev.report.find("static");
  ASSERT_EQ(st->status, GateStatus::kFail);
  EXPECT_EQ(st->evidence["findings"][0]["kind"], "missing_entry");
  EXPECT_NE(st->reason.find("entry_points.float16 = \"rms_half\""), std::string::npos)
      << st->reason;
  EXPECT_NE(st->reason.find("rms_f32, rms_f16, rms_bf16"), std::string::npos) << st->reason;
  EXPECT_EQ(ev.report.verdict, Verdict::kReject);
}

TEST_F(BuildIntegrationTest, SandboxHidesHostFilesEvenWithoutThePrescan) {
  // Defence in depth: hand NVRTC an include of a planted file directly, skipping scan_includes.
  PlantedDir secret("direct");
  const fs::path target = secret.plant("store/secret.h");
  const fs::path build_dir = secret.root() / "build";
  fs::create_directories(build_dir);
  std::ofstream(build_dir / "kernel.cu") << "#include \"" << target.string() << "\"\n"
                                         << "extern \"C\" __global__ void k() {}\n";
  const std::string worker = worker_path("kloop-build-worker");
  const std::string inc = fs::canonical("/usr/local/cuda/include").string();
  const std::string bd = fs::canonical(build_dir).string();
  SandboxSpec spec{
      worker, bd, {inc, "/usr/local/cuda/lib64", fs::canonical("/usr/local/cuda/lib64").string()}};
  SubprocessOptions so;
  so.cwd = bd;
  auto call = run_subprocess(
      sandbox_argv(SandboxKind::kBubblewrap, spec, {worker, "--build-dir", bd, "--include", inc}),
      so);
  EXPECT_EQ(call.exit_code, 1) << call.stderr_text; // compile error: file not found
  const std::string result = read_file(build_dir / "result.json");
  EXPECT_NE(result.find("compile_error"), std::string::npos) << result;
  EXPECT_EQ(result.find(kMarker), std::string::npos) << "sandbox exposed the planted file";
  EXPECT_EQ((call.stdout_text + call.stderr_text).find(kMarker), std::string::npos);
}

TEST_F(BuildIntegrationTest, CompileBombIsStoppedAtTheDeadline) {
  const std::string bomb = read_file(kFixtures / "bomb/kernel.cu");
  BuildOptions b;
  b.deadline = std::chrono::milliseconds(2000);
  const auto t0 = std::chrono::steady_clock::now();
  auto ev = evaluate(candidate_from(bomb, forbidden_manifest), b);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const GateResult* g = ev.report.find("build");
  const bool deadline = g->status == GateStatus::kTimeout &&
                        g->reason.find("deadline 2 s exceeded") != std::string::npos;
  const bool memory =
      g->status == GateStatus::kFail && g->reason.find("memory limit") != std::string::npos;
  EXPECT_TRUE(deadline || memory) << ev.report.to_json().dump(2);
  EXPECT_LT(s, 10.0);
  EXPECT_EQ(ev.report.verdict, Verdict::kReject);
}

TEST_F(BuildIntegrationTest, CompileBombHitsTheMemoryLimit) {
  const std::string bomb = read_file(kFixtures / "bomb/kernel.cu");
  BuildOptions b;
  b.deadline = std::chrono::milliseconds(60000);
  b.address_space_mib = 768;
  auto ev = evaluate(candidate_from(bomb, forbidden_manifest), b);
  const GateResult* g = ev.report.find("build");
  EXPECT_EQ(g->status, GateStatus::kFail) << ev.report.to_json().dump(2);
  EXPECT_NE(g->reason.find("memory limit"), std::string::npos) << g->reason;
}

TEST_F(BuildIntegrationTest, CompileErrorIsReducedAndRedacted) {
  auto ev = evaluate(candidate_from(
      "#include <cuda_fp16.h>\nextern \"C\" __global__ void rms_f32(const float* x, const float* "
      "weight, float* y, long long rows, int H, long long xs, long long ys, float eps) {\n"
      "  y[0] = undefined_name;\n}\n",
      forbidden_manifest));
  const GateResult* g = ev.report.find("build");
  ASSERT_EQ(g->status, GateStatus::kFail) << ev.report.to_json().dump(2);
  const std::string d = g->evidence["diagnostics"];
  EXPECT_NE(d.find("kernel.cu(3): error"), std::string::npos) << d;
  EXPECT_NE(d.find("undefined_name"), std::string::npos) << d;
  EXPECT_EQ(ev.report.to_json().dump().find("/tmp/"), std::string::npos);
  EXPECT_NE(ev.build->log.find("undefined_name"), std::string::npos); // verbatim log kept
}

// A kernel written for nvcc that uses INFINITY: NVRTC has no <math.h>, and the reason says what
// defines it; the suggested include then builds.
TEST_F(BuildIntegrationTest, InfinityWithoutMathHGetsTheLibcuxxHint) {
  const std::string body = "extern \"C\" __global__ void rms_f32(const float* x, const float* "
                           "weight, float* y, long long rows, int H, long long xs, long long ys, "
                           "float eps) {\n  y[0] = -INFINITY;\n}\n";
  auto ev = evaluate(candidate_from(body, forbidden_manifest));
  const GateResult* g = ev.report.find("build");
  ASSERT_EQ(g->status, GateStatus::kFail) << ev.report.to_json().dump(2);
  EXPECT_NE(g->reason.find("identifier \"INFINITY\" is undefined"), std::string::npos) << g->reason;
  EXPECT_NE(g->reason.find("#include <cuda/std/cmath>"), std::string::npos) << g->reason;
  // Twin: with that include the same kernel builds.
  auto fixed = evaluate(candidate_from("#include <cuda/std/cmath>\n" + body, forbidden_manifest));
  EXPECT_EQ(fixed.report.find("build")->status, GateStatus::kPass)
      << fixed.report.find("build")->reason;
}

TEST_F(BuildIntegrationTest, MalformedManifestsGiveNamedContractErrors) {
  const std::string src = read_file(kFixtures / "good/kernel.cu");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("block_threads": 256)", R"("block_threads": 100)"},
      {R"("h_min": 1)", R"("h_min": 70000)"},
      {R"("float16": "rms_f16")", R"("float8": "rms_f16")"},
      {R"("target": "sm_90")", R"("target": "sm_100")"}};
  const std::vector<std::string> fields = {"launch.block_threads", "dispatch.h_min",
                                           "entry_points.float8", "target"};
  const std::string manifest = read_file(kFixtures / "good/manifest.json");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::string m = manifest;
    const auto pos = m.find(cases[i].first);
    ASSERT_NE(pos, std::string::npos) << cases[i].first;
    m.replace(pos, cases[i].first.size(), cases[i].second);
    auto ev = evaluate(candidate_from(src, m));
    const GateResult* g = ev.report.find("contract");
    EXPECT_EQ(g->status, GateStatus::kFail);
    EXPECT_EQ(g->evidence["errors"][0]["field"], fields[i]) << g->evidence.dump();
    EXPECT_EQ(ev.report.find("build")->status, GateStatus::kNotRun);
    EXPECT_EQ(ev.report.verdict, Verdict::kReject);
  }
}

} // namespace
} // namespace kloop::evaluator
