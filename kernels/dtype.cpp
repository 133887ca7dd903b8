// Host-side dtype names and IEEE 754 binary16 / bfloat16 conversions (round to nearest even).
#include "kernels/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace kloop {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
  case DType::kFloat32:
    return "float32";
  case DType::kFloat16:
    return "float16";
  case DType::kBFloat16:
    return "bfloat16";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

std::size_t dtype_bytes(DType dtype) {
  return dtype == DType::kFloat32 ? 4 : 2;
}

float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  std::uint32_t mant = bits & 0x3ffu;
  std::uint32_t out = 0;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13); // Inf or NaN (payload kept)
  } else if (exp != 0) {
    out = sign | ((exp + 112) << 23) | (mant << 13); // rebias 15 -> 127
  } else if (mant == 0) {
    out = sign; // signed zero
  } else {
    // Subnormal half: value = mant * 2^-24; normalise into a float.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    out = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  const std::uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) { // Inf or NaN
    if (abs == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu)); // quiet NaN
  }
  // Largest float that rounds to the largest finite half (65504) is just below 65520.
  if (abs >= 0x477ff000u) return sign | 0x7c00u;
  if (abs >= 0x38800000u) { // normal half range (>= 2^-14)
    const std::uint32_t mant = abs & 0x7fffffu;
    const std::uint32_t exp = (abs >> 23) - 112;
    std::uint32_t h = (exp << 10) | (mant >> 13);
    const std::uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; // RNE; carry into exp is correct
    return static_cast<std::uint16_t>(sign | h);
  }
  if (abs < 0x33000000u) return sign; // below half of the smallest subnormal (2^-25): zero
  // Subnormal half: value / 2^-24 rounded to nearest even integer.
  const std::uint32_t exp = abs >> 23;
  const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exp; // so that result = mant >> shift (in units of 2^-24)
  std::uint32_t h = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((f >> 16) | 0x0040u); // NaN: keep sign, force quiet
  }
  const std::uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<std::uint16_t>((f + rounding) >> 16); // overflow rounds to Inf correctly
}

double output_ulp(DType dtype, double value) {
  int digits = 24, emin = -126, emax = 127; // IEEE binary32
  if (dtype == DType::kFloat16) {
    digits = 11;
    emin = -14;
    emax = 15;
  } else if (dtype == DType::kBFloat16) {
    digits = 8;
  }
  int e = emax;
  if (std::isfinite(value) && value != 0) {
    std::frexp(value, &e); // |value| = m * 2^e, m in [0.5, 1)
    e = std::clamp(e - 1, emin, emax);
  } else if (value == 0) {
    e = emin;
  }
  return std::ldexp(1.0, e - digits + 1);
}

} // namespace kloop
