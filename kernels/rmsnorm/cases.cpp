// CaseSpec serialisation, the deterministic PRNG and the materializer of case inputs.
#include "kernels/rmsnorm/cases.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace kloop::rmsnorm {

namespace {

template <typename E, std::size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return "unknown";
}

template <typename E, std::size_t N>
E parse_enum(const std::array<std::pair<E, std::string_view>, N>& table, const nlohmann::json& j,
             std::string_view field) {
  if (j.is_string()) {
    for (const auto& [e, name] : table) {
      if (name == j.get<std::string>()) return e;
    }
  }
  std::string allowed;
  for (const auto& [e, name] : table)
    allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", name);
  throw std::invalid_argument(
      fmt::format("case spec: field '{}' = {} is not one of: {}", field, j.dump(), allowed));
}

constexpr std::array<std::pair<LayoutKind, std::string_view>, 6> kLayouts{{
    {LayoutKind::kContiguous, "contiguous"},
    {LayoutKind::kTransposed, "transposed"},
    {LayoutKind::kSlicedGaps, "sliced_gaps"},
    {LayoutKind::kStorageOffset, "storage_offset"},
    {LayoutKind::kExpanded, "expanded"},
    {LayoutKind::k3d, "3d"},
}};
constexpr std::array<std::pair<ValueFamily, std::string_view>, 15> kValues{{
    {ValueFamily::kNormal, "normal"},
    {ValueFamily::kZeros, "zeros"},
    {ValueFamily::kSubnormals, "subnormals"},
    {ValueFamily::kMixedMagnitudes, "mixed_magnitudes"},
    {ValueFamily::kBig1e19, "big_1e19"},
    {ValueFamily::kBig2e19, "big_2e19"},
    {ValueFamily::kNanInf, "nan_inf"},
    {ValueFamily::kConstantRows, "constant_rows"},
    {ValueFamily::kHeavyTailed, "heavy_tailed"},
    {ValueFamily::kTinyRow, "tiny_row"},
    {ValueFamily::kConstant300, "constant_300"},
    {ValueFamily::kZeroAndSmallRow, "zero_and_small_row"},
    {ValueFamily::kArange, "arange"},
    {ValueFamily::kOutlierChannels, "outlier_channels"},
    {ValueFamily::kRowScales, "row_scales"},
}};
constexpr std::array<std::pair<WeightFamily, std::string_view>, 2> kWeights{{
    {WeightFamily::kRandomSigned, "random_signed"},
    {WeightFamily::kOnes, "ones"},
}};
constexpr std::array<std::pair<InvalidKind, std::string_view>, 16> kInvalids{{
    {InvalidKind::kNone, "none"},
    {InvalidKind::kWeightShape, "weight_shape"},
    {InvalidKind::kDtypeMismatch, "dtype_mismatch"},
    {InvalidKind::kUnsupportedDtype, "unsupported_dtype"},
    {InvalidKind::kDeviceMismatch, "device_mismatch"},
    {InvalidKind::kNonStrided, "non_strided"},
    {InvalidKind::kZeroWidth, "zero_width"},
    {InvalidKind::kScalarX, "scalar_x"},
    {InvalidKind::kEpsZero, "eps_zero"},
    {InvalidKind::kEpsNegative, "eps_negative"},
    {InvalidKind::kEpsNan, "eps_nan"},
    {InvalidKind::kEpsInf, "eps_inf"},
    {InvalidKind::kEpsUnderflowFp32, "eps_underflow_fp32"},
    {InvalidKind::kEpsOverflowFp32, "eps_overflow_fp32"},
    {InvalidKind::kEpsBool, "eps_bool"},
    {InvalidKind::kEpsHugeInt, "eps_huge_int"},
}};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

} // namespace

std::string_view layout_kind_name(LayoutKind kind) {
  return name_of(kLayouts, kind);
}
std::string_view value_family_name(ValueFamily family) {
  return name_of(kValues, family);
}
std::string_view weight_family_name(WeightFamily family) {
  return name_of(kWeights, family);
}
std::string_view invalid_kind_name(InvalidKind kind) {
  return name_of(kInvalids, kind);
}

Rng::Rng(std::uint64_t seed) {
  for (auto& s : s_)
    s = splitmix64(seed);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double Rng::normal() {
  double sum = 0;
  for (int i = 0; i < 12; ++i)
    sum += uniform();
  return sum - 6.0;
}

std::int64_t CaseSpec::rows() const {
  std::int64_t r = 1;
  for (auto d : outer)
    r *= d;
  return r;
}

std::int64_t CaseSpec::numel() const {
  return rows() * h;
}

nlohmann::json CaseSpec::to_json() const {
  return {{"name", name},
          {"family", family},
          {"dtype", dtype_name(dtype)},
          {"outer", outer},
          {"h", h},
          {"layout", layout_kind_name(layout)},
          {"gap", gap},
          {"offset", offset},
          {"weight_offset", weight_offset},
          {"values", value_family_name(values)},
          {"weight", weight_family_name(weight)},
          {"eps", eps.to_json()},
          {"invalid", invalid_kind_name(invalid)},
          {"seed", seed}};
}

CaseSpec CaseSpec::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("case spec: expected a JSON object");
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) {
      throw std::invalid_argument(fmt::format("case spec: missing field '{}'", key));
    }
    return j.at(key);
  };
  auto integer = [&](const char* key) {
    const auto& v = field(key);
    if (!v.is_number_integer()) {
      throw std::invalid_argument(fmt::format("case spec: field '{}' must be an integer", key));
    }
    return v.get<std::int64_t>();
  };
  CaseSpec s;
  try {
    s.name = field("name").get<std::string>();
    s.family = field("family").get<std::string>();
    s.outer = field("outer").get<std::vector<std::int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(
        fmt::format("case spec: wrong type in name/family/outer: {}", e.what()));
  }
  const auto dtype =
      field("dtype").is_string() ? parse_dtype(field("dtype").get<std::string>()) : std::nullopt;
  if (!dtype) {
    throw std::invalid_argument(
        fmt::format("case spec: field 'dtype' = {} is not float32, float16 or bfloat16",
                    field("dtype").dump()));
  }
  s.dtype = *dtype;
  s.h = integer("h");
  s.layout = parse_enum(kLayouts, field("layout"), "layout");
  s.gap = integer("gap");
  s.offset = integer("offset");
  s.weight_offset = integer("weight_offset");
  s.values = parse_enum(kValues, field("values"), "values");
  s.weight = parse_enum(kWeights, field("weight"), "weight");
  s.eps = EpsScalar::from_json(field("eps"));
  s.invalid = parse_enum(kInvalids, field("invalid"), "invalid");
  if (!field("seed").is_number_unsigned() && !field("seed").is_number_integer()) {
    throw std::invalid_argument("case spec: field 'seed' must be an unsigned integer");
  }
  s.seed = field("seed").get<std::uint64_t>();
  return s;
}

} // namespace kloop::rmsnorm
