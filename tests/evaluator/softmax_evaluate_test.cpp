// row_softmax/1 through the real pipeline on this GPU-less machine (`kloop evaluate softmax` as a
// subprocess: contract gate, sandboxed NVRTC build, static gate from the compiled module): the
// in-tree baseline and every curated member of the offline family pass the three CPU gates with
// no spill and are pending_device_validation (exit 3); a candidate of another operator is
// rejected by the contract gate. The offline policy then reads these real reports: the safe
// default's pass leads to the flagship, a member that spills to fewer cached units, a build
// failure one step toward safety.
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "evaluator/subprocess.h"
#include "kernels/softmax/family.h"
#include "kernels/softmax/family_policy.h"
#include "tests/support/sandbox_check.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;
using softmax::Variant;
const std::string kKloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";

struct Evaluation {
  int exit_code = -1;
  nlohmann::json report;
  std::string stderr_text;
};

Evaluation evaluate(const std::string& op, const fs::path& dir) {
  SubprocessOptions o;
  o.deadline = std::chrono::milliseconds(120000);
  const ToolCall call =
      run_subprocess({kKloop, "evaluate", op, "--candidate", dir.string(), "--json"}, o);
  Evaluation e{call.exit_code, nlohmann::json::parse(call.stdout_text, nullptr, false),
               call.stderr_text};
  return e;
}

void write_candidate(const fs::path& dir, const std::string& source, const std::string& manifest) {
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.cu") << source;
  std::ofstream(dir / "manifest.json") << manifest;
}

// The three CPU gates passed, the entries found with the declared ABI, and no spill.
void expect_cpu_gates_pass(const Evaluation& e, const std::string& what) {
  ASSERT_EQ(e.exit_code, 3) << what << ": " << e.report.dump() << e.stderr_text;
  EXPECT_EQ(e.report["verdict"], "pending_device_validation") << what;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(e.report["gates"][i]["status"], "pass") << what << ": " << e.report["gates"][i];
  const nlohmann::json& st = e.report["gates"][2]["evidence"];
  ASSERT_EQ(st["entries"].size(), 3u) << what;
  for (const auto& entry : st["entries"])
    EXPECT_EQ(entry["params"], (nlohmann::json{".u64", ".u64", ".u64", ".u32", ".u64", ".u64"}))
        << what;
  for (const auto& [name, r] : st["resources"].items())
    EXPECT_EQ(r["spill_store_bytes"], 0) << what << " " << name;
  EXPECT_EQ(e.report["gates"][3]["status"], "not_run") << what;
}

class SoftmaxEvaluateTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kKloop)) << kKloop << " not built (the test target depends on it)";
    KLOOP_REQUIRE_SANDBOX_OR_SKIP();
  }
};

TEST_F(SoftmaxEvaluateTest, InTreeBaselinePassesTheCpuGatesAndIsPendingTheDevice) {
  const Evaluation e = evaluate("softmax", fs::path(KLOOP_SOURCE_DIR) / "kernels/softmax/baseline");
  expect_cpu_gates_pass(e, "baseline");
  EXPECT_EQ(e.report["gates"][0]["evidence"]["dispatch_predicate"],
            "dtype in {float32,float16,bfloat16} && 1<=N<=16777216 && N%1==0 && any row stride && "
            "pointers and row stride 2-byte aligned");
}

// Every curated member, built two at a time (each build is a few seconds of NVRTC).
TEST_F(SoftmaxEvaluateTest, EveryCuratedFamilyMemberPassesTheCpuGates) {
  test_support::TempDir tmp("softmax-family");
  const auto& all = softmax::all_variants();
  for (std::size_t i = 0; i < all.size(); i += 2) {
    std::vector<std::future<Evaluation>> runs;
    for (std::size_t k = i; k < std::min(all.size(), i + 2); ++k) {
      const softmax::GeneratedCandidate c = softmax::generate(all[k]);
      const fs::path dir = tmp.dir() / c.name;
      write_candidate(dir, c.kernel_cu, c.manifest_json);
      runs.push_back(std::async(std::launch::async, [dir] { return evaluate("softmax", dir); }));
    }
    for (std::size_t k = 0; k < runs.size(); ++k)
      expect_cpu_gates_pass(runs[k].get(), softmax::variant_name(all[i + k]));
  }
}

