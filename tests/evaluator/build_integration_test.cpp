// Real NVRTC through the real sandbox (no GPU): the good fixture builds and passes static
// inspection; each forbidden construct is caught; each #include escape fails without leaking a
// byte of the target file; a compile bomb is stopped; malformed manifests give named errors.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
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
                                                    {"clock64", "clock"},
                                                    {"globaltimer", "globaltimer"},
                                                    {"malloc", "malloc"},
                                                    {"printf", "printf"},
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
