// The trusted wrapper's dispatch predicate and launch plan (kernels/dispatch.h, op::decide_dispatch
// and op::plan_launch) for weighted_rmsnorm/1, with RMSNorm's declaration from the registry, on
// HostTensor metadata (no device).
#include <gtest/gtest.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "kernels/dispatch.h"
#include "kernels/manifest.h"
#include "kernels/registry.h"

namespace kloop::op {
namespace {

constexpr std::uintptr_t kBase = 0x7f0000000000; // a 256-byte-aligned "device" address

const Operator& rms() {
  const Operator* o = find_operator("rmsnorm");
  if (o == nullptr) throw std::logic_error("rmsnorm is not registered");
  return *o;
}
const Declaration& decl() {
  return rms().declaration();
}
std::size_t index_of_h() {
  return static_cast<std::size_t>(decl().axis_index("H"));
}
std::size_t index_of(const char* tensor) {
  return static_cast<std::size_t>(decl().tensor_index(tensor));
}

// A format-1 manifest with an entry point for every dtype, H in [1, 65536], as parse_manifest
// reads it.
Manifest manifest_all(int align = 16) {
  const nlohmann::json j = {
      {"contract", decl().id()},
      {"entry_points", {{"float32", "f"}, {"float16", "h"}, {"bfloat16", "b"}}},
      {"launch", {{"block_threads", 256}, {"rows_per_block", 1}, {"grid", "per_rows"}}},
      {"dispatch", {{"h_min", 1}, {"h_max", 65536}, {"alignment_bytes", align}}},
      {"target", "sm_90"}};
  ManifestParse p = parse_manifest(decl(), j.dump());
  if (!p.manifest) throw std::logic_error("test manifest rejected: " + p.errors.at(0).message);
  return std::move(*p.manifest);
}
Variant& only(Manifest& m) {
  return m.variants.at(0);
}
AxisRange& h_range(Manifest& m) {
  return only(m).when.axes.at(index_of_h());
}

// The geometry of the validated call (x, w, eps 1e-6): x at kBase + x_shift, the weight at
// kBase + 0x100000 and the fresh output at kBase + 0x200000 + y_shift (storage base + offset).
CallGeometry geom(const HostTensor& x, const HostTensor& w, std::uintptr_t x_shift = 0,
                  std::uintptr_t y_shift = 0) {
  const CallArgs args{{x, w}, {ScalarArg::of(1e-6)}};
  const Validated v = rms().validate(args);
  EXPECT_TRUE(v.ok()) << (v.error ? v.error->message : "");
  const std::uintptr_t es = x.element_bytes();
  return call_geometry(decl(), args, v,
                       {kBase + x_shift + x.offset() * es, kBase + 0x100000 + w.offset() * es,
                        kBase + 0x200000 + y_shift});
}

DispatchDecision decide(const Manifest& m, const CallGeometry& g, const DeviceInfo& dev) {
  return decide_dispatch(decl(), m, g, dev);
}

LaunchPlan plan(const Manifest& m, const CallGeometry& g, const DeviceInfo& dev,
                int blocks_per_sm) {
  return plan_launch(m.variants.at(0).launch, g.rows, row_width(decl(), g), dev, blocks_per_sm);
}

TEST(WrapperDispatchTest, ContiguousAlignedCallRunsTheCandidate) {
  const HostTensor x = HostTensor::zeros({8, 4096}, DType::kBFloat16);
  const HostTensor w = HostTensor::zeros({4096}, DType::kBFloat16);
  const DispatchDecision d = decide(manifest_all(), geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kCandidate) << d.why;
  EXPECT_TRUE(d.why.empty());
}

TEST(WrapperDispatchTest, EmptyOuterDimensionLaunchesNothing) {
  const HostTensor x = HostTensor::zeros({3, 0, 4096}, DType::kBFloat16);
  const HostTensor w = HostTensor::zeros({4096}, DType::kBFloat16);
  EXPECT_EQ(decide(manifest_all(), geom(x, w), DeviceInfo{}).route, Route::kNoLaunch);
}

TEST(WrapperDispatchTest, DtypeWithoutEntryPointGoesToTheReference) {
  Manifest m = manifest_all();
  only(m).entry_points.erase(DType::kFloat16);
  const HostTensor x = HostTensor::zeros({2, 64}, DType::kFloat16);
  const HostTensor w = HostTensor::zeros({64}, DType::kFloat16);
  const DispatchDecision d = decide(m, geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("float16"), std::string::npos) << d.why;
}

TEST(WrapperDispatchTest, Sm90aTargetRunsOnlyOnComputeCapability90) {
  Manifest m = manifest_all();
  m.target = "sm_90a";
  const HostTensor x = HostTensor::zeros({2, 64}, DType::kFloat32);
  const HostTensor w = HostTensor::zeros({64}, DType::kFloat32);
  EXPECT_EQ(decide(m, geom(x, w), DeviceInfo{9, 0}).route, Route::kCandidate);
  const DispatchDecision d = decide(m, geom(x, w), DeviceInfo{10, 0});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("sm_90a"), std::string::npos) << d.why;
}

TEST(WrapperDispatchTest, WidthOutsideRangeOrNotAMultipleGoesToTheReference) {
  Manifest m = manifest_all();
  h_range(m) = {.min = 128, .max = 8192, .multiple_of = 128};
  const DeviceInfo dev;
  for (std::int64_t h : {64, 1009, 4099, 16384}) {
    const HostTensor x = HostTensor::zeros({2, h}, DType::kFloat32);
    const HostTensor w = HostTensor::zeros({h}, DType::kFloat32);
    EXPECT_EQ(decide(m, geom(x, w), dev).route, Route::kReference) << "H=" << h;
  }
  const HostTensor x = HostTensor::zeros({2, 4096}, DType::kFloat32);
  const HostTensor w = HostTensor::zeros({4096}, DType::kFloat32);
  EXPECT_EQ(decide(m, geom(x, w), dev).route, Route::kCandidate);
}

TEST(WrapperDispatchTest, TransposedInputGoesToTheReference) {
  const HostTensor x = HostTensor::zeros({64, 8}, DType::kFloat32).t(); // [8, 64], strides (1, 8)
  const HostTensor w = HostTensor::zeros({64}, DType::kFloat32);
  const DispatchDecision d = decide(manifest_all(4), geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("last-dimension stride"), std::string::npos) << d.why;
}

TEST(WrapperDispatchTest, OuterDimensionsThatDoNotCollapseGoToTheReference) {
  // qkv = [4, 6144]; x = qkv[:, :2048].view(4, 16, 128): strides (6144, 128, 1) -> no one stride.
  const HostTensor qkv = HostTensor::zeros({4, 6144}, DType::kBFloat16);
  const HostTensor x = qkv.as_strided({4, 16, 128}, {6144, 128, 1}, 0);
  const HostTensor w = HostTensor::zeros({128}, DType::kBFloat16);
  const DispatchDecision d = decide(manifest_all(2), geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("collapse"), std::string::npos) << d.why;
}

TEST(WrapperDispatchTest, SlicedRowsRunOnAnyStrideButNotOnContiguousRows) {
  const HostTensor buf = HostTensor::zeros({4, 6144}, DType::kBFloat16);
  const HostTensor x = buf.slice(1, 0, 2048); // row stride 6144
  const HostTensor w = HostTensor::zeros({2048}, DType::kBFloat16);
  Manifest m = manifest_all(2);
  EXPECT_EQ(decide(m, geom(x, w), DeviceInfo{}).route, Route::kCandidate);
  only(m).when.rows[static_cast<int>(index_of("x"))] = RowLayout::kContiguous;
  const DispatchDecision d = decide(m, geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("row stride is 6144"), std::string::npos) << d.why;
}

TEST(WrapperDispatchTest, StorageOffsetBreaksSixteenByteAlignmentButNotTwo) {
  // x = buf[1:].view(4, 2048) in fp16: 2-byte aligned (CASES.md P8).
  const HostTensor buf = HostTensor::zeros({4 * 2048 + 1}, DType::kFloat16);
  const HostTensor x = buf.as_strided({4, 2048}, {2048, 1}, 1);
  const HostTensor w = HostTensor::zeros({2048}, DType::kFloat16);
  const DispatchDecision d = decide(manifest_all(16), geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("x address"), std::string::npos) << d.why;
  EXPECT_EQ(decide(manifest_all(2), geom(x, w), DeviceInfo{}).route, Route::kCandidate);
}

TEST(WrapperDispatchTest, RowStrideInBytesMustMeetTheAlignment) {
  const HostTensor x = HostTensor::zeros({7, 769}, DType::kFloat16); // 1538-byte rows
  const HostTensor w = HostTensor::zeros({769}, DType::kFloat16);
  const DispatchDecision d = decide(manifest_all(16), geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("row stride in bytes"), std::string::npos) << d.why;
  // A single row has no row stride to align.
  const HostTensor one = HostTensor::zeros({1, 769}, DType::kFloat16);
  EXPECT_EQ(decide(manifest_all(2), geom(one, w), DeviceInfo{}).route, Route::kCandidate);
}

TEST(WrapperDispatchTest, MisalignedOutputAddressGoesToTheReference) {
  const HostTensor x = HostTensor::zeros({2, 256}, DType::kFloat32);
  const HostTensor w = HostTensor::zeros({256}, DType::kFloat32);
  const DispatchDecision d = decide(manifest_all(16), geom(x, w, 0, 4), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("y address"), std::string::npos) << d.why;
}

TEST(WrapperDispatchTest, NonContiguousWeightGoesToTheReference) {
  const HostTensor x = HostTensor::zeros({2, 64}, DType::kFloat32);
  const HostTensor wbuf = HostTensor::zeros({128}, DType::kFloat32);
  const HostTensor w = wbuf.as_strided({64}, {2}, 0);
  const DispatchDecision d = decide(manifest_all(4), geom(x, w), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_NE(d.why.find("weight"), std::string::npos) << d.why;
}

// A contiguous [rows, h] call of `dtype` whose tensors start at 256-byte-aligned addresses; the
// weight and y addresses move by w_shift / y_shift bytes. No storage: the predicate reads metadata.
CallGeometry contiguous_call(DType dtype, std::int64_t rows, std::int64_t h,
                             std::uintptr_t w_shift = 0, std::uintptr_t y_shift = 0) {
  CallGeometry g;
  g.dtype = dtype;
  g.rows = rows;
  g.axes.assign(decl().axes.size(), 0);
  g.axes[index_of_h()] = h;
  g.tensors.resize(decl().tensors.size());
  g.tensors[index_of("x")] = {.addr = kBase, .row_stride = h, .span_elements = rows * h};
  g.tensors[index_of("weight")] = {.addr = kBase + 0x100000 + w_shift, .span_elements = h};
  g.tensors[index_of("y")] = {
      .addr = kBase + 0x200000 + y_shift, .row_stride = h, .span_elements = rows * h};
  return g;
}

// Route and the exact reason of `call` under `m`.
void expect_route(const Manifest& m, const CallGeometry& call, Route route, const std::string& why,
                  const DeviceInfo& dev = {}) {
  const DispatchDecision d = decide(m, call, dev);
  const std::int64_t h = call.axes.at(index_of_h());
  EXPECT_EQ(route_name(d.route), route_name(route))
      << "H=" << h << " rows=" << call.rows << ": " << d.why;
  EXPECT_EQ(d.why, why) << "H=" << h << " rows=" << call.rows;
}

TEST(WrapperDispatchBoundaryTest, WidthRangeIsInclusiveAtBothEnds) {
  Manifest m = manifest_all(4);
  h_range(m).min = 128;
  h_range(m).max = 8192;
  const auto call = [](std::int64_t h) { return contiguous_call(DType::kFloat32, 4, h); };
  expect_route(m, call(127), Route::kReference, "H=127 outside [h_min=128, h_max=8192]");
  expect_route(m, call(128), Route::kCandidate, "");
  expect_route(m, call(8192), Route::kCandidate, "");
  expect_route(m, call(8193), Route::kReference, "H=8193 outside [h_min=128, h_max=8192]");
  // The contract's own limits: h_max 65536 admits 65536, not 65537.
  const Manifest all = manifest_all(4);
  expect_route(all, call(65536), Route::kCandidate, "");
  expect_route(all, call(1), Route::kCandidate, "");
}

TEST(WrapperDispatchBoundaryTest, WidthMultipleIsCheckedAfterTheRange) {
  Manifest m = manifest_all(4);
  h_range(m).multiple_of = 128;
  const auto call = [](std::int64_t h) { return contiguous_call(DType::kFloat32, 4, h); };
  expect_route(m, call(256), Route::kCandidate, "");
  expect_route(m, call(255), Route::kReference, "H=255 is not a multiple of h_multiple_of=128");
  expect_route(m, call(257), Route::kReference, "H=257 is not a multiple of h_multiple_of=128");
  h_range(m).max = 256; // both fail: the range is named first
  expect_route(m, call(257), Route::kReference, "H=257 outside [h_min=1, h_max=256]");
}

TEST(WrapperDispatchBoundaryTest, WeightAddressMustMeetTheAlignment) {
  const Manifest m = manifest_all(16);
  expect_route(m, contiguous_call(DType::kFloat32, 2, 256, 16), Route::kCandidate, "");
  expect_route(m, contiguous_call(DType::kFloat32, 2, 256, 8), Route::kReference,
               "weight address (0x7f0000100008) is not a multiple of alignment_bytes=16");
  // alignment_bytes 8 accepts the same weight.
  expect_route(manifest_all(8), contiguous_call(DType::kFloat32, 2, 256, 8), Route::kCandidate, "");
}

TEST(WrapperDispatchBoundaryTest, YRowStrideMustMeetTheAlignmentEvenWhenXsDoes) {
  // fp16 x rows padded to 776 elements (1552 bytes, a multiple of 16); y is fresh and contiguous
  // with 769-element rows (1538 bytes).
  CallGeometry g = contiguous_call(DType::kFloat16, 7, 769);
  g.tensors[index_of("x")].row_stride = 776;
  expect_route(manifest_all(16), g, Route::kReference,
               "y row stride in bytes (0x602) is not a multiple of alignment_bytes=16");
  expect_route(manifest_all(2), g, Route::kCandidate, "");
  g.rows = 1; // one row: both strides count as H, so x's 1538-byte row is named first
  expect_route(manifest_all(16), g, Route::kReference,
               "x row stride in bytes (0x602) is not a multiple of alignment_bytes=16");
}

TEST(WrapperDispatchBoundaryTest, GridCapAdmitsExactlyTheMaximumGridX) {
  Manifest m = manifest_all(4);
  expect_route(m, contiguous_call(DType::kFloat32, kMaxGridX, 1), Route::kCandidate, "");
  expect_route(m, contiguous_call(DType::kFloat32, kMaxGridX + 1, 1), Route::kReference,
               "2147483648 blocks exceed gridDim.x <= 2147483647");
  only(m).launch.rows_per_block = 2; // ceil(rows / 2) blocks
  expect_route(m, contiguous_call(DType::kFloat32, 2 * kMaxGridX, 1), Route::kCandidate, "");
  expect_route(m, contiguous_call(DType::kFloat32, 2 * kMaxGridX + 1, 1), Route::kReference,
               "2147483648 blocks exceed gridDim.x <= 2147483647");
}

TEST(WrapperLaunchPlanTest, PerRowsLaunchesCeilRowsOverRowsPerBlock) {
  Manifest m = manifest_all();
  only(m).launch.rows_per_block = 4;
  const HostTensor x = HostTensor::zeros({217, 96}, DType::kFloat32);
  const HostTensor w = HostTensor::zeros({96}, DType::kFloat32);
  const LaunchPlan p = plan(m, geom(x, w), DeviceInfo{}, 0);
  EXPECT_EQ(p.grid, 55);
  EXPECT_EQ(p.block, 256);
  EXPECT_EQ(p.dynamic_smem, 0);
}

TEST(WrapperLaunchPlanTest, PersistentGridIsOccupancyTimesSmsCappedByRowBlocks) {
  Manifest m = manifest_all();
  only(m).launch.grid = GridKind::kPersistent;
  const HostTensor big = HostTensor::zeros({65536, 8}, DType::kFloat32);
  const HostTensor small = HostTensor::zeros({100, 8}, DType::kFloat32);
  const HostTensor w = HostTensor::zeros({8}, DType::kFloat32);
  DeviceInfo dev;
  dev.sm_count = 132;
  EXPECT_EQ(plan(m, geom(big, w), dev, 4).grid, 528);
  EXPECT_EQ(plan(m, geom(small, w), dev, 4).grid, 100);
  EXPECT_EQ(plan(m, geom(big, w), dev, 0).grid, 0); // nothing fits: caller reports it
}

// fixed_bytes + bytes_per_h * H; above kDefaultDynamicSmemBytes the GPU worker raises the
// kernel's limit (evaluator/gpu_worker/launch.cpp).
TEST(WrapperLaunchPlanTest, DynamicSharedMemoryIsFixedPlusPerHTimesH) {
  Manifest m = manifest_all();
  only(m).launch.smem_fixed_bytes = 1024;
  only(m).launch.smem_bytes_per_unit = 4;
  const HostTensor w = HostTensor::zeros({16384}, DType::kFloat32);
  const HostTensor x = HostTensor::zeros({1, 16384}, DType::kFloat32);
  const LaunchPlan p = plan(m, geom(x, w), DeviceInfo{}, 1);
  EXPECT_EQ(p.dynamic_smem, 1024 + 4 * 16384);
  EXPECT_GT(p.dynamic_smem, kDefaultDynamicSmemBytes);
}

TEST(WrapperPathCountsTest, CountsEachRouteSeparately) {
  PathCounts c;
  c.add(Route::kCandidate);
  c.add(Route::kCandidate);
  c.add(Route::kReference);
  c.add(Route::kNoLaunch);
  EXPECT_EQ(c.to_json(), (nlohmann::json{{"candidate", 2}, {"reference", 1}, {"no_launch", 1}}));
}

} // namespace
} // namespace kloop::op
