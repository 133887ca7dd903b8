// The one launch path of kloop-gpu-worker (launch.h).
#include "evaluator/gpu_worker/launch.h"

#include <stdexcept>

#include <fmt/format.h>

#include "kernels/abi_pack.h"

namespace kloop::gpu {
namespace {

// Value of axis `name` (fixed axes: their value).
std::int64_t axis_value(const op::Declaration& d, const std::vector<std::int64_t>& axes,
                        const std::string& name) {
  const int a = d.axis_index(name);
  return d.axes[a].variable ? axes.at(a) : d.axes[a].value;
}

op::RefTensor ref_tensor(const std::vector<std::int64_t>& shape,
                         const std::vector<std::int64_t>& strides, const std::string& name) {
  if (shape.size() > static_cast<std::size_t>(op::kRefMaxDims))
    throw std::runtime_error(fmt::format("reference kernel: {} has {} dimensions after dropping "
                                         "size-1 batch dimensions; at most {} (kRefMaxDims)",
                                         name, shape.size(), op::kRefMaxDims));
  op::RefTensor r;
  r.ndim = static_cast<int>(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    r.shape[i] = shape[i];
    r.strides[i] = strides[i];
  }
  return r;
}

// Row-major strides of `shape`.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * std::max<std::int64_t>(shape[i], 1);
  return s;
}

// `shape`/`strides` without the size-1 dims among the first `batch_dims` (the batch prefix).
op::RefTensor drop_unit_batch(const std::vector<std::int64_t>& shape,
                              const std::vector<std::int64_t>& strides, std::size_t batch_dims,
                              const std::string& name) {
  std::vector<std::int64_t> sh, st;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < batch_dims && shape[i] == 1) continue;
    sh.push_back(shape[i]);
    st.push_back(strides[i]);
  }
  return ref_tensor(sh, st, name);
}

} // namespace

std::size_t element_bytes(const op::Tensor& t, DType dtype) {
  return t.dtype == op::DTypeRule::kFloat32 ? 4 : dtype_bytes(dtype);
}

std::string load_candidate(const op::Manifest& manifest, const std::string& cubin, Library& library,
                           LoadedCandidate& out, nlohmann::json* attributes) {
  if (const cudaError_t e = library.load(cubin); e != cudaSuccess) {
    cudaGetLastError(); // clear the (non-sticky) load error
    if (is_sticky(e)) throw StickyFault{e, "cudaLibraryLoadData"};
    return "the cubin does not load on this device: " + cuda_error_text(e);
  }
  out.manifest = manifest;
  out.kernels.assign(manifest.variants.size(), {});
  for (std::size_t i = 0; i < manifest.variants.size(); ++i) {
    for (const auto& [dtype, name] : manifest.variants[i].entry_points) {
      cudaKernel_t k = nullptr;
      if (const cudaError_t e = library.kernel(name, &k); e != cudaSuccess) {
        cudaGetLastError();
        return fmt::format("entry point {} not found in the cubin: {}", name, cuda_error_text(e));
      }
      out.kernels[i][dtype] = k;
      cudaFuncAttributes a{};
      if (attributes && cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(k)) == cudaSuccess)
        (*attributes)[name] = {{"registers", a.numRegs},
                               {"static_smem", a.sharedSizeBytes},
                               {"local_bytes", a.localSizeBytes},
                               {"max_threads_per_block", a.maxThreadsPerBlock}};
    }
  }
  return {};
}

std::vector<op::RefTensor> exact_layout(const op::Declaration& d, const op::CallArgs& call,
                                        const op::Validated& v) {
  const std::vector<int> passed = op::passed_tensors(d);
  std::vector<op::RefTensor> out;
  for (std::size_t t = 0; t < d.tensors.size(); ++t) {
    const op::Tensor& decl = d.tensors[t];
    const std::size_t batch_dims = decl.batched ? v.batch_shape.size() : 0;
    const auto at = std::find(passed.begin(), passed.end(), static_cast<int>(t));
    if (at != passed.end()) {
      const HostTensor& h = call.tensors[static_cast<std::size_t>(at - passed.begin())];
      out.push_back(drop_unit_batch(h.shape(), h.strides(), batch_dims, decl.name));
    } else {
      const std::vector<std::int64_t> shape = op::tensor_shape(d, v, static_cast<int>(t));
      out.push_back(drop_unit_batch(shape, contiguous_strides(shape), batch_dims, decl.name));
    }
  }
  return out;
}

