// The Python copy of the dispatch predicate (agent/export_templates/_dispatch.py, as `kloop export`
// embeds it, with the _config.py `kloop export` renders from the manifest) gives the C++
// predicate's answer (kernels/dispatch.cpp, op::decide_dispatch with RMSNorm's declaration): the
// same route and the same reason, on the predicate's boundaries and views, for several manifests.
// The Python side runs the package file unchanged through tests/wrapper/dispatch_parity.py (a
// metadata stand-in for torch, so no torch is needed); python3 is in scripts/bootstrap.sh's package
// list.
#include <unistd.h>

#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/torch_export.h"
#include "evaluator/subprocess.h"
#include "kernels/dispatch.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"
#include "tests/support/test_files.h"

namespace kloop::op {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uintptr_t kX = 0x7f0000000000, kW = 0x7f0000100000, kY = 0x7f0000200000;

// One call: x viewed as (shape, strides, offset) in its own storage, weight [H] with `w_stride` at
// `w_offset`, the fresh output `y_shift` bytes past an aligned address.
struct Call {
  DType dtype;
  std::vector<std::int64_t> shape, strides;
  std::int64_t offset = 0, w_stride = 1, w_offset = 0, y_shift = 0;
  int cc_major = 9, cc_minor = 0;
};

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * std::max<std::int64_t>(1, shape[d + 1]);
  return s;
}

Call contiguous(DType dtype, std::vector<std::int64_t> shape) {
  Call c{dtype, shape, contiguous_strides(shape)};
  return c;
}

// Storage elements the view addresses (max offset + 1; 1 for an empty view).
std::size_t storage_for(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& strides, std::int64_t offset) {
  std::int64_t last = offset;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return static_cast<std::size_t>(offset + 1);
    last += (shape[d] - 1) * strides[d];
  }
  return static_cast<std::size_t>(last + 1);
}

DispatchDecision cpp_decision(const Manifest& m, const Call& c) {
  const HostTensor x = HostTensor::strided(storage_for(c.shape, c.strides, c.offset),
                                           to_dl(c.dtype), c.shape, c.strides, c.offset);
  const std::int64_t h = c.shape.back();
  const HostTensor w = HostTensor::strided(storage_for({h}, {c.w_stride}, c.w_offset),
                                           to_dl(c.dtype), {h}, {c.w_stride}, c.w_offset);
  const std::uintptr_t es = dtype_bytes(c.dtype);
  DeviceInfo dev;
  dev.cc_major = c.cc_major;
  dev.cc_minor = c.cc_minor;
  const Declaration& d = rmsnorm::declaration();
  const CallArgs args{{x, w}, {ScalarArg::of(1e-6)}};
  const Validated v = rmsnorm::operator_instance().validate(args);
  EXPECT_TRUE(v.ok()) << (v.error ? v.error->message : "");
  return decide_dispatch(
      d, m, call_geometry(d, args, v, {kX + c.offset * es, kW + c.w_offset * es, kY + c.y_shift}),
      dev);
}

json python_call(const Call& c) {
  const std::uintptr_t es = dtype_bytes(c.dtype);
  return {{"shape", c.shape},
          {"strides", c.strides},
          {"dtype", dtype_name(c.dtype)},
          {"x_ptr", kX + c.offset * es},
          {"w_stride", c.w_stride},
          {"w_ptr", kW + c.w_offset * es},
          {"y_ptr", kY + c.y_shift},
          {"capability", {c.cc_major, c.cc_minor}}};
}

// The package's _dispatch.py and the _config.py of `manifest`, in DIR/kloop_rmsnorm/.
void write_package(const fs::path& dir, const std::string& manifest) {
  const fs::path pkg = dir / "kloop_rmsnorm";
  fs::create_directories(pkg);
  std::ofstream(pkg / "__init__.py") << "";
  std::ofstream(pkg / "_config.py") << agent::render_config_py(manifest, json::object());
  bool found = false;
  for (const agent::ExportTemplate& t : agent::export_templates()) {
    if (std::string_view(t.name) != "_dispatch.py") continue;
    std::ofstream(pkg / "_dispatch.py") << t.text;
    found = true;
  }
  ASSERT_TRUE(found) << "no _dispatch.py among the embedded export templates";
}

