// Variant validation, canonical names, the manifest emitted with each variant, and the curated set
// of the offline family (family.h).
#include "kernels/rmsnorm/family.h"

#include <algorithm>
#include <cstdint>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/manifest.h"
#include "kernels/rmsnorm/contract.h"

namespace kloop::rmsnorm {
namespace {

bool is_pow2(int v) {
  return v > 0 && (v & (v - 1)) == 0;
}

constexpr int kFamilyHMax = 65536;
// Dynamic shared memory beyond vec_bytes * H for staged weight copies: (elements per vector - 1)
// * vec_bytes <= 112 bytes, rounded up.
constexpr int kStageFixedBytes = 128;

int static_smem_bytes(const Variant& v) {
  if (v.reduction == Reduction::kSharedTree) return 4 * v.block_threads;
  const bool wide = v.threads_per_row == 0 ? v.block_threads > 32 : v.threads_per_row > 32;
  return wide ? 2 * 4 * (v.block_threads / 32) : 0; // two buffers (iteration parity)
}

} // namespace

bool Variant::baseline_entry(std::string_view type) const {
  return (float32_baseline && type == "float") || (float16_baseline && type == "__half") ||
         (bfloat16_baseline && type == "__nv_bfloat16");
}

int Variant::rows_per_block() const {
  return threads_per_row > 0 ? block_threads / threads_per_row : 1;
}

std::optional<std::string> validate(const Variant& v) {
  if (v.vec_bytes != 0 && v.vec_bytes != 8 && v.vec_bytes != 16)
    return fmt::format("vec_bytes = {} is not allowed; use 0 (scalar), 8 or 16", v.vec_bytes);
  if (v.block_threads < 32 || v.block_threads > 1024 || v.block_threads % 32 != 0)
    return fmt::format("block_threads = {} is not allowed; use a multiple of 32 in [32, 1024]",
                       v.block_threads);
  if (v.threads_per_row != 0 &&
      (!is_pow2(v.threads_per_row) || v.threads_per_row < 4 || v.threads_per_row > v.block_threads))
    return fmt::format("threads_per_row = {} is not allowed; use 0 (run time) or a power of two "
                       "in [4, block_threads = {}]",
                       v.threads_per_row, v.block_threads);
  if (v.threads_per_row == 0 && !is_pow2(v.block_threads))
    return fmt::format("block_threads = {} must be a power of two when threads_per_row is chosen "
                       "at run time",
                       v.block_threads);
  if (v.threads_per_row == 0 && v.grid != FamilyGrid::kPersistent)
    return "threads_per_row = 0 (run time) needs grid = persistent: the per_rows grid fixes "
           "rows_per_block in the manifest";
  if (v.cached_vecs < 0 || v.cached_vecs > 16)
    return fmt::format("cached_vecs = {} is not allowed; use 0..16 (more risks spills)",
                       v.cached_vecs);
  if (v.vec_bytes == 0 && v.peel)
    return "peel = true needs vec_bytes 8 or 16 (a scalar body needs no alignment peel)";
  if (v.stage_weight && (v.vec_bytes == 0 || !v.peel))
    return "stage_weight = true needs vec_bytes 8 or 16 and peel = true";
  if (v.evict_first && (v.vec_bytes == 0 || v.cached_vecs == 0))
    return "evict_first = true needs vec_bytes 8 or 16 and cached_vecs > 0 (it applies to the "
           "register-cached loads)";
  if (v.evict_last && (v.vec_bytes == 0 || v.cached_vecs == 0 || v.evict_first))
    return "evict_last = true needs vec_bytes 8 or 16, cached_vecs > 0 (it applies to the "
           "register-cached loads) and evict_first = false (one cache policy per load)";
  if (v.plain_stores && v.vec_bytes == 0)
    return "plain_stores = true needs vec_bytes 8 or 16 (scalar stores carry no cache hint)";
  if (v.warp_rows && (v.threads_per_row != 0 || v.cached_vecs == 0 ||
                      v.reduction != Reduction::kShuffle || v.block_threads <= 32))
    return "warp_rows = true needs threads_per_row 0 (run time), cached_vecs > 0, the shuffle "
           "reduction and block_threads > 32 (a warp per row is what it chooses; with a tree "
           "reduction a barrier stays)";
  if (v.prefetch && (v.cached_vecs == 0 || v.grid != FamilyGrid::kPersistent))
    return "prefetch = true needs cached_vecs > 0 (it prefetches the register-cached part) and "
           "grid persistent (a per_rows block has no next row)";
  if (v.prefetch && v.baseline_aligned)
    return "prefetch = true cannot be combined with baseline_aligned: its doubled cache lowers the "
           "entry's launch bound, which the composite's verbatim baseline path shares";
  if (v.baseline_aligned &&
      (v.vec_bytes != 16 || !v.peel || v.threads_per_row != 0 || v.block_threads != 256 ||
       v.grid != FamilyGrid::kPersistent || v.stage_weight))
    return "baseline_aligned = true needs vec_bytes 16, peel, threads_per_row 0 (run time), "
           "block_threads 256, grid persistent and no staged weight (the baseline's launch "
           "geometry, so both paths share one launch)";
  if ((v.float32_baseline || v.float16_baseline || v.bfloat16_baseline) && !v.baseline_aligned)
    return "float32_baseline, float16_baseline and bfloat16_baseline need baseline_aligned = true "
           "(they hand a composite's entry for that dtype to the embedded baseline)";
  if (v.float32_baseline && v.float16_baseline && v.bfloat16_baseline)
    return "float32_baseline, float16_baseline and bfloat16_baseline cannot all be true: at least "
           "one dtype must stay composite (with all three the variant is the baseline itself)";
  return std::nullopt;
}

std::string variant_name(const Variant& v) {
  std::string tpr = v.threads_per_row == 0 ? "auto" : std::to_string(v.threads_per_row);
  return fmt::format(
      "v{}-t{}-b{}-c{}-{}-{}-{}{}{}{}{}{}{}{}{}{}{}", v.vec_bytes, tpr, v.block_threads,
      v.cached_vecs, v.reduction == Reduction::kShuffle ? "shfl" : "tree",
      v.grid == FamilyGrid::kPerRows ? "rows" : "pers", v.peel ? "peel" : "nopeel",
      v.stage_weight ? "-ws" : "", v.evict_first ? "-ef" : "", v.evict_last ? "-el" : "",
      v.plain_stores ? "-ps" : "", v.warp_rows ? "-wr" : "", v.prefetch ? "-pf" : "",
      v.baseline_aligned ? "-bl" : "", v.float32_baseline ? "-f32bl" : "",
      v.float16_baseline ? "-f16bl" : "", v.bfloat16_baseline ? "-bf16bl" : "");
}

std::optional<Variant> variant_by_name(std::string_view name) {
  static const std::regex kName(
      R"(v(0|8|16)-t(auto|[0-9]{1,4})-b([0-9]{1,4})-c([0-9]{1,2})-(shfl|tree)-(rows|pers)-(peel|nopeel)(-ws)?(-ef)?(-el)?(-ps)?(-wr)?(-pf)?(-bl)?(-f32bl)?(-f16bl)?(-bf16bl)?)");
  std::cmatch m;
  if (!std::regex_match(name.data(), name.data() + name.size(), m, kName)) return std::nullopt;
  Variant v;
  v.vec_bytes = std::stoi(m[1].str());
  v.threads_per_row = m[2].str() == "auto" ? 0 : std::stoi(m[2].str());
  v.block_threads = std::stoi(m[3].str());
  v.cached_vecs = std::stoi(m[4].str());
  v.reduction = m[5].str() == "shfl" ? Reduction::kShuffle : Reduction::kSharedTree;
  v.grid = m[6].str() == "rows" ? FamilyGrid::kPerRows : FamilyGrid::kPersistent;
  v.peel = m[7].str() == "peel";
  v.stage_weight = m[8].matched;
  v.evict_first = m[9].matched;
  v.evict_last = m[10].matched;
  v.plain_stores = m[11].matched;
  v.warp_rows = m[12].matched;
  v.prefetch = m[13].matched;
  v.baseline_aligned = m[14].matched;
  v.float32_baseline = m[15].matched;
  v.float16_baseline = m[16].matched;
  v.bfloat16_baseline = m[17].matched;
  if (validate(v) || variant_name(v) != name) return std::nullopt; // e.g. "t032" is not canonical
  return v;
}

int variant_h_max(const Variant& v) {
  if (!v.stage_weight) return kFamilyHMax;
  const std::int64_t room = op::kMaxDynamicSmemBytes - static_smem_bytes(v) - kStageFixedBytes;
  return static_cast<int>(std::min<std::int64_t>(kFamilyHMax, room / v.vec_bytes));
}

std::string emit_manifest(const Variant& v) {
  using nlohmann::ordered_json;
  const bool aligned_only = v.vec_bytes > 0 && !v.peel;
  ordered_json m;
  m["contract"] = contract_id();
  m["entry_points"] = {{"float32", "rms_f32"}, {"float16", "rms_f16"}, {"bfloat16", "rms_bf16"}};
  m["launch"] = {{"block_threads", v.block_threads},
                 {"rows_per_block", v.rows_per_block()},
                 {"grid", v.grid == FamilyGrid::kPerRows ? "per_rows" : "persistent"},
                 {"dynamic_smem",
                  {{"fixed_bytes", v.stage_weight ? kStageFixedBytes : 0},
                   {"bytes_per_h", v.stage_weight ? v.vec_bytes : 0}}}};
  m["dispatch"] = {{"h_min", 1},
                   {"h_max", variant_h_max(v)},
                   {"h_multiple_of", 1},
                   {"x_rows", "any_stride"},
                   {"alignment_bytes", aligned_only ? v.vec_bytes : 2}};
  m["target"] = "sm_90";
  std::string limits =
      fmt::format("H <= {}; rows of any count and any row stride. ", variant_h_max(v));
  if (aligned_only)
    limits += fmt::format("Pointers and row strides must be {}-byte aligned (no per-row peel). ",
                          v.vec_bytes);
  else
    limits += "Needs element-aligned pointers only (float32 data 4-byte aligned, as every float32 "
              "tensor is). ";
  if (v.cached_vecs > 0)
    limits += fmt::format("Rows longer than {} vectors per thread re-read the remainder from "
                          "L2 for the output pass.",
                          v.cached_vecs);
  else
    limits += "Two passes: the output pass re-reads the row (L2).";
  std::string handed;
  for (const auto& [on, dtype] :
       {std::pair{v.float32_baseline, "float32"}, std::pair{v.float16_baseline, "float16"},
        std::pair{v.bfloat16_baseline, "bfloat16"}})
    if (on) handed += (handed.empty() ? "" : " and ") + std::string(dtype);
  if (!handed.empty())
    limits += fmt::format(" {} calls run the in-tree baseline's own code (its scalar path when a "
                          "pointer or row stride is not 16-byte aligned).",
                          handed);
  m["known_limits"] = limits;
  return m.dump(2) + "\n";
}

GeneratedCandidate generate(const Variant& v, std::string_view rationale) {
  if (auto err = validate(v)) throw std::invalid_argument("offline family: " + *err);
  GeneratedCandidate c;
  c.kernel_cu = emit_kernel_source(v);
  c.manifest_json = emit_manifest(v);
  c.name = variant_name(v);
  c.rationale = rationale.empty() ? "offline family variant " + c.name : std::string(rationale);
  return c;
}

const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> kCurated = [] {
    const char* names[] = {
        "v0-t256-b256-c0-tree-rows-nopeel",       // safe default: scalar, two-pass, tree reduction
        "v0-t32-b256-c0-shfl-rows-nopeel",        // scalar, warp per row
        "v16-t256-b256-c0-shfl-rows-peel",        // vector two-pass, block per row
        "v16-t256-b256-c2-shfl-rows-peel",        // block per row, row cached (H <= 4096 bf16)
        "v16-t512-b512-c2-shfl-rows-peel",        // wide rows (H <= 8192 bf16)
        "v16-t128-b256-c4-shfl-rows-peel",        // 2 rows per block, 4 loads in flight
        "v16-t32-b256-c8-shfl-rows-peel",         // warp per row, no barriers
        "v16-t16-b256-c2-shfl-rows-peel",         // narrow rows: 16 lanes per row
        "v16-t8-b256-c2-shfl-rows-peel",          // very narrow rows: 8 lanes per row
        "v8-t32-b256-c8-shfl-rows-peel",          // 8-byte vectors
        "v16-t256-b256-c4-shfl-rows-nopeel",      // aligned rows only (no peel)
        "v16-t512-b1024-c2-tree-rows-peel",       // shared-memory tree, two rows per block
        "v16-t32-b128-c4-shfl-pers-peel",         // persistent warp per row
        "v16-tauto-b256-c4-shfl-pers-peel",       // persistent, threads per row from H
        "v16-tauto-b512-c4-shfl-pers-peel",       // persistent, threads per row from H, wider block
        "v16-tauto-b1024-c2-shfl-pers-peel",      // persistent, very wide rows
        "v16-tauto-b512-c4-shfl-pers-peel-ws",    // + weight staged per alignment phase
        "v16-tauto-b256-c8-shfl-pers-peel-ws",    // + more loads in flight
        "v16-tauto-b256-c4-shfl-pers-peel-ef",    // + evict-first loads of the cached row
        "v16-tauto-b256-c4-shfl-pers-peel-el",    // + evict_last loads on calls over 64 MiB
        "v16-tauto-b256-c2-shfl-pers-peel-bl",    // baseline design on aligned calls, peel else
        "v16-tauto-b256-c2-shfl-pers-peel-ef-bl", // + evict-first loads on the peeled path
        "v16-tauto-b256-c4-shfl-pers-peel-ps",    // write-back stores on calls larger than L2
        "v16-tauto-b256-c4-shfl-pers-peel-pf",    // next row in flight (no gain measured)
        "v16-tauto-b256-c2-shfl-pers-peel-wr-bl", // composite, a warp per row up to 128 vectors
        "v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl",    // + evict-first loads on the peeled path
        "v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl", // composite for half types, float32
                                                        // baseline
    };
    std::vector<Variant> out;
    for (const char* n : names) {
      auto v = variant_by_name(n);
      if (!v) throw std::logic_error(std::string("offline family: bad curated name ") + n);
      out.push_back(*v);
    }
    return out;
  }();
  return kCurated;
}

} // namespace kloop::rmsnorm