TEST_F(SoftmaxEvaluateTest, ACandidateOfAnotherOperatorIsRejectedByTheContractGate) {
  const Evaluation e = evaluate("softmax", fs::path(KLOOP_SOURCE_DIR) / "kernels/rmsnorm/baseline");
  EXPECT_EQ(e.exit_code, 1) << e.report.dump();
  EXPECT_EQ(e.report["gates"][0]["name"], "contract");
  EXPECT_EQ(e.report["gates"][0]["status"], "fail");
  EXPECT_NE(e.report["gates"][0]["reason"].get<std::string>().find("weighted_rmsnorm/1"),
            std::string::npos)
      << e.report["gates"][0];
}

TEST_F(SoftmaxEvaluateTest, ThePolicyReadsRealReports) {
  test_support::TempDir tmp("softmax-policy");
  softmax::OfflinePolicy policy(5);
  const softmax::PolicyDecision first = policy.next(nullptr);
  const softmax::GeneratedCandidate safe = softmax::generate(first.variant);
  write_candidate(tmp.dir() / "safe", safe.kernel_cu, safe.manifest_json);
  const Evaluation passed = evaluate("softmax", tmp.dir() / "safe");
  ASSERT_EQ(passed.exit_code, 3) << passed.report.dump();
  const softmax::PolicyDecision second = policy.next(&passed.report);
  EXPECT_EQ(second.rules, std::vector<std::string>{"pass:flagship"});
  EXPECT_EQ(second.variant, softmax::flagship_variant());

  // A member whose cache exceeds what NVRTC keeps in 64 registers: the static gate's evidence
  // shows the spill, and the policy halves the cache.
  Variant spilling = *softmax::variant_by_name("v16-b512-tauto-c7-twopass-pers");
  const softmax::GeneratedCandidate sp = softmax::generate(spilling);
  write_candidate(tmp.dir() / "spill", sp.kernel_cu, sp.manifest_json);
  const Evaluation spilled = evaluate("softmax", tmp.dir() / "spill");
  ASSERT_EQ(spilled.exit_code, 3) << spilled.report.dump();
  const softmax::ReportDigest d = softmax::digest_report(spilled.report);
  EXPECT_GT(d.spill_bytes, 0) << spilled.report["gates"][2]["evidence"]["resources"];
  softmax::OfflinePolicy from_spill(5);
  from_spill.next(nullptr);
  from_spill.decide(softmax::digest_report(passed.report)); // the flagship
  const softmax::PolicyDecision fewer = from_spill.decide(d);
  EXPECT_EQ(fewer.rules, std::vector<std::string>{"spills:fewer_cached"});
  EXPECT_EQ(fewer.variant.cached_units, softmax::flagship_variant().cached_units / 2);

  // A build failure (the flagship's source cut in half): one step toward safety.
  const softmax::GeneratedCandidate fl = softmax::generate(softmax::flagship_variant());
  write_candidate(tmp.dir() / "broken", fl.kernel_cu.substr(0, fl.kernel_cu.size() / 2),
                  fl.manifest_json);
  const Evaluation broken = evaluate("softmax", tmp.dir() / "broken");
  ASSERT_EQ(broken.exit_code, 1) << broken.report.dump();
  EXPECT_EQ(broken.report["gates"][1]["status"], "fail");
  const softmax::PolicyDecision third = policy.next(&broken.report);
  EXPECT_EQ(third.rules, std::vector<std::string>{"fail:safer_neighbour"});
  EXPECT_EQ(third.variant, softmax::safer_neighbour(softmax::flagship_variant()));
}

} // namespace
} // namespace kloop::evaluator
