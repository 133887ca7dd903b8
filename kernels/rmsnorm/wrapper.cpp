// Trusted-wrapper dispatch predicate and launch planning (see wrapper.h).
#include "kernels/rmsnorm/wrapper.h"

#include <algorithm>

#include <fmt/format.h>

namespace kloop::rmsnorm {

nlohmann::json DeviceInfo::to_json() const {
  return {{"compute_capability", fmt::format("{}.{}", cc_major, cc_minor)},
          {"sm_count", sm_count},
          {"max_dynamic_smem_optin", max_dynamic_smem_optin},
          {"has_sm90a", has_sm90a()}};
}

nlohmann::json CallGeometry::to_json() const {
  return {{"dtype", dtype_name(dtype)},
          {"rows", rows},
          {"h", h},
          {"x_row_stride", x_row_stride ? nlohmann::json(*x_row_stride) : nlohmann::json(nullptr)},
          {"x_last_stride", x_last_stride},
          {"weight_contiguous", weight_contiguous},
          {"y_row_stride", y_row_stride}};
}

CallGeometry call_geometry(const HostTensor& x, const HostTensor& weight, std::uintptr_t x_addr,
                           std::uintptr_t w_addr, std::uintptr_t y_addr) {
  CallGeometry g;
  g.dtype = x.dtype();
  g.h = x.width();
  g.rows = x.rows();
  g.x_row_stride = collapsed_row_stride(x);
  g.x_last_stride = g.h <= 1 ? 1 : x.strides().back();
  g.weight_contiguous = g.h <= 1 || weight.strides().back() == 1;
  g.y_row_stride = g.h;
  g.x_addr = x_addr;
  g.w_addr = w_addr;
  g.y_addr = y_addr;
  return g;
}

std::string_view route_name(Route route) {
  switch (route) {
  case Route::kCandidate:
    return "candidate";
  case Route::kReference:
    return "reference";
  case Route::kNoLaunch:
    return "no_launch";
  }
  return "unknown";
}

std::int64_t per_rows_blocks(const LaunchRule& launch, std::int64_t rows) {
  const std::int64_t rpb = std::max(1, launch.rows_per_block);
  return rows <= 0 ? 0 : (rows + rpb - 1) / rpb;
}

namespace {

DispatchDecision reference(std::string why) {
  return {Route::kReference, std::move(why)};
}

} // namespace

DispatchDecision decide_dispatch(const Manifest& manifest, const CallGeometry& call,
                                 const DeviceInfo& device) {
  if (call.rows == 0) return {Route::kNoLaunch, "rows == 0: nothing to launch"};
  if (!manifest.entry_points.contains(call.dtype))
    return reference(fmt::format("dtype {} has no entry point", dtype_name(call.dtype)));
  if (manifest.target == "sm_90a" && !device.has_sm90a())
    return reference(fmt::format("target sm_90a needs compute capability 9.0, device has {}.{}",
                                 device.cc_major, device.cc_minor));
  const Dispatch& d = manifest.dispatch;
  if (call.h < d.h_min || call.h > d.h_max)
    return reference(fmt::format("H={} outside [h_min={}, h_max={}]", call.h, d.h_min, d.h_max));
  if (d.h_multiple_of > 1 && call.h % d.h_multiple_of != 0)
    return reference(
        fmt::format("H={} is not a multiple of h_multiple_of={}", call.h, d.h_multiple_of));
  if (call.x_last_stride != 1)
    return reference(fmt::format("x's last-dimension stride is {}, not 1", call.x_last_stride));
  if (!call.x_row_stride)
    return reference("x's outer dimensions do not collapse to one row stride");
  if (d.x_rows == RowLayout::kContiguous && call.rows > 1 && *call.x_row_stride != call.h)
    return reference(fmt::format("x_rows is contiguous but the row stride is {} (H={})",
                                 *call.x_row_stride, call.h));
  if (!call.weight_contiguous) return reference("weight is not contiguous");
  const std::int64_t a = d.alignment_bytes;
  const std::int64_t bytes = static_cast<std::int64_t>(dtype_bytes(call.dtype));
  if (a > 1) {
    struct Item {
      const char* name;
      std::uint64_t value;
    };
    const std::int64_t xs = call.rows > 1 ? *call.x_row_stride : call.h;
    const std::int64_t ys = call.rows > 1 ? call.y_row_stride : call.h;
    const Item items[] = {{"x address", call.x_addr},
                          {"weight address", call.w_addr},
                          {"y address", call.y_addr},
                          {"x row stride in bytes", static_cast<std::uint64_t>(xs * bytes)},
                          {"y row stride in bytes", static_cast<std::uint64_t>(ys * bytes)}};
    for (const Item& item : items)
      if (item.value % static_cast<std::uint64_t>(a) != 0)
        return reference(fmt::format("{} (0x{:x}) is not a multiple of alignment_bytes={}",
                                     item.name, item.value, a));
  }
  if (per_rows_blocks(manifest.launch, call.rows) > kMaxGridX)
    return reference(fmt::format("{} blocks exceed gridDim.x <= {}",
                                 per_rows_blocks(manifest.launch, call.rows), kMaxGridX));
  return {Route::kCandidate, {}};
}

nlohmann::json LaunchPlan::to_json() const {
  return {{"grid", grid},
          {"block", block},
          {"dynamic_smem", dynamic_smem},
          {"raise_smem_limit", raise_smem_limit}};
}

LaunchPlan plan_launch(const Manifest& manifest, const CallGeometry& call, const DeviceInfo& device,
                       int blocks_per_sm) {
  LaunchPlan plan;
  plan.block = manifest.launch.block_threads;
  plan.dynamic_smem = manifest.launch.dynamic_smem_bytes(call.h);
  plan.raise_smem_limit = plan.dynamic_smem > kDefaultDynamicSmemBytes;
  const std::int64_t per_rows = per_rows_blocks(manifest.launch, call.rows);
  if (manifest.launch.grid == GridKind::kPerRows) {
    plan.grid = per_rows;
  } else {
    const std::int64_t resident =
        blocks_per_sm <= 0 ? 0 : static_cast<std::int64_t>(blocks_per_sm) * device.sm_count;
    plan.grid = std::min(resident, per_rows);
  }
  return plan;
}

void PathCounts::add(Route route) {
  switch (route) {
  case Route::kCandidate:
    ++candidate;
    break;
  case Route::kReference:
    ++reference;
    break;
  case Route::kNoLaunch:
    ++no_launch;
    break;
  }
}

nlohmann::json PathCounts::to_json() const {
  return {{"candidate", candidate}, {"reference", reference}, {"no_launch", no_launch}};
}

} // namespace kloop::rmsnorm
