// DType names and fp16/bf16 conversions: round to nearest even, NaN, Inf, subnormals.
#include <bit>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "kernels/dtype.h"

namespace kloop {
namespace {

TEST(DTypeTest, NamesRoundTripAndSizes) {
  for (DType d : kAllDTypes)
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_EQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_FALSE(parse_dtype("float64").has_value());
  EXPECT_EQ(dtype_bytes(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_bytes(DType::kFloat16), 2u);
  EXPECT_EQ(dtype_bytes(DType::kBFloat16), 2u);
}

TEST(DTypeTest, HalfExactValuesRoundTrip) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = half_bits_to_float(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), bits) << "bits " << b;
  }
}

TEST(DTypeTest, HalfRoundsTiesToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1.0p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * 0x1.0p-11f), 0x3c02);
  // Just above the tie rounds up.
  EXPECT_EQ(float_to_half_bits(std::nextafter(1.0f + 0x1.0p-11f, 2.0f)), 0x3c01);
}

TEST(DTypeTest, HalfOverflowSubnormalsAndNaN) {
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00); // tie above max rounds to Inf
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half_bits(0x1.0p-24f), 0x0001); // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1.0p-25f), 0x0000); // tie to even zero
  EXPECT_EQ(float_to_half_bits(0x1.8p-24f), 0x0002); // 1.5 ulp ties to even 2
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits_to_float(0x0001), 0x1.0p-24f);
  EXPECT_EQ(half_bits_to_float(0x03ff), 0x1.ff8p-15f);
  const std::uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(half_bits_to_float(nan)));
  // A signalling NaN whose payload sits only in the low bits stays NaN (quiet bit forced).
  EXPECT_TRUE(
      std::isnan(half_bits_to_float(float_to_half_bits(std::bit_cast<float>(0x7f800001u)))));
}

TEST(DTypeTest, BFloat16RoundsTiesToEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1.0p-8f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1.0p-8f), 0x3f82);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80); // rounds to Inf
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  const std::uint16_t nan = float_to_bf16_bits(std::bit_cast<float>(0x7f800001u));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(nan)));
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0xffc00000u)), 0xffc0); // sign kept
  EXPECT_EQ(float_to_bf16_bits(0x1.0p-133f), 0x0001);                       // bf16 subnormal
}

} // namespace
} // namespace kloop