std::vector<op::RefTensor> rows_layout(const op::Declaration& d, const op::CallGeometry& geom) {
  std::vector<op::RefTensor> out;
  for (std::size_t t = 0; t < d.tensors.size(); ++t) {
    const op::Tensor& decl = d.tensors[t];
    std::vector<std::int64_t> dims;
    for (const std::string& n : decl.dims)
      dims.push_back(axis_value(d, geom.axes, n));
    std::vector<std::int64_t> strides = contiguous_strides(dims);
    if (decl.batched) {
      const std::int64_t row = d.row_elements(decl, geom.axes);
      dims.insert(dims.begin(), geom.rows);
      strides.insert(strides.begin(), geom.tensors[t].row_stride.value_or(row));
    }
    out.push_back(ref_tensor(dims, strides, decl.name));
  }
  return out;
}

op::CallGeometry rows_geometry(const op::Declaration& d, DType dtype, std::int64_t rows,
                               const std::vector<std::int64_t>& axes,
                               const std::vector<std::int64_t>& row_strides,
                               const std::vector<std::uintptr_t>& addresses) {
  op::CallGeometry g;
  g.dtype = dtype;
  g.rows = rows;
  g.axes = axes;
  for (std::size_t t = 0; t < d.tensors.size(); ++t) {
    const op::Tensor& decl = d.tensors[t];
    const std::int64_t row = d.row_elements(decl, axes);
    op::TensorGeometry tg;
    tg.addr = t < addresses.size() ? addresses[t] : 0;
    if (decl.batched) {
      const std::int64_t s = t < row_strides.size() && row_strides[t] > 0 ? row_strides[t] : row;
      tg.row_stride = s;
      tg.span_elements = rows <= 0 ? 0 : (rows - 1) * s + row;
    } else {
      tg.row_stride = row;
      tg.span_elements = row;
    }
    g.tensors.push_back(tg);
  }
  return g;
}

ShapeCall shape_call(const op::Operator& op, const op::BenchShape& shape) {
  const op::Declaration& d = op.declaration();
  ShapeCall s;
  for (int t : op::passed_tensors(d)) {
    const op::Tensor& decl = d.tensors[t];
    std::vector<std::int64_t> dims;
    if (decl.batched) dims.push_back(1);
    for (const std::string& n : decl.dims)
      dims.push_back(axis_value(d, shape.axes, n));
    s.meta.tensors.push_back(HostTensor::zeros(
        dims, decl.dtype == op::DTypeRule::kFloat32 ? DType::kFloat32 : shape.dtype));
  }
  s.meta.scalars = op.benchmark_scalars();
  s.v = op.validate(s.meta);
  if (!s.v.ok())
    throw std::runtime_error(fmt::format("{} rejects the benchmark shape {}: {}", op.contract_id(),
                                         shape.to_json(d).dump(), s.v.error->message));
  s.v.rows = shape.rows;
  s.v.batch_shape = {shape.rows};
  return s;
}

