// Roofline arithmetic (roofline.h).
#include "evaluator/roofline.h"

#include <algorithm>
#include <stdexcept>

namespace kloop::evaluator::roofline {

nlohmann::json LogicalBytes::to_json() const {
  return {{"x_read", x_read},   {"weight_read", weight_read},     {"y_write", y_write},
          {"unique", unique()}, {"weight_reread", weight_reread}, {"with_rereads", with_rereads()}};
}

LogicalBytes logical_bytes(std::int64_t rows, std::int64_t h, DType dtype) {
  if (rows < 1 || h < 1) {
    throw std::invalid_argument("logical_bytes: rows and h must be >= 1 (rows==0 never launches)");
  }
  const auto e = static_cast<std::int64_t>(dtype_bytes(dtype));
  LogicalBytes b;
  b.x_read = rows * h * e;
  b.weight_read = h * e;
  b.y_write = rows * h * e;
  b.weight_reread = (rows - 1) * h * e;
  return b;
}

double effective_tbps(std::int64_t bytes, double time_ms) {
  if (!(time_ms > 0)) throw std::invalid_argument("effective_tbps: time_ms must be positive");
  return static_cast<double>(bytes) / (time_ms * 1e-3) / 1e12;
}

double copy_ceiling_tbps(std::int64_t copy_bytes, double time_ms) {
  if (copy_bytes < kMinCopyBytes) {
    throw std::invalid_argument(
        "copy_ceiling_tbps: copy of fewer than 1 GiB measures the cache, not DRAM; copy >= 1 GiB");
  }
  return effective_tbps(2 * copy_bytes, time_ms);
}

std::string_view shape_class(std::int64_t rows, std::int64_t h, DType dtype) {
  if (h <= 256) return "narrow";
  if (h % 8 != 0) return "odd";
  const auto e = static_cast<std::int64_t>(dtype_bytes(dtype));
  if (2 * rows * h * e < kLaunchBoundBytes) return "launch_bound";
  if (h >= 8192) return "wide";
  return "streaming";
}

std::int64_t must_reach_dram_bytes(const LogicalBytes& b, std::int64_t l2_bytes, bool cold) {
  const std::int64_t y_overflow = std::max<std::int64_t>(0, b.y_write - l2_bytes);
  if (cold) return b.x_read + b.weight_read + y_overflow;
  const std::int64_t x_overflow = std::max<std::int64_t>(0, b.x_read - l2_bytes);
  return x_overflow + y_overflow;
}

nlohmann::json Plausibility::to_json() const {
  return {{"checked", checked},
          {"plausible", plausible},
          {"dram_floor_ms", dram_floor_ms},
          {"implied_tbps", implied_tbps}};
}

Plausibility check_plausible(std::int64_t dram_bytes, double time_ms, double ceiling_tbps,
                             double margin) {
  if (!(time_ms > 0) || !(ceiling_tbps > 0)) {
    throw std::invalid_argument("check_plausible: time_ms and ceiling_tbps must be positive");
  }
  Plausibility p;
  if (dram_bytes <= 0) return p;
  p.checked = true;
  p.implied_tbps = effective_tbps(dram_bytes, time_ms);
  p.dram_floor_ms = static_cast<double>(dram_bytes) / (ceiling_tbps * (1 + margin) * 1e12) * 1e3;
  p.plausible = time_ms >= p.dram_floor_ms;
  return p;
}

} // namespace kloop::evaluator::roofline
