// The shared PRNG and row layouts of the case families (case_layout.h).
#include "kernels/case_layout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kloop::op {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

std::int64_t product(const std::vector<std::int64_t>& v, std::size_t from = 0) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < v.size(); ++i)
    p *= v[i];
  return p;
}

} // namespace

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

std::int64_t Rng::between(std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
}

std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string_view layout_kind_name(LayoutKind kind) {
  for (const auto& [k, name] : kLayoutKindNames)
    if (k == kind) return name;
  return "unknown";
}

void fill_storage_nan(const HostTensor& t) {
  const std::int64_t n = static_cast<std::int64_t>(t.storage_bytes().size() / t.element_bytes());
  HostTensor flat = t.as_strided({n}, {1}, 0);
  for (std::int64_t i = 0; i < n; ++i)
    flat.set(i, std::numeric_limits<float>::quiet_NaN());
}

RowsViewLayout rows_view_layout(const std::vector<std::int64_t>& outer, std::int64_t width,
                                LayoutKind layout, std::int64_t gap, std::int64_t offset) {
  RowsViewLayout v;
  v.shape = outer;
  v.shape.push_back(width);
  const std::int64_t rows = product(outer);
  const std::size_t nd = v.shape.size();
  v.strides = contiguous_strides(v.shape);
  v.offset = offset;
  v.storage_elements = offset + rows * width;
  switch (layout) {
  case LayoutKind::kContiguous:
  case LayoutKind::kStorageOffset:
  case LayoutKind::k3d:
    break;
  case LayoutKind::kTransposed: {
    // A contiguous [width, outer...] buffer viewed with the width dim moved last.
    v.strides[nd - 1] = std::max<std::int64_t>(rows, 1);
    auto outer_strides = contiguous_strides(outer);
    for (std::size_t i = 0; i + 1 < nd; ++i)
      v.strides[i] = outer_strides[i];
    break;
  }
  case LayoutKind::kSlicedGaps:
    if (!outer.empty()) {
      v.strides[0] = product(outer, 1) * width + gap;
      v.storage_elements = offset + outer[0] * v.strides[0];
    }
    break;
  case LayoutKind::kExpanded:
    if (!outer.empty()) {
      v.strides[0] = 0;
      v.storage_elements = offset + product(outer, 1) * width;
    }
    break;
  }
  return v;
}

HostTensor make_rows_view(DType dtype, const std::vector<std::int64_t>& outer, std::int64_t width,
                          LayoutKind layout, std::int64_t gap, std::int64_t offset) {
  RowsViewLayout v = rows_view_layout(outer, width, layout, gap, offset);
  HostTensor x = HostTensor::strided(static_cast<std::size_t>(v.storage_elements), to_dl(dtype),
                                     std::move(v.shape), std::move(v.strides), v.offset);
  fill_storage_nan(x);
  return x;
}

std::string dims_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string value_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.9g}", v);
}

SpecFields::SpecFields(const nlohmann::json& j) : j_(j) {
  if (!j.is_object()) throw std::invalid_argument("case spec: expected a JSON object");
}

const nlohmann::json& SpecFields::at(const char* key) const {
  if (!j_.contains(key))
    throw std::invalid_argument(fmt::format("case spec: missing field '{}'", key));
  return j_.at(key);
}

std::int64_t SpecFields::integer(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number_integer())
    throw std::invalid_argument(fmt::format("case spec: field '{}' must be an integer", key));
  return v.get<std::int64_t>();
}

std::string SpecFields::text(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_string())
    throw std::invalid_argument(fmt::format("case spec: field '{}' must be a string", key));
  return v.get<std::string>();
}

std::vector<std::int64_t> SpecFields::dims(const char* key) const {
  const nlohmann::json& v = at(key);
  std::vector<std::int64_t> out;
  if (v.is_array())
    for (const nlohmann::json& d : v) {
      if (!d.is_number_integer()) break;
      out.push_back(d.get<std::int64_t>());
    }
  if (!v.is_array() || out.size() != v.size())
    throw std::invalid_argument(
        fmt::format("case spec: field '{}' must be an array of integers, got {}", key, v.dump()));
  return out;
}

DType SpecFields::dtype(const char* key) const {
  const nlohmann::json& v = at(key);
  const auto d = v.is_string() ? parse_dtype(v.get<std::string>()) : std::nullopt;
  if (!d)
    throw std::invalid_argument(fmt::format(
        "case spec: field '{}' = {} is not float32, float16 or bfloat16", key, v.dump()));
  return *d;
}

std::uint64_t SpecFields::seed(const char* key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    throw std::invalid_argument(
        fmt::format("case spec: field '{}' must be an unsigned integer", key));
  return v.get<std::uint64_t>();
}

} // namespace kloop::op