CallLauncher::CallLauncher(const op::Operator& op, const LoadedCandidate* cand,
                           const op::DeviceInfo& device, const op::CallGeometry& geom,
                           const op::Validated& v, std::vector<op::RefTensor> layout,
                           const op::CallArgs* meta)
    : op_(op), cand_(cand), device_(device), geom_(geom), v_(v), layout_(std::move(layout)),
      abi_(op::abi(op.declaration())) {
  if (meta) meta_ = *meta;
  const op::Declaration& d = op.declaration();
  if (cand_ && cand_->manifest)
    decision_ = op::decide_dispatch(d, *cand_->manifest, geom_, device_);
  else
    decision_ = geom_.empty() ? op::DispatchDecision{op::Route::kNoLaunch, -1, "empty call"}
                              : op::DispatchDecision{op::Route::kReference, -1, "no candidate"};
  if (decision_.route == op::Route::kCandidate) {
    const op::Variant& var = cand_->manifest->variants[static_cast<std::size_t>(decision_.variant)];
    entry_ = var.entry_points.at(geom_.dtype);
    int per_sm = 0;
    failure_ = prepare(decision_.variant, &per_sm);
    plan_ = op::plan_launch(var.launch, geom_.rows, op::row_width(d, geom_), device_, per_sm);
  } else if (decision_.route == op::Route::kReference) {
    const op::GpuReference* ref = op::find_gpu_reference(op_.contract_id());
    if (ref == nullptr || ref->kernel(geom_.dtype) == nullptr)
      failure_ = fmt::format("{} has no trusted GPU reference kernel for {} ({}/gpu_reference.cu)",
                             op_.contract_id(), dtype_name(geom_.dtype), op_.folder());
    else if (d.tensors.size() > static_cast<std::size_t>(op::kRefMaxTensors) ||
             d.axes.size() > static_cast<std::size_t>(op::kRefMaxAxes) ||
             v_.scalars.size() > static_cast<std::size_t>(op::kRefMaxScalars))
      failure_ = fmt::format("{} has more tensors, axes or scalars than RefArgs holds "
                             "(kernels/gpu_reference.h)",
                             op_.contract_id());
  }
}

std::string CallLauncher::prepare(int variant, int* blocks_per_sm) const {
  const op::LaunchRule& rule = cand_->manifest->variants[static_cast<std::size_t>(variant)].launch;
  const void* fn = reinterpret_cast<const void*>(
      cand_->kernels[static_cast<std::size_t>(variant)].at(geom_.dtype));
  const std::int64_t smem = rule.dynamic_smem_bytes(op::row_width(op_.declaration(), geom_));
  if (smem > op::kDefaultDynamicSmemBytes) {
    const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) {
      cudaGetLastError(); // clear a non-sticky error
      return fmt::format("cudaFuncSetAttribute(MaxDynamicSharedMemorySize={} bytes) failed: {} "
                         "(the device allows {} bytes per block)",
                         smem, cuda_error_text(e), device_.max_dynamic_smem_optin);
    }
  }
  *blocks_per_sm = 0;
  if (rule.grid != op::GridKind::kPersistent) return {};
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks_per_sm, fn, rule.block_threads, static_cast<std::size_t>(smem));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return "cudaOccupancyMaxActiveBlocksPerMultiprocessor failed: " + cuda_error_text(e);
  }
  if (*blocks_per_sm <= 0)
    return fmt::format("no block of {} threads with {} bytes of dynamic shared memory fits on an "
                       "SM (occupancy 0)",
                       rule.block_threads, smem);
  return {};
}

nlohmann::json CallLauncher::to_json() const {
  const bool cand = decision_.route == op::Route::kCandidate;
  return {{"route", op::route_name(decision_.route)},
          {"variant", decision_.variant},
          {"why", decision_.why},
          {"entry", entry_},
          {"plan", cand ? plan_.to_json() : nlohmann::json(nullptr)}};
}

op::CallGeometry CallLauncher::at(const std::vector<std::uintptr_t>& addresses) const {
  op::CallGeometry g = geom_;
  for (std::size_t t = 0; t < g.tensors.size() && t < addresses.size(); ++t)
    g.tensors[t].addr = addresses[t];
  return g;
}

cudaError_t CallLauncher::launch_variant(int variant, const op::LaunchPlan& plan,
                                         const op::CallGeometry& geom, cudaStream_t stream) const {
  op::PackedArgs args(abi_, op::abi_values(geom, v_));
  const cudaKernel_t k = cand_->kernels[static_cast<std::size_t>(variant)].at(geom.dtype);
  cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(plan.grid)),
                   dim3(static_cast<unsigned>(plan.block)), args.argv(),
                   static_cast<std::size_t>(plan.dynamic_smem), stream);
  return cudaGetLastError(); // checked at the call (CASES.md P13)
}

