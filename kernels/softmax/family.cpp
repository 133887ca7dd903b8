// The softmax offline family (family.h): variant names, constraints, the curated set, and the
// source and manifest emitters.
#include "kernels/softmax/family.h"

#include <charconv>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/softmax/contract.h"

namespace kloop::softmax {

namespace {

bool power_of_two(int v) {
  return v > 0 && (v & (v - 1)) == 0;
}

// Registers a thread's cache takes.
int cache_registers(const Variant& v) {
  return v.cached_units * (v.vec_bytes == 0 ? 1 : v.vec_bytes / 4);
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

} // namespace

int Variant::rows_per_block() const {
  return threads_per_row == 0 ? 1 : block_threads / threads_per_row;
}

std::optional<std::string> validate(const Variant& v) {
  if (v.vec_bytes != 0 && v.vec_bytes != 8 && v.vec_bytes != 16)
    return fmt::format("vec_bytes = {}: allowed 0, 8, 16", v.vec_bytes);
  if (!power_of_two(v.block_threads) || v.block_threads < 64 || v.block_threads > 1024)
    return fmt::format("block_threads = {}: allowed a power of two in [64, 1024]", v.block_threads);
  if (v.threads_per_row != 0 &&
      (!power_of_two(v.threads_per_row) || v.threads_per_row > v.block_threads))
    return fmt::format("threads_per_row = {}: allowed 0 (per call) or a power of two in [1, "
                       "block_threads = {}]",
                       v.threads_per_row, v.block_threads);
  if (v.cached_units < 1 || v.cached_units > 16)
    return fmt::format("cached_units = {}: allowed [1, 16]", v.cached_units);
  if (cache_registers(v) > 28)
    return fmt::format("cached_units = {} at vec_bytes {} takes {} registers: at most 28 of the "
                       "64 the launch bound leaves",
                       v.cached_units, v.vec_bytes, cache_registers(v));
  if (v.threads_per_row == 0 && v.grid != FamilyGrid::kPersistent)
    return std::string("threads_per_row 0 (per call) needs the persistent grid");
  return std::nullopt;
}

std::string variant_name(const Variant& v) {
  return fmt::format("v{}-b{}-t{}-c{}-{}-{}", v.vec_bytes, v.block_threads,
                     v.threads_per_row == 0 ? std::string("auto")
                                            : std::to_string(v.threads_per_row),
                     v.cached_units, v.pass == Pass::kOnline ? "online" : "twopass",
                     v.grid == FamilyGrid::kPersistent ? "pers" : "rows");
}

std::optional<Variant> variant_by_name(std::string_view name) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t dash = name.find('-', start);
    parts.push_back(name.substr(start, dash == std::string_view::npos ? dash : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  if (parts.size() != 6) return std::nullopt;
  auto number = [](std::string_view part, char tag) -> std::optional<int> {
    if (part.empty() || part[0] != tag) return std::nullopt;
    return parse_int(part.substr(1));
  };
  Variant v;
  const auto vec = number(parts[0], 'v'), block = number(parts[1], 'b'),
             cache = number(parts[3], 'c');
  const auto tpr = parts[2] == "tauto" ? std::optional<int>(0) : number(parts[2], 't');
  if (!vec || !block || !cache || !tpr || (parts[2] != "tauto" && *tpr == 0)) return std::nullopt;
  v.vec_bytes = *vec;
  v.block_threads = *block;
  v.threads_per_row = *tpr;
  v.cached_units = *cache;
  if (parts[4] == "online")
    v.pass = Pass::kOnline;
  else if (parts[4] == "twopass")
    v.pass = Pass::kTwoPass;
  else
    return std::nullopt;
  if (parts[5] == "pers")
    v.grid = FamilyGrid::kPersistent;
  else if (parts[5] == "rows")
    v.grid = FamilyGrid::kPerRows;
  else
    return std::nullopt;
  if (validate(v) || variant_name(v) != name) return std::nullopt;
  return v;
}

const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> curated = [] {
    std::vector<Variant> out;
    for (const char* name :
         {"v0-b256-t32-c8-twopass-rows",     // safe default: scalar, a warp per row
          "v16-b256-t32-c4-twopass-rows",    // vectors, a warp per row
          "v16-b512-tauto-c6-online-pers",   // the baseline (flagship)
          "v16-b512-tauto-c6-twopass-pers",  // the same geometry, max and sum apart
          "v16-b1024-tauto-c4-online-pers",  // the whole 64 KiB bf16 row of 32768 cached
          "v16-b256-tauto-c6-online-pers",   // smaller blocks, more of them per SM
          "v8-b512-tauto-c12-online-pers",   // 8-byte vectors (8-byte aligned rows)
          "v16-b1024-tauto-c4-twopass-pers", // the widest block, two passes
          "v16-b128-t32-c7-online-rows"})    // a warp per row, four rows per block
      out.push_back(*variant_by_name(name));
    return out;
  }();
  return curated;
}

Variant flagship_variant() {
  return *variant_by_name("v16-b512-tauto-c6-online-pers");
}

} // namespace kloop::softmax
