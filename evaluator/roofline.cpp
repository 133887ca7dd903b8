// Roofline arithmetic (roofline.h).
#include "evaluator/roofline.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

namespace kloop::evaluator::roofline {

std::int64_t LogicalBytes::unique() const {
  std::int64_t n = 0;
  for (const Part& p : parts)
    n += p.bytes;
  return n;
}

std::int64_t LogicalBytes::with_rereads() const {
  std::int64_t n = unique();
  for (const Reread& r : rereads)
    n += r.bytes;
  return n;
}

std::int64_t LogicalBytes::reads(bool batched_only) const {
  std::int64_t n = 0;
  for (const Part& p : parts)
    if (!p.write && (p.batched || !batched_only)) n += p.bytes;
  return n;
}

std::int64_t LogicalBytes::writes() const {
  std::int64_t n = 0;
  for (const Part& p : parts)
    if (p.write) n += p.bytes;
  return n;
}

std::int64_t LogicalBytes::part(std::string_view key) const {
  for (const Part& p : parts)
    if (p.key == key) return p.bytes;
  return 0;
}

nlohmann::json LogicalBytes::to_json() const {
  nlohmann::json j{{"unique", unique()}, {"with_rereads", with_rereads()}};
  for (const Part& p : parts)
    j[p.key] = p.bytes;
  for (const Reread& r : rereads)
    j[r.key] = r.bytes;
  return j;
}

LogicalBytes logical_bytes(const op::Declaration& decl, const op::BenchShape& shape) {
  if (shape.rows < 1)
    throw std::invalid_argument("logical_bytes: rows must be >= 1 (rows==0 never "
                                "launches)");
  for (std::size_t i = 0; i < decl.axes.size() && i < shape.axes.size(); ++i)
    if (shape.axes[i] < 1)
      throw std::invalid_argument("logical_bytes: axis " + decl.axes[i].name + " must be >= 1");
  const auto e = static_cast<std::int64_t>(dtype_bytes(shape.dtype));
  LogicalBytes b;
  for (const op::Tensor& t : decl.tensors) {
    const std::int64_t elem = t.dtype == op::DTypeRule::kCall ? e : 4;
    const std::int64_t row = decl.row_elements(t, shape.axes) * elem;
    const std::int64_t bytes = t.batched ? shape.rows * row : row;
    if (t.role != op::Role::kOutput) b.parts.push_back({t.name + "_read", bytes, false, t.batched});
    if (t.written()) b.parts.push_back({t.name + "_write", bytes, true, t.batched});
    if (!t.batched) b.rereads.push_back({t.name + "_reread", (shape.rows - 1) * row});
  }
  return b;
}

std::string bytes_formula(const op::Declaration& decl) {
  std::string words, sum, rereads;
  int batched = 0, broadcast = 0;
  const int ra = decl.row_axis();
  const std::string w = ra < 0 ? "1" : [&] {
    std::string a = decl.axes[static_cast<std::size_t>(ra)].name;
    for (char& c : a)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return a;
  }();
  auto add = [&](const std::string& text) { words += (words.empty() ? "" : " + ") + text; };
  for (const op::Tensor& t : decl.tensors) {
    const int n = (t.role != op::Role::kOutput) + t.written();
    if (t.role != op::Role::kOutput) add(t.name + (t.batched ? " read" : " read once"));
    if (t.written()) add(t.name + " write");
    (t.batched ? batched : broadcast) += n;
    if (!t.batched)
      rereads +=
          fmt::format("{}(rows-1)*{}*elem {} re-reads", rereads.empty() ? "" : ", ", w, t.name);
  }
  if (batched > 0)
    sum = fmt::format("{}rows*{}", batched == 1 ? "" : std::to_string(batched) + "*", w);
  if (broadcast > 0)
    sum += fmt::format("{}{}{}", sum.empty() ? "" : " + ",
                       broadcast == 1 ? "" : std::to_string(broadcast) + "*", w);
  std::string out = fmt::format("unique = {} = ({}) * elem", words, sum);
  if (!rereads.empty()) out += "; with_rereads adds " + rereads;
  return out;
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

std::string_view shape_class(const op::Declaration& decl, const op::BenchShape& shape) {
  const std::int64_t h = shape.width(decl);
  if (h <= 256) return "narrow";
  if (h % 8 != 0) return "odd";
  std::int64_t batched = 0;
  for (const LogicalBytes::Part& p : logical_bytes(decl, shape).parts)
    if (p.batched) batched += p.bytes;
  if (batched < kLaunchBoundBytes) return "launch_bound";
  if (h >= 8192) return "wide";
  return "streaming";
}

std::int64_t must_reach_dram_bytes(const LogicalBytes& b, std::int64_t l2_bytes, bool cold) {
  const std::int64_t write_overflow = std::max<std::int64_t>(0, b.writes() - l2_bytes);
  if (cold) return b.reads() + write_overflow;
  const std::int64_t read_overflow = std::max<std::int64_t>(0, b.reads(true) - l2_bytes);
  return read_overflow + write_overflow;
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