cudaError_t CallLauncher::launch_reference(const op::CallGeometry& geom,
                                           cudaStream_t stream) const {
  const op::GpuReference* ref = op::find_gpu_reference(op_.contract_id());
  if (ref == nullptr) return cudaErrorInvalidDeviceFunction; // failure() says why
  if (layout_.size() > static_cast<std::size_t>(op::kRefMaxTensors) ||
      geom.axes.size() > static_cast<std::size_t>(op::kRefMaxAxes) ||
      v_.scalars.size() > static_cast<std::size_t>(op::kRefMaxScalars))
    return cudaErrorInvalidValue; // failure() says why
  op::RefArgs a;
  a.rows = geom.rows;
  a.ntensors = static_cast<int>(layout_.size());
  for (std::size_t t = 0; t < layout_.size(); ++t) {
    a.tensors[t] = layout_[t];
    a.tensors[t].data = reinterpret_cast<void*>(geom.tensors[t].addr);
  }
  for (std::size_t i = 0; i < geom.axes.size(); ++i)
    a.axes[i] = geom.axes[i];
  for (std::size_t i = 0; i < v_.scalars.size(); ++i)
    a.scalars[i] = v_.scalars[i];
  const op::RefLaunch l = ref->launch(a);
  if (l.grid == 0) return cudaSuccess;
  void* argv[] = {&a};
  cudaLaunchKernel(ref->kernel(geom.dtype), dim3(l.grid), dim3(l.block), argv, l.smem, stream);
  return cudaGetLastError();
}

cudaError_t CallLauncher::launch(const std::vector<std::uintptr_t>& addresses,
                                 cudaStream_t stream) const {
  switch (decision_.route) {
  case op::Route::kNoLaunch:
    return cudaSuccess;
  case op::Route::kCandidate:
    return launch_variant(decision_.variant, plan_, at(addresses), stream);
  case op::Route::kReference:
    break;
  }
  return launch_reference(at(addresses), stream);
}

cudaError_t CallLauncher::wrapper_call(const std::vector<std::uintptr_t>& addresses,
                                       cudaStream_t stream) const {
  if (!meta_ || !op_.validate(*meta_).ok()) return cudaErrorInvalidValue;
  const op::CallGeometry g = at(addresses);
  if (!cand_ || !cand_->manifest) return launch_reference(g, stream);
  const op::Declaration& d = op_.declaration();
  const op::DispatchDecision dd = op::decide_dispatch(d, *cand_->manifest, g, device_);
  if (dd.route == op::Route::kNoLaunch) return cudaSuccess;
  if (dd.route == op::Route::kReference) return launch_reference(g, stream);
  const op::Variant& var = cand_->manifest->variants[static_cast<std::size_t>(dd.variant)];
  int per_sm = 0;
  if (var.launch.grid == op::GridKind::kPersistent) {
    const void* fn = reinterpret_cast<const void*>(
        cand_->kernels[static_cast<std::size_t>(dd.variant)].at(g.dtype));
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, fn, var.launch.block_threads,
        static_cast<std::size_t>(var.launch.dynamic_smem_bytes(op::row_width(d, g))));
  }
  return launch_variant(dd.variant,
                        op::plan_launch(var.launch, g.rows, op::row_width(d, g), device_, per_sm),
                        g, stream);
}

op::DeviceInfo query_device_info(int device) {
  op::DeviceInfo info;
  check(cudaDeviceGetAttribute(&info.cc_major, cudaDevAttrComputeCapabilityMajor, device), "attr");
  check(cudaDeviceGetAttribute(&info.cc_minor, cudaDevAttrComputeCapabilityMinor, device), "attr");
  check(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device), "attr");
  int optin = 0;
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "attr");
  info.max_dynamic_smem_optin = optin;
  return info;
}

} // namespace kloop::gpu
