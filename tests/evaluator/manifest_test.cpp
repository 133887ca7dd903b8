// Manifest parsing against contract weighted_rmsnorm/1 (op::parse_manifest with RMSNorm's
// declaration from the registry): a good format-1 manifest parses; each malformed one gives an
// error that names the field and the allowed values.
#include <gtest/gtest.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "kernels/manifest.h"
#include "kernels/registry.h"

namespace kloop::op {
namespace {

using nlohmann::json;

const Declaration& rms() {
  const Operator* o = find_operator("rmsnorm");
  if (o == nullptr) throw std::logic_error("rmsnorm is not registered");
  return o->declaration();
}

ManifestParse parse_manifest(std::string_view text) {
  return op::parse_manifest(rms(), text);
}

json good() {
  return json::parse(R"({
    "contract": "weighted_rmsnorm/1",
    "entry_points": {"float32": "rms_f32", "float16": "rms_f16", "bfloat16": "rms_bf16"},
    "launch": {"block_threads": 256, "rows_per_block": 1, "grid": "per_rows",
               "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}},
    "dispatch": {"h_min": 1, "h_max": 65536, "h_multiple_of": 1, "x_rows": "any_stride",
                 "alignment_bytes": 4},
    "target": "sm_90", "known_limits": "none"})");
}

// Parses `m` and expects exactly one error on `field` whose message contains `needle`.
void expect_error(const json& m, const std::string& field, const std::string& needle) {
  auto r = parse_manifest(m.dump());
  ASSERT_FALSE(r.manifest.has_value()) << m.dump();
  ASSERT_FALSE(r.errors.empty());
  bool found = false;
  for (const auto& e : r.errors)
    if (e.field == field && e.message.find(needle) != std::string::npos) found = true;
  std::string all;
  for (const auto& e : r.errors)
    all += e.field + ": " + e.message + "\n";
  EXPECT_TRUE(found) << "want field " << field << " with '" << needle << "', got:\n" << all;
}

TEST(ManifestTest, GoodManifestParsesWithAllFields) {
  auto m = good();
  m["launch"]["grid"] = "persistent";
  m["dispatch"]["x_rows"] = "contiguous";
  m["dispatch"]["alignment_bytes"] = 16;
  m["target"] = "sm_90a";
  m["build_command"] = "nvcc ...";
  m["claimed_target"] = "H100";
  auto r = parse_manifest(m.dump());
  ASSERT_TRUE(r.manifest.has_value()) << (r.errors.empty() ? "" : r.errors[0].message);
  ASSERT_EQ(r.manifest->variants.size(), 1u);
  const Variant& v = r.manifest->variants[0];
  EXPECT_EQ(v.entry_points.at(DType::kFloat16), "rms_f16");
  EXPECT_EQ(v.entry_points.at(DType::kBFloat16), "rms_bf16");
  EXPECT_EQ(v.launch.grid, GridKind::kPersistent);
  EXPECT_EQ(v.when.rows.at(rms().tensor_index("x")), RowLayout::kContiguous);
  EXPECT_EQ(v.when.alignment_bytes, 16);
  EXPECT_EQ(r.manifest->target, "sm_90a");
  EXPECT_EQ(r.manifest->claimed_target, "H100");
  EXPECT_NE(dispatch_predicate_text(rms(), *r.manifest).find("float16"), std::string::npos);
}

TEST(ManifestTest, UnknownTopLevelKeyIsNamed) {
  auto m = good();
  m["speedup"] = 3;
  expect_error(m, "speedup", "allowed keys");
}
TEST(ManifestTest, UnknownNestedKeyIsNamed) {
  auto m = good();
  m["launch"]["warps"] = 8;
  expect_error(m, "launch.warps", "block_threads");
}
TEST(ManifestTest, WrongContractIsRejected) {
  auto m = good();
  m["contract"] = "weighted_rmsnorm/2";
  expect_error(m, "contract", "weighted_rmsnorm/1");
}
TEST(ManifestTest, BlockThreadsNotMultipleOf32) {
  auto m = good();
  m["launch"]["block_threads"] = 100;
  expect_error(m, "launch.block_threads", "multiple of 32");
}
TEST(ManifestTest, BlockThreadsAbove1024) {
  auto m = good();
  m["launch"]["block_threads"] = 2048;
  expect_error(m, "launch.block_threads", "32 to 1024");
}
TEST(ManifestTest, BlockThreadsAsStringIsWrongType) {
  auto m = good();
  m["launch"]["block_threads"] = "256";
  expect_error(m, "launch.block_threads", "must be an integer");
}
TEST(ManifestTest, FractionalRowsPerBlockIsWrongType) {
  auto m = good();
  m["launch"]["rows_per_block"] = 1.5;
  expect_error(m, "launch.rows_per_block", "must be an integer");
}
TEST(ManifestTest, RowsPerBlockBelowOne) {
  auto m = good();
  m["launch"]["rows_per_block"] = 0;
  expect_error(m, "launch.rows_per_block", "from 1");
}
TEST(ManifestTest, UnknownGridKind) {
  auto m = good();
  m["launch"]["grid"] = "blocks";
  expect_error(m, "launch.grid", "\"persistent\"");
}
TEST(ManifestTest, DynamicSmemAboveOptInLimit) {
  auto m = good();
  m["launch"]["dynamic_smem"]["bytes_per_h"] = 4; // 4 * 65536 = 256 KiB > 227 KiB
  expect_error(m, "launch.dynamic_smem", "227 KiB");
}
TEST(ManifestTest, DynamicSmemWithinLimitForSmallerHMax) {
  auto m = good();
  m["launch"]["dynamic_smem"]["bytes_per_h"] = 4;
  m["dispatch"]["h_max"] = 32768; // 128 KiB
  EXPECT_TRUE(parse_manifest(m.dump()).manifest.has_value());
}
TEST(ManifestTest, HMinAboveHMax) {
  auto m = good();
  m["dispatch"]["h_min"] = 10;
  m["dispatch"]["h_max"] = 5;
  expect_error(m, "dispatch.h_min", "h_min <= h_max");
}
TEST(ManifestTest, HMinZero) {
  auto m = good();
  m["dispatch"]["h_min"] = 0;
  expect_error(m, "dispatch.h_min", "from 1");
}
TEST(ManifestTest, HMultipleOfZero) {
  auto m = good();
  m["dispatch"]["h_multiple_of"] = 0;
  expect_error(m, "dispatch.h_multiple_of", "from 1");
}
TEST(ManifestTest, UnknownXRows) {
  auto m = good();
  m["dispatch"]["x_rows"] = "strided";
  expect_error(m, "dispatch.x_rows", "any_stride");
}
TEST(ManifestTest, AlignmentNotPowerOfTwo) {
  auto m = good();
  m["dispatch"]["alignment_bytes"] = 12;
  expect_error(m, "dispatch.alignment_bytes", "power of two");
}
TEST(ManifestTest, AlignmentAbove16) {
  auto m = good();
  m["dispatch"]["alignment_bytes"] = 32;
  expect_error(m, "dispatch.alignment_bytes", "1, 2, 4, 8 or 16");
}
TEST(ManifestTest, UnknownDtype) {
  auto m = good();
  m["entry_points"]["float64"] = "rms_f32";
  expect_error(m, "entry_points.float64", "float32, float16, bfloat16");
}
TEST(ManifestTest, UnknownTarget) {
  auto m = good();
  m["target"] = "sm_80";
  expect_error(m, "target", "\"sm_90a\"");
}
// Whether a named entry exists is the compiled module's question (the static gate's, see
// tests/evaluator/static_unit_test.cpp and build_integration_test.cpp): the manifest alone is
// judged here, whatever the source says.
TEST(ManifestTest, EntryPointsAreNotLookedUpInSourceText) {
  auto m = good();
  m["entry_points"]["float32"] = "generated_by_a_macro";
  auto r = parse_manifest(m.dump());
  ASSERT_TRUE(r.manifest.has_value()) << r.errors.at(0).message;
  EXPECT_EQ(r.manifest->variants.at(0).entry_points.at(DType::kFloat32), "generated_by_a_macro");
}
TEST(ManifestTest, EntryPointNotAnIdentifier) {
  auto m = good();
  m["entry_points"]["float32"] = "rms-f32";
  expect_error(m, "entry_points.float32", "valid C identifier");
}
TEST(ManifestTest, SameEntryPointForTwoDtypes) {
  auto m = good();
  m["entry_points"]["float32"] = "rms_f16"; // keys are visited in order: float16 first
  expect_error(m, "entry_points.float32", "used for two dtypes");
}
TEST(ManifestTest, EmptyEntryPoints) {
  auto m = good();
  m["entry_points"] = json::object();
  expect_error(m, "entry_points", "at least one");
}
TEST(ManifestTest, MissingLaunchObject) {
  auto m = good();
  m.erase("launch");
  expect_error(m, "launch", "missing required");
}
TEST(ManifestTest, KnownLimitsMustBeText) {
  auto m = good();
  m["known_limits"] = 5;
  expect_error(m, "known_limits", "must be a string");
}
TEST(ManifestTest, InvalidJsonNamesTheFile) {
  auto r = parse_manifest("{\"contract\": ");
  ASSERT_FALSE(r.manifest);
  EXPECT_EQ(r.errors.at(0).field, "manifest.json");
  EXPECT_NE(r.errors.at(0).message.find("not valid JSON"), std::string::npos);
}
TEST(ManifestTest, OversizedManifestIsRejected) {
  auto r = parse_manifest(std::string(kMaxManifestBytes + 1, ' '));
  ASSERT_FALSE(r.manifest);
  EXPECT_NE(r.errors.at(0).message.find("limit"), std::string::npos);
}

} // namespace
} // namespace kloop::op
