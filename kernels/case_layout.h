// What the operators' case families share (issue 25: "the layout and value families shared in one
// place and reused"): the deterministic PRNG every case is drawn from (splitmix64 seeding
// xoshiro256**, normals from an Irwin-Hall sum: no libm transcendental function, so the same spec
// gives the same bytes on every machine) and the row layouts of a batched input tensor
// [outer..., width] in its storage (contiguous, transposed, sliced with gaps, at a storage offset,
// expanded, 3-D outer), with every storage element NaN before the logical elements are written,
// so that a kernel reading a gap or an offset's head produces a visible NaN. The value families
// stay with each operator (what stresses RMSNorm's sum of squares is not what stresses softmax's
// max and exponentials).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/dtype.h"
#include "kernels/tensor.h"

namespace kloop::op {

// The deterministic PRNG (xoshiro256** seeded through splitmix64).
class Rng {
public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform(); // [0, 1) with 53 random bits
  double normal();  // Irwin-Hall(12) - 6: mean 0, variance 1, |value| <= 6
  // Uniform integer in [lo, hi] (hi >= lo), by `next() % (hi - lo + 1)`.
  std::int64_t between(std::int64_t lo, std::int64_t hi);

private:
  std::uint64_t s_[4];
};

// The splitmix64 finaliser: a fixed hash of `z` (per-channel or per-row choices that do not
// consume the value stream).
std::uint64_t mix64(std::uint64_t z);

// How a batched input [outer..., width] lies in its storage. Strides are in elements.
enum class LayoutKind {
  kContiguous,    // row-major
  kTransposed,    // built as a contiguous [width, outer...] tensor then permuted (last stride != 1)
  kSlicedGaps,    // the first outer dim's stride grows by `gap` elements (qkv[:, :2048] style)
  kStorageOffset, // contiguous at storage offset `offset` (>= 1; buf[1:] style)
  kExpanded,      // the first outer dim has stride 0 (base[:1].expand(...))
  k3d,            // contiguous with a multi-dimensional outer shape (same as kContiguous)
};

// The case specs' spelling of each layout ("contiguous", "transposed", "sliced_gaps",
// "storage_offset", "expanded", "3d"): persisted in suites, part of their hashes.
inline constexpr std::array<std::pair<LayoutKind, std::string_view>, 6> kLayoutKindNames{{
    {LayoutKind::kContiguous, "contiguous"},
    {LayoutKind::kTransposed, "transposed"},
    {LayoutKind::kSlicedGaps, "sliced_gaps"},
    {LayoutKind::kStorageOffset, "storage_offset"},
    {LayoutKind::kExpanded, "expanded"},
    {LayoutKind::k3d, "3d"},
}};
std::string_view layout_kind_name(LayoutKind kind);

// The view of a batched input of shape [outer..., width] laid out per `layout`, in elements:
// strides (kTransposed: the width dim's stride is rows; kSlicedGaps: the first outer dim's stride
// has `gap` extra elements; kExpanded: the first outer dim's stride is 0), storage offset
// (`offset` elements before element 0, any layout) and the storage length it needs. Pure
// arithmetic; allocates nothing.
struct RowsViewLayout {
  std::vector<std::int64_t> shape, strides;
  std::int64_t offset = 0;
  std::int64_t storage_elements = 0;
};
RowsViewLayout rows_view_layout(const std::vector<std::int64_t>& outer, std::int64_t width,
                                LayoutKind layout, std::int64_t gap, std::int64_t offset);

// That view of `dtype` in fresh storage whose every element is NaN. Needs width, gap, offset and
// every outer dim >= 0.
HostTensor make_rows_view(DType dtype, const std::vector<std::int64_t>& outer, std::int64_t width,
                          LayoutKind layout, std::int64_t gap, std::int64_t offset);

// Writes NaN into every element of `t`'s storage (views included).
void fill_storage_nan(const HostTensor& t);

// "[4, 16, 128]": a shape or stride list as the feedback prints it.
std::string dims_text(const std::vector<std::int64_t>& v);
// A value as the feedback prints it: "nan", "inf", "-inf", or 9 significant digits.
std::string value_text(double v);

// The name of `value` in a (value, name) table of a case spec's enum field; "unknown" if absent.
template <typename E, std::size_t N>
std::string_view enum_name(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [e, name] : table)
    if (e == value) return name;
  return "unknown";
}

// The value the JSON string `j` names in `table`; throws std::invalid_argument "case spec: field
// '<field>' = <j> is not one of: <names>" for anything else.
template <typename E, std::size_t N>
E parse_enum(const std::array<std::pair<E, std::string_view>, N>& table, const nlohmann::json& j,
             std::string_view field) {
  if (j.is_string())
    for (const auto& [e, name] : table)
      if (name == j.get<std::string>()) return e;
  std::string allowed;
  for (const auto& [e, name] : table)
    allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", name);
  throw std::invalid_argument(
      fmt::format("case spec: field '{}' = {} is not one of: {}", field, j.dump(), allowed));
}

// The JSON of every spec of a suite (Spec::to_json), in order: what Operator::suite returns.
template <typename Spec> std::vector<nlohmann::json> specs_json(const std::vector<Spec>& specs) {
  std::vector<nlohmann::json> out;
  out.reserve(specs.size());
  for (const Spec& s : specs)
    out.push_back(s.to_json());
  return out;
}

// The fields of one case spec JSON object, read with errors that name the field: "case spec:
// missing field 'h'", "case spec: field 'h' must be an integer", ... (std::invalid_argument).
class SpecFields {
public:
  explicit SpecFields(const nlohmann::json& j); // throws unless `j` is an object
  const nlohmann::json& at(const char* key) const;
  std::int64_t integer(const char* key) const;
  std::string text(const char* key) const;
  std::vector<std::int64_t> dims(const char* key) const;
  DType dtype(const char* key) const;
  std::uint64_t seed(const char* key) const; // an unsigned (or non-negative) integer
  template <typename E, std::size_t N>
  E choice(const std::array<std::pair<E, std::string_view>, N>& table, const char* key) const {
    return parse_enum(table, at(key), key);
  }

private:
  const nlohmann::json& j_;
};

} // namespace kloop::op
