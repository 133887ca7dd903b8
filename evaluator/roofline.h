// Roofline arithmetic of any registered operator, free of CUDA so that it is unit-tested on the
// CPU: logical bytes from the operator's declaration (every input read once, every output written
// once, an input-output tensor both; a broadcast tensor read once per call, its per-row re-read
// counted separately; for weighted RMSNorm the seed's formula: x read once, weight read once, y
// written once), effective bandwidth, its ratio to the copy ceiling measured
// on the same device in the same run, the shape class of a benchmark shape, and the physical
// plausibility floor: a time that would need more DRAM bandwidth than the copy ceiling (plus a
// declared margin) is a measurement or candidate defect, never a record. Logical figures are never
// mixed with measured DRAM traffic (ncu), which is reported beside them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/dtype.h"
#include "kernels/operator.h"

namespace kloop::evaluator::roofline {

// Declared plausibility margin: effective DRAM bandwidth may exceed the copy ceiling by at most 5%
// (the copy ceiling is a read+write stream, a read-heavy kernel can beat it slightly).
inline constexpr double kPlausibilityMargin = 0.05;

// Logical traffic of one call, per tensor of the declaration, in bytes. JSON keys are the
// tensor names with "_read" (inputs; input-outputs also "_write") or "_write" (outputs), plus
// "<broadcast>_reread" for each broadcast tensor, "unique" and "with_rereads": for weighted
// RMSNorm {"x_read","weight_read","y_write","weight_reread","unique","with_rereads"}.
struct LogicalBytes {
  struct Part {
    std::string key;        // "x_read", "y_write", ...
    std::int64_t bytes = 0; // rows*row*e for a batched tensor, row*e for a broadcast one
    bool write = false;
    bool batched = true;
  };
  std::vector<Part> parts;
  struct Reread {
    std::string key;        // "weight_reread"
    std::int64_t bytes = 0; // (rows-1)*row*e: the per-row re-read, counted separately
  };
  std::vector<Reread> rereads;
  std::int64_t unique() const;       // every part once: (2NH+H)*e for RMSNorm
  std::int64_t with_rereads() const; // unique + rereads: 3NH*e for RMSNorm (seed: 6NH fp16)
  std::int64_t reads(bool batched_only = false) const;
  std::int64_t writes() const;
  // Bytes of the part with `key`; 0 when absent.
  std::int64_t part(std::string_view key) const;
  nlohmann::json to_json() const;
};
// Throws std::invalid_argument when shape.rows < 1 or an axis < 1.
LogicalBytes logical_bytes(const op::Declaration& decl, const op::BenchShape& shape);
// The formula of logical_bytes in words for the evidence, e.g. "unique = x read + weight read
// once + y write = (2*rows*h + h) * elem; with_rereads adds (rows-1)*h*elem weight re-reads".
std::string bytes_formula(const op::Declaration& decl);

// Effective bandwidth in TB/s: bytes / (time_ms * 1e-3) / 1e12. Throws std::invalid_argument
// when time_ms is not positive.
double effective_tbps(std::int64_t bytes, double time_ms);

// Copy ceiling from a device-to-device cudaMemcpy of `copy_bytes` (>= 1 GiB) taking `time_ms`,
// counting read + write bytes: 2 * copy_bytes / time. Throws std::invalid_argument when
// copy_bytes < 1 GiB or time_ms <= 0 (a ceiling from a small copy measures L2, not DRAM).
double copy_ceiling_tbps(std::int64_t copy_bytes, double time_ms);
inline constexpr std::int64_t kMinCopyBytes = std::int64_t{1} << 30;

// Shape classes reported in evidence; the offline generator's policy reads them. `h` is the row
// width (the declaration's row axis), "x + y" the bytes of the batched tensors:
//   narrow:       h <= 256
//   odd:          h not a multiple of 8 (no 16-byte vector of 16-bit elements divides a row)
//   launch_bound: x + y smaller than 16 MiB (a few microseconds of DRAM time; launch dominates)
//   wide:         h >= 8192
//   streaming:    everything else (large row-major stream of moderate width)
// First match wins, in that order.
std::string_view shape_class(const op::Declaration& decl, const op::BenchShape& shape);
inline constexpr std::int64_t kLaunchBoundBytes = std::int64_t{16} << 20;

// Bytes that must move between DRAM and the chip for one call, given the L2 size and whether the
// L2 was flushed before the sample (cold): a cold call must read every input (x and weight) from
// DRAM; the writes (y) must reach DRAM only for the part that cannot stay in L2 (writes -
// l2_bytes, floored at 0). A warm call is given only the write overflow, and the batched inputs'
// (x's) overflow beyond L2.
std::int64_t must_reach_dram_bytes(const LogicalBytes& b, std::int64_t l2_bytes, bool cold);

// Plausibility verdict for one measured time.
struct Plausibility {
  bool checked = false;     // false when no bytes must reach DRAM (everything fits in L2)
  bool plausible = true;    // false: faster than the copy ceiling allows
  double dram_floor_ms = 0; // must_reach_dram_bytes / (ceiling * (1 + margin))
  double implied_tbps = 0;  // must_reach_dram_bytes / time
  nlohmann::json to_json() const;
};
// Throws std::invalid_argument when time_ms or ceiling_tbps is not positive.
Plausibility check_plausible(std::int64_t dram_bytes, double time_ms, double ceiling_tbps,
                             double margin = kPlausibilityMargin);

} // namespace kloop::evaluator::roofline
