// The CPU-checkable parts of the GPU tier, run on the CPU (label unit; the build compiles the
// cubins and PTX with nvcc, no GPU needed): every candidate the gpu tests run besides the corpus
// walk (the baseline, the offline-family variants, the sanitizer and fault cases) has a cubin, a
// manifest that parses, PTX that declares its entry points and passes the static gate's PTX
// checks (so the device tests test what the pipeline would reach); the sanitizer cases cover every
// corpus entry whose expected gate is the sanitizer; and the calls the device tests make run the
// candidate under its dispatch predicate, at the sizes the tests claim. The defect and precision
// corpora's own CPU gates are checked elsewhere (tests/evaluator).
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "evaluator/static_inspection.h"
#include "kernels/dispatch.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"
#include "tests/gpu/family_cases.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/sanitizer_cases.h"
#include "tests/offline/variant_param_name.h"

namespace kloop::gputest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path corpus_bin() {
  const char* env = std::getenv("KLOOP_CORPUS_BIN");
  return env ? env : KLOOP_CORPUS_BIN;
}

// Candidate folders (source and manifest) of everything the GPU tier runs but the corpus walk.
std::vector<std::string> device_candidates() {
  std::vector<std::string> out = {"baseline", "corpus/fault_illegal_address",
                                  "corpus/fault_infinite_loop"};
  if (fs::exists(tree("baseline_next/kernel.cu"))) out.push_back("baseline_next");
  for (const SanitizerCase& c : kSanitizerCases)
    if (c.op == "rmsnorm") out.push_back("corpus/" + std::string(c.entry));
  for (const std::string& v : family_variants())
    out.push_back("family/" + v);
  return out;
}

TreeCandidate load(const std::string& rel) {
  if (rel.rfind("family/", 0) == 0) return load_candidate(corpus_bin() / rel.substr(7));
  return load_candidate(tree(rel));
}

const op::Declaration& rms() {
  return rmsnorm::declaration();
}

op::Manifest manifest_of(const TreeCandidate& c) {
  const auto mp = op::parse_manifest(rms(), c.manifest_text);
  if (!mp.manifest) throw std::runtime_error(c.name + ": " + mp.errors.front().message);
  return *mp.manifest;
}

// A contiguous-storage call as the worker lays it out: tensors at 256-byte-aligned device
// addresses (cudaMalloc), x rows `x_row_stride` apart, a fresh contiguous y.
op::CallGeometry device_call(DType dtype, std::int64_t rows, std::int64_t h,
                             std::int64_t x_row_stride) {
  const op::Declaration& d = rms();
  op::CallGeometry g;
  g.dtype = dtype;
  g.rows = rows;
  g.axes.assign(d.axes.size(), 0);
  g.axes.at(static_cast<std::size_t>(d.axis_index("H"))) = h;
  g.tensors.resize(d.tensors.size());
  const std::int64_t span = rows <= 0 ? 0 : (rows - 1) * x_row_stride + h;
  g.tensors.at(static_cast<std::size_t>(d.tensor_index("x"))) = {
      .addr = 0x7f0000000000, .row_stride = x_row_stride, .span_elements = span};
  g.tensors.at(static_cast<std::size_t>(d.tensor_index("weight"))) = {.addr = 0x7f0001000000,
                                                                      .span_elements = h};
  g.tensors.at(static_cast<std::size_t>(d.tensor_index("y"))) = {
      .addr = 0x7f0002000000, .row_stride = h, .span_elements = rows * h};
  return g;
}

class GpuArtifactsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuArtifactsTest, CubinPtxAndManifestAreWhatTheDeviceTestsNeed) {
  const TreeCandidate c = load(GetParam());
  ASSERT_GE(c.cubin.size(), 4u);
  EXPECT_EQ(c.cubin.substr(0, 4), "\x7f"
                                  "ELF")
      << "kernel.cubin is not an ELF image";
  const op::Manifest m = manifest_of(c);
  EXPECT_NE(c.ptx.find(".target " + m.target), std::string::npos) << "PTX target " << m.target;
  for (const auto& [dtype, name] : evaluator::entry_points_of(m))
    EXPECT_NE(c.ptx.find(".entry " + name + "("), std::string::npos)
        << "entry point " << name << " (" << dtype_name(dtype) << ") not in the PTX";
  // The static gate lets it through, so the device tests exercise a candidate the pipeline would
  // give to the device gates.
  for (const auto& f : evaluator::check_ptx(c.ptx, rms(), m))
    ADD_FAILURE() << "the static gate rejects " << GetParam() << ": " << f.message;
}

