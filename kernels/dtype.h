// Floating dtypes of the operator contracts and their host-side conversions. fp16/bf16 conversions
// from float round to nearest even (IEEE 754 roundTiesToEven), as the CUDA intrinsics
// __float2half_rn and __float2bfloat16_rn do; NaN stays NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kloop {

// Persisted in the store: the values are fixed and never reused.
enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// "float32", "float16", "bfloat16" (the manifest's and the contract's spelling).
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; std::nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);
// Bytes per element: 4, 2, 2.
std::size_t dtype_bytes(DType dtype);

float half_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_half_bits(float value); // round to nearest even, overflow to +-Inf
float bf16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16_bits(float value); // round to nearest even, NaN kept quiet

// The spacing of `dtype`'s values at |value| (one ulp): 2^(e - p + 1) for |value| in [2^e, 2^(e+1))
// with p = 24 (float32), 11 (float16), 8 (bfloat16) significand bits, and the subnormal spacing
// below the smallest normal (2^-149, 2^-24, 2^-133). For a non-finite value: the largest normal
// binade's spacing. The unit in which the correctness gate reports an error.
double output_ulp(DType dtype, double value);

} // namespace kloop
