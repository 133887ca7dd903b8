// Unit tests of evaluator/roofline: the seed's byte formula, bandwidth units, the copy ceiling,
// shape classes and the physical plausibility floor.
#include <gtest/gtest.h>

#include "evaluator/roofline.h"
#include "kernels/rmsnorm/operator.h"

namespace kloop::evaluator::roofline {
namespace {

// weighted_rmsnorm/1's roofline: x [rows, h], weight [h], y [rows, h].
LogicalBytes logical_bytes(std::int64_t rows, std::int64_t h, DType dtype) {
  return roofline::logical_bytes(rmsnorm::declaration(), {rows, {h}, dtype});
}
std::string_view shape_class(std::int64_t rows, std::int64_t h, DType dtype) {
  return roofline::shape_class(rmsnorm::declaration(), {rows, {h}, dtype});
}

TEST(RooflineTest, LogicalBytesFollowTheSeedFormula) {
  // fp16: 6H bytes per row with per-row weight reads (6NH); (2NH + H) * 2 unique.
  const auto b = logical_bytes(10400, 1000, DType::kFloat16);
  EXPECT_EQ(b.with_rereads(), 6LL * 10400 * 1000);
  EXPECT_EQ(b.unique(), (2LL * 10400 * 1000 + 1000) * 2);
  EXPECT_EQ(b.to_json()["weight_reread"], 10399LL * 1000 * 2);
  EXPECT_EQ(b.to_json()["x_read"], 10400LL * 1000 * 2);
  EXPECT_EQ(b.to_json()["weight_read"], 1000LL * 2);
  EXPECT_EQ(b.to_json()["y_write"], 10400LL * 1000 * 2);
  EXPECT_EQ(bytes_formula(rmsnorm::declaration()),
            "unique = x read + weight read once + y write = (2*rows*h + h) * elem; "
            "with_rereads adds (rows-1)*h*elem weight re-reads");
  EXPECT_EQ(logical_bytes(1, 7, DType::kFloat32).unique(), 3 * 7 * 4);
  EXPECT_THROW(logical_bytes(0, 7, DType::kFloat32), std::invalid_argument);
}

TEST(RooflineTest, EffectiveBandwidthMatchesTheSeedExample) {
  // Seed: 6*10400*1000 bytes in 12 us -> 5.20 TB/s.
  EXPECT_NEAR(effective_tbps(6LL * 10400 * 1000, 12e-3), 5.2, 1e-9);
  EXPECT_THROW(effective_tbps(1, 0), std::invalid_argument);
}

TEST(RooflineTest, CopyCeilingCountsReadAndWriteAndRejectsSmallCopies) {
  // DEVICE.md: 1 GiB in 0.510 ms -> about 4.2 TB/s.
  EXPECT_NEAR(copy_ceiling_tbps(kMinCopyBytes, 0.510), 4.21, 0.01);
  EXPECT_THROW(copy_ceiling_tbps(kMinCopyBytes / 2, 0.1), std::invalid_argument);
}

TEST(RooflineTest, ShapeClassesOfTheContractSweep) {
  EXPECT_EQ(shape_class(8, 4096, DType::kBFloat16), "launch_bound");
  EXPECT_EQ(shape_class(65536, 128, DType::kFloat32), "narrow");
  EXPECT_EQ(shape_class(32768, 1009, DType::kBFloat16), "odd");
  EXPECT_EQ(shape_class(4096, 4099, DType::kFloat32), "odd");
  EXPECT_EQ(shape_class(2048, 16384, DType::kBFloat16), "wide");
  EXPECT_EQ(shape_class(4096, 8192, DType::kFloat16), "wide");
  EXPECT_EQ(shape_class(65536, 4096, DType::kBFloat16), "streaming");
  EXPECT_EQ(shape_class(16384, 4096, DType::kFloat32), "streaming");
}

TEST(RooflineTest, ColdCallsMustReadInputsFromDram) {
  const auto b = logical_bytes(65536, 4096, DType::kBFloat16); // x = y = 512 MiB
  const std::int64_t l2 = 60LL << 20;
  EXPECT_EQ(must_reach_dram_bytes(b, l2, true),
            b.part("x_read") + b.part("weight_read") + b.part("y_write") - l2);
  EXPECT_EQ(must_reach_dram_bytes(b, l2, false),
            (b.part("x_read") - l2) + (b.part("y_write") - l2));
  const auto small = logical_bytes(8, 4096, DType::kBFloat16);
  EXPECT_EQ(must_reach_dram_bytes(small, l2, false), 0);
  EXPECT_EQ(must_reach_dram_bytes(small, l2, true),
            small.part("x_read") + small.part("weight_read"));
}

TEST(RooflineTest, TimeBelowTheCopyCeilingFloorIsImplausible) {
  const std::int64_t bytes = 1LL << 30; // 1 GiB must reach DRAM
  const double ceiling = 4.2;
  // 1 GiB at 4.2 TB/s * 1.05 takes 0.2435 ms.
  const auto ok = check_plausible(bytes, 0.30, ceiling);
  EXPECT_TRUE(ok.checked);
  EXPECT_TRUE(ok.plausible);
  EXPECT_NEAR(ok.dram_floor_ms, 1073741824.0 / (4.41e12) * 1e3, 1e-9);
  const auto bad = check_plausible(bytes, 0.20, ceiling);
  EXPECT_FALSE(bad.plausible);
  EXPECT_GT(bad.implied_tbps, ceiling * 1.05);
  EXPECT_FALSE(check_plausible(0, 0.001, ceiling).checked);
}

} // namespace
} // namespace kloop::evaluator::roofline