// [[route, why], ...] from the Python predicate for `calls`.
json python_decisions(const std::string& manifest, const std::vector<Call>& calls) {
  test_support::TempDir t("parity");
  write_package(t.dir(), manifest);
  json list = json::array();
  for (const Call& c : calls)
    list.push_back(python_call(c));
  std::ofstream(t.dir() / "calls.json") << list.dump();
  evaluator::SubprocessOptions o;
  o.deadline = std::chrono::seconds(60);
  o.env = {{"PATH", "/usr/bin:/bin"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  const auto r = evaluator::run_subprocess(
      {"/usr/bin/python3", std::string(KLOOP_SOURCE_DIR) + "/tests/wrapper/dispatch_parity.py",
       t.path(), (t.dir() / "calls.json").string()},
      o);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  const json out = json::parse(r.stdout_text, nullptr, false);
  EXPECT_TRUE(out.is_array()) << r.stdout_text << r.stderr_text;
  return out.is_array() ? out : json::array();
}

std::string manifest_text(int h_min, int h_max, int h_multiple_of, const char* x_rows, int align,
                          int rows_per_block, const char* target, bool fp16_only = false) {
  json entry = fp16_only
                   ? json{{"float16", "rms_f16"}}
                   : json{{"float32", "rms_f32"}, {"float16", "rms_f16"}, {"bfloat16", "rms_bf16"}};
  return json{{"contract", "weighted_rmsnorm/1"},
              {"entry_points", entry},
              {"launch",
               {{"block_threads", 256},
                {"rows_per_block", rows_per_block},
                {"grid", "per_rows"},
                {"dynamic_smem", {{"fixed_bytes", 0}, {"bytes_per_h", 0}}}}},
              {"dispatch",
               {{"h_min", h_min},
                {"h_max", h_max},
                {"h_multiple_of", h_multiple_of},
                {"x_rows", x_rows},
                {"alignment_bytes", align}}},
              {"target", target},
              {"known_limits", "test"}}
      .dump();
}

// Calls on every clause of the predicate and its boundaries.
std::vector<Call> calls_on_every_clause() {
  using D = DType;
  std::vector<Call> calls;
  for (D d : kAllDTypes)
    calls.push_back(contiguous(d, {8, 4096}));
  for (std::int64_t h : {1, 2, 127, 128, 129, 255, 256, 257, 1009, 8191, 8192, 8193, 65536})
    calls.push_back(contiguous(D::kFloat16, {2, h}));
  calls.push_back(contiguous(D::kBFloat16, {3, 0, 64}));         // rows == 0
  calls.push_back(contiguous(D::kFloat32, {1, 769}));            // one row, odd width
  calls.push_back({D::kFloat32, {8, 64}, {1, 8}});               // transposed
  calls.push_back({D::kBFloat16, {4, 16, 128}, {6144, 128, 1}}); // outer dims do not collapse
  calls.push_back({D::kBFloat16, {4, 2048}, {6144, 1}});         // sliced rows
  calls.push_back({D::kFloat16, {4, 2048}, {2048, 1}, 1, 1, 1}); // storage offsets (P8)
  calls.push_back({D::kFloat16, {7, 769}, {776, 1}});            // aligned x rows, unaligned y rows
  calls.push_back({D::kFloat16, {7, 769}, {769, 1}});            // unaligned x rows
  calls.push_back({D::kFloat32, {2, 64}, {64, 1}, 0, 2});        // strided weight
  calls.push_back({D::kFloat32, {2, 256}, {256, 1}, 0, 1, 0, 4});       // misaligned y
  calls.push_back({D::kFloat32, {2, 256}, {256, 1}, 0, 1, 2, 0});       // misaligned weight
  calls.push_back({D::kFloat32, {2, 256}, {256, 1}, 0, 1, 0, 0, 9, 4}); // sm_90a needs 9.0
  // The grid cap (rows_per_block 1 and 2): 2^31 - 1 rows fit, 2^31 do not (stride-0 rows).
  calls.push_back({D::kFloat32, {kMaxGridX, 1}, {0, 1}});
  calls.push_back({D::kFloat32, {kMaxGridX + 1, 1}, {0, 1}});
  calls.push_back({D::kFloat32, {2 * kMaxGridX, 1}, {0, 1}});
  calls.push_back({D::kFloat32, {2 * kMaxGridX + 1, 1}, {0, 1}});
  return calls;
}

std::string describe(const Call& c) {
  return python_call(c).dump();
}

class DispatchParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DispatchParityTest, PythonPredicateGivesTheCppRouteAndReason) {
  ASSERT_EQ(::access("/usr/bin/python3", X_OK), 0)
      << "python3 is missing (scripts/bootstrap.sh installs it)";
  const std::string manifest = GetParam();
  const auto parsed = parse_manifest(rmsnorm::declaration(), manifest);
  ASSERT_TRUE(parsed.manifest) << parsed.errors.front().message;
  const std::vector<Call> calls = calls_on_every_clause();
  const json py = python_decisions(manifest, calls);
  ASSERT_EQ(py.size(), calls.size());
  std::set<std::string> routes, reasons;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const DispatchDecision d = cpp_decision(*parsed.manifest, calls[i]);
    EXPECT_EQ(py[i][0], route_name(d.route)) << describe(calls[i]) << "\nC++: " << d.why;
    EXPECT_EQ(py[i][1], d.why) << describe(calls[i]);
    routes.insert(std::string(route_name(d.route)));
    reasons.insert(d.why);
  }
  // The calls reach every route and many clauses, not one answer repeated.
  EXPECT_EQ(routes.size(), 3u);
  EXPECT_GE(reasons.size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(
    Manifests, DispatchParityTest,
    ::testing::Values(manifest_text(1, 65536, 1, "any_stride", 4, 1, "sm_90"),
                      manifest_text(128, 8192, 128, "contiguous", 16, 2, "sm_90"),
                      manifest_text(2, 8192, 1, "any_stride", 2, 4, "sm_90a"),
                      manifest_text(129, 1009, 1, "any_stride", 8, 1, "sm_90", true)));

// One clause exists only in the Python copy: an sm_90 cubin on another major version goes to the
// reference there (the C++ worker instead fails the cubin load on such a device).
TEST(DispatchParityOnlyPythonTest, Sm90CubinOnAnotherMajorVersionGoesToTheReference) {
  const std::string manifest = manifest_text(1, 65536, 1, "any_stride", 4, 1, "sm_90");
  Call c = contiguous(DType::kFloat32, {2, 256});
  c.cc_major = 10;
  const json py = python_decisions(manifest, {c});
  ASSERT_EQ(py.size(), 1u);
  EXPECT_EQ(py[0][0], "reference");
  EXPECT_EQ(py[0][1], "an sm_90 cubin loads only on compute capability 9.x, device has 10.0");
}

} // namespace
} // namespace kloop::op
