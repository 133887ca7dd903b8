// Buffers and launchers of the measurement modes (bench_launch.h).
#include "evaluator/gpu_worker/bench_launch.h"

#include <stdexcept>

#include <fmt/format.h>

#include "evaluator/gpu_worker/bench_kernels.h"

namespace kloop::gpu {

ShapePlan plan_shape(const op::Operator& op, const op::BenchShape& shape,
                     const std::vector<std::int64_t>& row_strides) {
  const op::Declaration& d = op.declaration();
  ShapePlan p;
  p.op = &op;
  p.shape = shape;
  p.call = shape_call(op, shape);
  p.geom = rows_geometry(d, shape.dtype, shape.rows, p.call.v.axes, row_strides, {});
  for (std::size_t t = 0; t < d.tensors.size(); ++t) {
    p.bytes.push_back(static_cast<std::size_t>(p.geom.tensors[t].span_elements) *
                      element_bytes(d.tensors[t], shape.dtype));
    (d.tensors[t].role == op::Role::kInput ? p.inputs : p.outputs).push_back(static_cast<int>(t));
    if (d.tensors[t].role == op::Role::kInputOutput)
      throw std::runtime_error(
          fmt::format("{}: the measurement modes do not run input-output tensors ({})",
                      op.contract_id(), d.tensors[t].name));
  }
  return p;
}

std::unique_ptr<CallLauncher>
ShapePlan::launcher(const LoadedCandidate* cand, const op::DeviceInfo& device,
                    const std::vector<std::uintptr_t>& addresses) const {
  op::CallGeometry g = geom;
  for (std::size_t t = 0; t < g.tensors.size(); ++t)
    g.tensors[t].addr = addresses.at(t);
  return std::make_unique<CallLauncher>(*op, cand, device, g, call.v,
                                        rows_layout(op->declaration(), g), &call.meta);
}

std::size_t ShapePlan::batched_traffic() const {
  std::size_t n = 0;
  for (std::size_t t = 0; t < bytes.size(); ++t)
    if (op->declaration().tensors[t].batched) n += bytes[t];
  return n;
}

op::BenchShape read_shape(const op::Declaration& d, const nlohmann::json& j,
                          std::vector<std::int64_t>* row_strides) {
  op::BenchShape s = op::BenchShape::from_json(d, j);
  if (row_strides) {
    row_strides->assign(d.tensors.size(), 0);
    for (std::size_t t = 0; t < d.tensors.size(); ++t)
      if (d.tensors[t].batched)
        (*row_strides)[t] = j.value(d.tensors[t].name + "_row_stride", std::int64_t{0});
  }
  return s;
}

cudaError_t fill_input(const ShapePlan& plan, int t, void* p, std::uint64_t seed,
                       cudaStream_t stream) {
  const op::Tensor& decl = plan.op->declaration().tensors[static_cast<std::size_t>(t)];
  const DType dt = decl.dtype == op::DTypeRule::kFloat32 ? DType::kFloat32 : plan.shape.dtype;
  const auto n = static_cast<std::int64_t>(plan.bytes[static_cast<std::size_t>(t)] /
                                           element_bytes(decl, plan.shape.dtype));
  return decl.batched ? fill_uniform(dt, p, n, seed, -2.f, 2.f, stream)
                      : fill_uniform(dt, p, n, seed, 0.5f, 1.5f, stream);
}

ShapeBuffers::ShapeBuffers(const ShapePlan& plan, std::uint64_t seed, cudaStream_t stream) {
  const op::Declaration& d = plan.op->declaration();
  for (std::size_t t = 0; t < d.tensors.size(); ++t)
    tensors.emplace_back(plan.bytes[t]);
  int batched = 0, broadcast = 0;
  for (int t : plan.inputs) {
    const bool b = d.tensors[static_cast<std::size_t>(t)].batched;
    const std::uint64_t s = b ? seed + batched++ : seed + 999 - broadcast++;
    check(fill_input(plan, t, tensors[static_cast<std::size_t>(t)].data(), s, stream),
          ("fill " + d.tensors[static_cast<std::size_t>(t)].name).c_str());
  }
}

std::vector<std::uintptr_t> ShapeBuffers::addresses() const {
  std::vector<std::uintptr_t> a;
  for (const DeviceBuffer& b : tensors)
    a.push_back(reinterpret_cast<std::uintptr_t>(b.data()));
  return a;
}

} // namespace kloop::gpu
