// The CPU-checkable parts of gpu_softmax_test (label unit; the build compiles the cubins and PTX
// with nvcc, no GPU needed): the softmax baseline and each family member the device test runs
// has a cubin, a manifest that parses against row_softmax/1, PTX whose entry points have the
// declaration's ABI and pass the static gate's PTX checks; the emitted members are the family's
// current output; and the public suite the device test runs reaches each candidate under its
// dispatch predicate (device-like addresses: cudaMalloc'd storage, 256-byte aligned).
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "evaluator/static_inspection.h"
#include "kernels/dispatch.h"
#include "kernels/softmax/family.h"
#include "kernels/softmax/operator.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/offline/variant_param_name.h"

namespace kloop::gputest {
namespace {

namespace fs = std::filesystem;

fs::path softmax_bin() {
  const char* env = std::getenv("KLOOP_CORPUS_BIN");
  return fs::path(env ? env : KLOOP_CORPUS_BIN) / "softmax";
}

std::vector<std::string> candidates() {
  std::vector<std::string> out{"baseline"};
  std::stringstream list(KLOOP_SOFTMAX_GPU_LIST);
  for (std::string name; std::getline(list, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

TreeCandidate load(const std::string& name) {
  if (name == "baseline")
    return load_candidate(fs::path(KLOOP_SOURCE_DIR) / "kernels/softmax/baseline", "softmax/");
  return load_candidate(softmax_bin() / name, "softmax/");
}

class SoftmaxArtifactsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SoftmaxArtifactsTest, CubinManifestAndPtxAreWhatThePipelineWouldAccept) {
  const TreeCandidate c = load(GetParam());
  EXPECT_GT(c.cubin.size(), 1000u);
  const auto& decl = softmax::declaration();
  const op::ManifestParse m = op::parse_manifest(decl, c.manifest_text);
  ASSERT_TRUE(m.errors.empty()) << m.errors.front().message;
  const evaluator::PtxInspection in = evaluator::inspect_ptx(c.ptx, decl, *m.manifest);
  EXPECT_TRUE(in.findings.empty()) << in.findings.front().message;
  ASSERT_EQ(in.entries.size(), 3u);
  for (const auto& e : in.entries)
    EXPECT_EQ(evaluator::contract_signature_problem(e, decl), "") << e.name;
  if (GetParam() != "baseline") {
    EXPECT_EQ(c.source, softmax::generate(*softmax::variant_by_name(GetParam())).kernel_cu)
        << "the built member is stale: rebuild kloop_softmax_cubins";
  }
}

INSTANTIATE_TEST_SUITE_P(Candidates, SoftmaxArtifactsTest, ::testing::ValuesIn(candidates()),
                         kloop::test_support::variant_param_name);

// The public suite (seed 7, as the device test) materialised once, each call's geometry judged
// against every candidate's manifest.
TEST(SoftmaxArtifactsRoutesTest, ThePublicSuiteReachesEveryCandidate) {
  const auto& decl = softmax::declaration();
  const op::Operator& op = softmax::operator_instance();
  std::vector<op::CallGeometry> calls;
  for (const nlohmann::json& spec : op.suite("public", 7)) {
    const op::CallArgs call = op.materialize(spec);
    const op::Validated v = op.validate(call);
    if (!v.ok() || v.empty()) continue;
    const std::size_t eb = dtype_bytes(call.tensors[0].dtype());
    calls.push_back(op::call_geometry(
        decl, call, v, {0x7f0000000000 + call.tensors[0].offset() * eb, 0x7f8000000000}));
  }
  for (const std::string& name : candidates()) {
    const op::Manifest m = *op::parse_manifest(decl, load(name).manifest_text).manifest;
    int candidate = 0, reference = 0;
    for (const op::CallGeometry& g : calls)
      (op::decide_dispatch(decl, m, g, op::DeviceInfo{}).route == op::Route::kCandidate
           ? candidate
           : reference) += 1;
    EXPECT_GT(candidate, 300) << name;
    EXPECT_GT(reference, 0) << name; // transposed views
    EXPECT_LT(reference, 20) << name;
  }
}

} // namespace
} // namespace kloop::gputest
