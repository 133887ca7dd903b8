// Roofline arithmetic for weighted RMSNorm, free of CUDA so that it is unit-tested on the CPU:
// logical bytes per the seed's formula (x read once, weight read once, y written once; the per-row
// weight re-read counted separately), effective bandwidth, its ratio to the copy ceiling measured
// on the same device in the same run, the shape class of a benchmark shape, and the physical
// plausibility floor: a time that would need more DRAM bandwidth than the copy ceiling (plus a
// declared margin) is a measurement or candidate defect, never a record. Logical figures are never
// mixed with measured DRAM traffic (ncu), which is reported beside them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kernels/dtype.h"

namespace kloop::evaluator::roofline {

// Declared plausibility margin: effective DRAM bandwidth may exceed the copy ceiling by at most 5%
// (the copy ceiling is a read+write stream, a read-heavy kernel can beat it slightly).
inline constexpr double kPlausibilityMargin = 0.05;

// Logical traffic of one call on x [rows, h] (`dtype`), weight [h], y [rows, h], in bytes.
struct LogicalBytes {
  std::int64_t x_read = 0;        // rows*h*e
  std::int64_t weight_read = 0;   // h*e (the common weight fetched once)
  std::int64_t y_write = 0;       // rows*h*e
  std::int64_t weight_reread = 0; // (rows-1)*h*e: the per-row re-read, counted separately
  std::int64_t unique() const { return x_read + weight_read + y_write; } // (2NH+H)*e
  std::int64_t with_rereads() const { return unique() + weight_reread; } // 3NH*e (seed: 6NH fp16)
  nlohmann::json to_json() const;
};
// Throws std::invalid_argument when rows < 1 or h < 1.
LogicalBytes logical_bytes(std::int64_t rows, std::int64_t h, DType dtype);

// Effective bandwidth in TB/s: bytes / (time_ms * 1e-3) / 1e12. Throws std::invalid_argument
// when time_ms is not positive.
double effective_tbps(std::int64_t bytes, double time_ms);

// Copy ceiling from a device-to-device cudaMemcpy of `copy_bytes` (>= 1 GiB) taking `time_ms`,
// counting read + write bytes: 2 * copy_bytes / time. Throws std::invalid_argument when
// copy_bytes < 1 GiB or time_ms <= 0 (a ceiling from a small copy measures L2, not DRAM).
double copy_ceiling_tbps(std::int64_t copy_bytes, double time_ms);
inline constexpr std::int64_t kMinCopyBytes = std::int64_t{1} << 30;

// Shape classes reported in evidence; the offline generator's policy reads them.
//   narrow:       h <= 256
//   odd:          h not a multiple of 8 (no 16-byte vector of 16-bit elements divides a row)
//   launch_bound: x + y smaller than 16 MiB (a few microseconds of DRAM time; launch dominates)
//   wide:         h >= 8192
//   streaming:    everything else (large row-major stream of moderate width)
// First match wins, in that order.
std::string_view shape_class(std::int64_t rows, std::int64_t h, DType dtype);
inline constexpr std::int64_t kLaunchBoundBytes = std::int64_t{16} << 20;

// Bytes that must move between DRAM and the chip for one call, given the L2 size and whether the
// L2 was flushed before the sample (cold): a cold call must read x and weight from DRAM; y writes
// must reach DRAM only for the part that cannot stay in L2 (y_write - l2_bytes, floored at 0).
// A warm call is given only the y overflow, and x's overflow beyond L2.
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
