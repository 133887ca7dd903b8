// `kloop evaluate` end to end as a subprocess on this GPU-less machine: the good fixture is
// pending_device_validation (exit 3) with a parseable JSON report; a bad manifest is rejected
// (exit 1); an unreadable folder or an unknown operator is a usage error (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "evaluator/sandbox.h"
#include "evaluator/subprocess.h"
#include "tests/support/sandbox_check.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;
const fs::path kFixtures = fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures";
const std::string kKloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";

ToolCall kloop(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kKloop};
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions o;
  o.deadline = std::chrono::milliseconds(60000);
  return run_subprocess(argv, o);
}

class EvaluateCliTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kKloop)) << kKloop << " not built (the test target depends on it)";
    KLOOP_REQUIRE_SANDBOX_OR_SKIP();
  }
};

TEST_F(EvaluateCliTest, GoodCandidateIsPendingDeviceValidationWithExit3) {
  auto call =
      kloop({"evaluate", "rmsnorm", "--candidate", (kFixtures / "good").string(), "--json"});
  EXPECT_EQ(call.exit_code, 3) << call.stderr_text;
  auto doc = nlohmann::json::parse(call.stdout_text);
  EXPECT_EQ(doc["verdict"], "pending_device_validation");
  ASSERT_EQ(doc["gates"].size(), 7u); // contract, build, static + 4 device gates
  EXPECT_EQ(doc["gates"][0]["name"], "contract");
  EXPECT_EQ(doc["gates"][0]["status"], "pass");
  EXPECT_EQ(doc["gates"][1]["status"], "pass");
  EXPECT_EQ(doc["gates"][2]["name"], "static");
  EXPECT_EQ(doc["gates"][2]["status"], "pass");
  EXPECT_EQ(doc["gates"][3]["status"], "not_run");
  // The same device gates as `kloop optimize`: without a driver the worker reports no device;
  // in a build without CUDA (the ASan tier) the worker itself is missing.
  const std::string reason = doc["gates"][3]["reason"];
  if (fs::exists(fs::path(KLOOP_BINARY_DIR) / "bin/kloop-gpu-worker"))
    EXPECT_EQ(reason.rfind("no CUDA device", 0), 0u) << reason;
  else
    EXPECT_EQ(reason.rfind("GPU worker not built", 0), 0u) << reason;
#if !KLOOP_TEST_BUILT_WITH_CUDA
  // A CUDA-off build names its configuration, not a target it cannot build.
  EXPECT_NE(reason.find("configured with KLOOP_WITH_CUDA=OFF"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("build the 'kloop-gpu-worker' target"), std::string::npos) << reason;
#endif
  EXPECT_EQ(doc["artifacts"]["kernel.cubin"].get<std::string>().size(), 64u);
}

TEST_F(EvaluateCliTest, InTreeBaselinePassesTheCpuGates) {
  // The benchmark baseline must survive kloop's own contract, build and static gates.
  auto call = kloop({"evaluate", "rmsnorm", "--candidate",
                     (fs::path(KLOOP_SOURCE_DIR) / "kernels/rmsnorm/baseline").string(), "--json"});
  EXPECT_EQ(call.exit_code, 3) << call.stdout_text << call.stderr_text;
  auto doc = nlohmann::json::parse(call.stdout_text);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(doc["gates"][i]["status"], "pass") << doc["gates"][i].dump();
}

TEST_F(EvaluateCliTest, HumanOutputIsATableWithTheVerdict) {
  auto call = kloop({"evaluate", "rmsnorm", "--candidate", (kFixtures / "good").string()});
  EXPECT_EQ(call.exit_code, 3);
  EXPECT_NE(call.stdout_text.find("verdict: pending_device_validation"), std::string::npos);
  EXPECT_NE(call.stdout_text.find("static       pass"), std::string::npos) << call.stdout_text;
}

TEST_F(EvaluateCliTest, BadManifestIsRejectedWithExit1) {
  const fs::path dir = fs::temp_directory_path() / "kloop-cli-bad";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kFixtures / "good/kernel.cu", dir / "kernel.cu");
  std::ofstream(dir / "manifest.json")
      << R"({"contract":"weighted_rmsnorm/1","entry_points":{"float32":"rms_f32"},)"
      << R"("launch":{"block_threads":100,"rows_per_block":1,"grid":"per_rows"},)"
      << R"("dispatch":{"h_min":1,"h_max":4096},"target":"sm_90"})";
  auto call = kloop({"evaluate", "rmsnorm", "--candidate", dir.string(), "--json"});
  EXPECT_EQ(call.exit_code, 1) << call.stderr_text;
  auto doc = nlohmann::json::parse(call.stdout_text);
  EXPECT_EQ(doc["verdict"], "reject");
  EXPECT_NE(doc["gates"][0]["reason"].get<std::string>().find("launch.block_threads"),
            std::string::npos);
  fs::remove_all(dir);
}