INSTANTIATE_TEST_SUITE_P(DeviceCandidates, GpuArtifactsTest,
                         ::testing::ValuesIn(device_candidates()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-' || ch == '/') ch = '_';
                           return n;
                         });

// Every operator's corpus: an entry whose expect.json names the sanitizer gate has a case, and
// every case names an entry.
TEST(GpuSanitizerCasesTest, EveryCorpusEntryOfTheSanitizerGateHasASanitizerCase) {
  std::set<std::string> listed, gated, entries;
  for (const test_support::CorpusEntry& e : test_support::corpus_entries("corpus")) {
    entries.insert(e.op + "/" + e.name);
    if (e.expect.value("gate", "") == "sanitizer") gated.insert(e.op + "/" + e.name);
  }
  for (const SanitizerCase& c : kSanitizerCases) {
    const std::string key = std::string(c.op) + "/" + std::string(c.entry);
    EXPECT_TRUE(entries.contains(key)) << key << " is no corpus entry with an expect.json";
    EXPECT_TRUE(listed.insert(key).second) << "listed twice: " << key;
  }
  ASSERT_FALSE(gated.empty());
  EXPECT_TRUE(gated.contains("softmax/p15_race_rows_per_block"));
  for (const std::string& g : gated)
    EXPECT_TRUE(listed.contains(g)) << g << " expects the sanitizer gate but has no sanitizer "
                                    << "case in tests/gpu/sanitizer_cases.h";
}

TEST(GpuSanitizerCasesTest, SmallCallsRunEachSanitizedCandidateNotTheReference) {
  std::vector<std::string> rels = {"baseline"};
  for (const SanitizerCase& c : kSanitizerCases)
    if (c.op == "rmsnorm") rels.push_back("corpus/" + std::string(c.entry));
  bool several_rows_per_block = false;
  for (const std::string& rel : rels) {
    const op::Manifest m = manifest_of(load(rel));
    for (const json& call : sanitizer_small_cases()) {
      const DType dtype = parse_dtype(call.at("dtype").get<std::string>()).value();
      const std::int64_t rows = call.at("rows"), h = call.at("h");
      const auto d = op::decide_dispatch(
          rms(), m, device_call(dtype, rows, h, call.at("x_row_stride")), op::DeviceInfo{});
      EXPECT_EQ(d.route, op::Route::kCandidate) << rel << " " << call.dump() << ": " << d.why;
      if (d.route != op::Route::kCandidate) continue;
      several_rows_per_block |=
          rows > 1 && m.variants.at(static_cast<std::size_t>(d.variant)).launch.rows_per_block > 1;
    }
  }
  // P15's race needs a block that handles more than one row.
  EXPECT_TRUE(several_rows_per_block);
}

TEST(GpuFamilyCallsTest, LargeCallsRunTheCandidateAtTheSizesTheDeviceTestClaims) {
  const auto calls = family_large_calls();
  ASSERT_EQ(calls.size(), 4u);
  for (int i = 0; i < 2; ++i) // past the 64 MiB store-hint threshold
    EXPECT_GT(calls[i].numel() * static_cast<std::int64_t>(dtype_bytes(calls[i].dtype)), 64LL << 20)
        << calls[i].name;
  for (int i = 2; i < 4; ++i) // 126-127 full 16-byte vectors per row after a peel of up to 7
    EXPECT_GE(calls[i].h * static_cast<std::int64_t>(dtype_bytes(calls[i].dtype)) / 16, 126)
        << calls[i].name;
  ASSERT_FALSE(family_variants().empty());
  for (const std::string& v : family_variants()) {
    const op::Manifest m = manifest_of(load("family/" + v));
    for (const rmsnorm::CaseSpec& s : calls) {
      const auto d =
          op::decide_dispatch(rms(), m, device_call(s.dtype, s.rows(), s.h, s.h), op::DeviceInfo{});
      EXPECT_EQ(d.route, op::Route::kCandidate) << v << " " << s.name << ": " << d.why;
    }
  }
}

} // namespace
} // namespace kloop::gputest
