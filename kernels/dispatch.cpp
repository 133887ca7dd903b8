// The trusted wrapper's dispatch predicate and launch planning for every operator (dispatch.h).
#include "kernels/dispatch.h"

#include <algorithm>

#include <fmt/format.h>

namespace kloop::op {
namespace {

std::int64_t element_bytes(const Tensor& t, DType call) {
  return t.dtype == DTypeRule::kFloat32 ? 4 : static_cast<std::int64_t>(dtype_bytes(call));
}

// Row stride and last-dim stride of a batched tensor whose row is its last `row_dims` dims.
TensorGeometry batched_geometry(const HostTensor& t, std::size_t row_dims, std::int64_t rows,
                                std::int64_t row) {
  TensorGeometry g;
  if (row_dims == 1) {
    g.row_stride = collapsed_row_stride(t);
    g.last_stride = t.width() <= 1 ? 1 : t.strides().back();
  } else {
    // A row of several dims: they must be row-major among themselves (the kernel sees one row).
    const int nd = t.ndim();
    std::int64_t expect = 1;
    bool contiguous_row = true;
    for (int d = nd - 1; d >= nd - static_cast<int>(row_dims); --d) {
      if (t.shape()[d] != 1 && t.strides()[d] != expect) contiguous_row = false;
      expect *= t.shape()[d];
    }
    g.last_stride = contiguous_row ? 1 : 0;
    const HostTensor batch = t.as_strided(
        {t.shape().begin(), t.shape().end() - static_cast<long>(row_dims) + 1},
        {t.strides().begin(), t.strides().end() - static_cast<long>(row_dims) + 1}, t.offset());
    g.row_stride = collapsed_row_stride(batch);
  }
  if (rows <= 1) g.row_stride = row;
  if (g.row_stride) g.span_elements = rows <= 0 ? 0 : (rows - 1) * *g.row_stride + row;
  return g;
}

DispatchDecision reference(std::string why) {
  return {Route::kReference, -1, std::move(why)};
}

// The first failing clause of variant `v` for the call, or "" when every clause holds.
std::string failed_clause(const Declaration& d, const Manifest& m, const Variant& v,
                          const CallGeometry& call, const DeviceInfo& device) {
  const When& w = v.when;
  const bool listed =
      w.dtypes.empty() || std::find(w.dtypes.begin(), w.dtypes.end(), call.dtype) != w.dtypes.end();
  if (!listed)
    return fmt::format("dtype {} is not in the variant's dtypes", dtype_name(call.dtype));
  if (!v.entry_points.contains(call.dtype))
    return fmt::format("dtype {} has no entry point", dtype_name(call.dtype));
  if (m.target == "sm_90a" && !device.has_sm90a())
    return fmt::format("target sm_90a needs compute capability 9.0, device has {}.{}",
                       device.cc_major, device.cc_minor);
  for (std::size_t i = 0; i < d.axes.size(); ++i) {
    if (!d.axes[i].variable) continue;
    const AxisRange& r = w.axes[i];
    const std::string& n = d.axes[i].name;
    const std::string k = key_name(n);
    const std::int64_t a = call.axes[i];
    if (a < r.min || a > r.max)
      return fmt::format("{}={} outside [{}_min={}, {}_max={}]", n, a, k, r.min, k, r.max);
    if (r.multiple_of > 1 && a % r.multiple_of != 0)
      return fmt::format("{}={} is not a multiple of {}_multiple_of={}", n, a, k, r.multiple_of);
  }
  for (std::size_t t = 0; t < d.tensors.size(); ++t) {
    if (!d.tensors[t].batched) continue;
    const TensorGeometry& g = call.tensors[t];
    const std::string& n = d.tensors[t].name;
    if (g.last_stride != 1)
      return d.tensors[t].dims.size() == 1
                 ? fmt::format("{}'s last-dimension stride is {}, not 1", n, g.last_stride)
                 : fmt::format("{}'s row dimensions are not contiguous", n);
    if (!g.row_stride)
      return fmt::format("{}'s outer dimensions do not collapse to one row stride", n);
  }
  for (const auto& [t, layout] : w.rows) {
    const std::int64_t row = d.row_elements(d.tensors[t], call.axes);
    const std::int64_t stride = *call.tensors[t].row_stride;
    if (layout != RowLayout::kContiguous || call.rows <= 1 || stride == row) continue;
    const Tensor& tensor = d.tensors[t];
    return fmt::format("{}_rows is contiguous but the row stride is {} ({})", tensor.name, stride,
                       tensor.dims.size() == 1 ? fmt::format("{}={}", tensor.dims[0], row)
                                               : fmt::format("row of {} elements", row));
  }
  for (std::size_t t = 0; t < d.tensors.size(); ++t)
    if (!d.tensors[t].batched && !call.tensors[t].contiguous)
      return fmt::format("{} is not contiguous", d.tensors[t].name);
  if (const std::int64_t a = w.alignment_bytes; a > 1) {
    std::vector<std::pair<std::string, std::uint64_t>> items;
    for (std::size_t t = 0; t < d.tensors.size(); ++t)
      items.emplace_back(d.tensors[t].name + " address", call.tensors[t].addr);
    for (std::size_t t = 0; t < d.tensors.size(); ++t) {
      if (!d.tensors[t].batched) continue;
      const std::int64_t row = d.row_elements(d.tensors[t], call.axes);
      const std::int64_t stride = call.rows > 1 ? *call.tensors[t].row_stride : row;
      items.emplace_back(
          d.tensors[t].name + " row stride in bytes",
          static_cast<std::uint64_t>(stride * element_bytes(d.tensors[t], call.dtype)));
    }
    for (const auto& [name, value] : items)
      if (value % static_cast<std::uint64_t>(a) != 0)
        return fmt::format("{} (0x{:x}) is not a multiple of alignment_bytes={}", name, value, a);
  }
  if (w.max_rows && call.rows > *w.max_rows)
    return fmt::format("rows={} above max_rows={}", call.rows, *w.max_rows);
  if (w.max_elements)
    for (std::size_t t = 0; t < d.tensors.size(); ++t)
      if (d.tensors[t].batched && call.tensors[t].span_elements > *w.max_elements)
        return fmt::format("{} spans {} elements, above max_elements={}", d.tensors[t].name,
                           call.tensors[t].span_elements, *w.max_elements);
  if (const std::int64_t blocks = per_rows_blocks(v.launch, call.rows); blocks > kMaxGridX)
    return fmt::format("{} blocks exceed gridDim.x <= {}", blocks, kMaxGridX);
  return {};
}

} // namespace

nlohmann::json DeviceInfo::to_json() const {
  return {{"compute_capability", fmt::format("{}.{}", cc_major, cc_minor)},
          {"sm_count", sm_count},
          {"max_dynamic_smem_optin", max_dynamic_smem_optin},
          {"has_sm90a", has_sm90a()}};
}

bool CallGeometry::empty() const {
  return rows == 0 || std::find(axes.begin(), axes.end(), 0) != axes.end();
}

nlohmann::json CallGeometry::to_json(const Declaration& d) const {
  nlohmann::json j{{"dtype", dtype_name(dtype)}, {"rows", rows}};
  for (std::size_t i = 0; i < d.axes.size() && i < axes.size(); ++i)
    j[key_name(d.axes[i].name)] = axes[i];
  for (std::size_t t = 0; t < d.tensors.size() && t < tensors.size(); ++t) {
    const std::string& n = d.tensors[t].name;
    if (d.tensors[t].batched) {
      j[n + "_row_stride"] =
          tensors[t].row_stride ? nlohmann::json(*tensors[t].row_stride) : nlohmann::json(nullptr);
      j[n + "_last_stride"] = tensors[t].last_stride;
    } else {
      j[n + "_contiguous"] = tensors[t].contiguous;
    }
  }
  return j;
}

CallGeometry call_geometry(const Declaration& d, const CallArgs& call, const Validated& v,
                           const std::vector<std::uintptr_t>& addresses) {
  CallGeometry g;
  g.dtype = call.tensors.front().dtype();
  g.rows = v.rows;
  g.axes = v.axes;
  const std::vector<int> passed = passed_tensors(d);
  for (std::size_t t = 0; t < d.tensors.size(); ++t) {
    const Tensor& decl = d.tensors[t];
    const std::int64_t row = d.row_elements(decl, v.axes);
    const auto at = std::find(passed.begin(), passed.end(), static_cast<int>(t));
    TensorGeometry tg;
    if (at == passed.end()) { // an output: fresh and contiguous
      tg.row_stride = row;
      tg.span_elements = decl.batched ? v.rows * row : row;
    } else {
      const HostTensor& h = call.tensors[static_cast<std::size_t>(at - passed.begin())];
      if (decl.batched)
        tg = batched_geometry(h, decl.dims.size(), v.rows, row);
      else
        tg.contiguous = row <= 1 || h.is_contiguous();
    }
    tg.addr = t < addresses.size() ? addresses[t] : 0;
    g.tensors.push_back(tg);
  }
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

std::int64_t row_width(const Declaration& decl, const CallGeometry& call) {
  const int ra = decl.row_axis();
  return ra < 0 ? 1 : call.axes.at(static_cast<std::size_t>(ra));
}

DispatchDecision decide_dispatch(const Declaration& d, const Manifest& m, const CallGeometry& call,
                                 const DeviceInfo& device) {
  if (call.rows == 0) return {Route::kNoLaunch, -1, "rows == 0: nothing to launch"};
  for (std::size_t i = 0; i < d.axes.size(); ++i)
    if (call.axes[i] == 0)
      return {Route::kNoLaunch, -1, fmt::format("{} == 0: nothing to launch", d.axes[i].name)};
  std::string why;
  for (std::size_t i = 0; i < m.variants.size(); ++i) {
    const std::string clause = failed_clause(d, m, m.variants[i], call, device);
    if (clause.empty()) return {Route::kCandidate, static_cast<int>(i), {}};
    if (m.variants.size() == 1) return reference(clause);
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", m.variants[i].name, clause);
  }
  return reference(why.empty() ? "the manifest has no variant" : why);
}

nlohmann::json LaunchPlan::to_json() const {
  return {{"grid", grid}, {"block", block}, {"dynamic_smem", dynamic_smem}};
}

LaunchPlan plan_launch(const LaunchRule& launch, std::int64_t rows, std::int64_t width,
                       const DeviceInfo& device, int blocks_per_sm) {
  LaunchPlan plan;
  plan.block = launch.block_threads;
  plan.dynamic_smem = launch.dynamic_smem_bytes(width);
  const std::int64_t per_rows = per_rows_blocks(launch, rows);
  if (launch.grid == GridKind::kPerRows) {
    plan.grid = per_rows;
  } else {
    const std::int64_t resident =
        blocks_per_sm <= 0 ? 0 : static_cast<std::int64_t>(blocks_per_sm) * device.sm_count;
    plan.grid = std::min(resident, per_rows);
  }
  return plan;
}

AbiValues abi_values(const CallGeometry& call, const Validated& v) {
  AbiValues a;
  a.rows = call.rows;
  a.axes = call.axes;
  a.scalars = v.scalars;
  for (const TensorGeometry& t : call.tensors) {
    a.tensors.push_back(t.addr);
    a.row_strides.push_back(t.row_stride.value_or(0));
  }
  return a;
}

void PathCounts::add(Route route, int variant) {
  switch (route) {
  case Route::kCandidate:
    ++candidate;
    if (variant >= 0) {
      if (per_variant.size() <= static_cast<std::size_t>(variant)) per_variant.resize(variant + 1);
      ++per_variant[static_cast<std::size_t>(variant)];
    }
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
  nlohmann::json j{{"candidate", candidate}, {"reference", reference}, {"no_launch", no_launch}};
  if (!per_variant.empty()) j["per_variant"] = per_variant;
  return j;
}

} // namespace kloop::op