// A compiler diagnostic carries the candidate's own text: its control bytes are printed as
// escapes, so a candidate cannot recolour or rewrite the table, and the reason is not clipped.
TEST_F(EvaluateCliTest, CandidateTextCannotDriveTheTerminal) {
  const fs::path dir = fs::temp_directory_path() / "kloop-cli-esc";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.cu") << "#error \x1b[32mALL GATES PASS\x1b[0m\n"
                                   << std::ifstream(kFixtures / "good/kernel.cu").rdbuf();
  fs::copy_file(kFixtures / "good/manifest.json", dir / "manifest.json");
  auto call = kloop({"evaluate", "rmsnorm", "--candidate", dir.string()});
  EXPECT_EQ(call.exit_code, 1) << call.stdout_text << call.stderr_text;
  EXPECT_EQ(call.stdout_text.find('\x1b'), std::string::npos) << call.stdout_text;
  EXPECT_NE(call.stdout_text.find("\\x1b[32mALL GATES PASS\\x1b[0m"), std::string::npos)
      << call.stdout_text;
  fs::remove_all(dir);
}

TEST_F(EvaluateCliTest, UnreadableDirectoryAndUnknownOperatorExit2) {
  auto call = kloop({"evaluate", "rmsnorm", "--candidate", "/nonexistent/kloop-candidate"});
  EXPECT_EQ(call.exit_code, 2);
  EXPECT_NE(call.stderr_text.find("does not exist"), std::string::npos) << call.stderr_text;
  call = kloop({"evaluate", "nosuchop", "--candidate", (kFixtures / "good").string()});
  EXPECT_EQ(call.exit_code, 2);
  EXPECT_NE(call.stderr_text.find("unknown operator 'nosuchop'"), std::string::npos);
  // With --json the error is also a JSON document on stdout (README, "Exit codes").
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"evaluate", "rmsnorm", "--candidate",
                                 "/nonexistent/kloop-candidate", "--json"},
        std::vector<std::string>{"evaluate", "nosuchop", "--candidate",
                                 (kFixtures / "good").string(), "--json"}}) {
    call = kloop(args);
    EXPECT_EQ(call.exit_code, 2);
    const auto doc = nlohmann::json::parse(call.stdout_text);
    EXPECT_EQ(doc["exit_code"], 2) << call.stdout_text;
    EXPECT_NE(doc["error"].get<std::string>().find("kloop evaluate: "), std::string::npos);
  }
}

TEST_F(EvaluateCliTest, EscapeAttemptLeaksNothingIntoJsonOutput) {
  const fs::path dir = fs::temp_directory_path() / "kloop-cli-escape";
  fs::remove_all(dir);
  fs::create_directories(dir / "holdout");
  const std::string marker = "KLOOP-CLI-MARKER-5d1e0b";
  std::ofstream(dir / "holdout/suite.h") << marker << "\n";
  std::ifstream good(kFixtures / "good/kernel.cu");
  std::ofstream(dir / "kernel.cu")
      << "#include \"holdout/suite.h\"\n#include \"../kloop-cli-escape/holdout/suite.h\"\n"
      << good.rdbuf();
  fs::copy_file(kFixtures / "good/manifest.json", dir / "manifest.json");
  auto call = kloop({"evaluate", "rmsnorm", "--candidate", dir.string(), "--json"});
  EXPECT_EQ(call.exit_code, 1);
  EXPECT_EQ((call.stdout_text + call.stderr_text).find(marker), std::string::npos);
  EXPECT_NE(call.stdout_text.find("rejected"), std::string::npos);
  fs::remove_all(dir);
}

} // namespace
} // namespace kloop::evaluator
