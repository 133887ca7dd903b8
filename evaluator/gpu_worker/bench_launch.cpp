// Planned launches of one path (bench_launch.h).
#include "evaluator/gpu_worker/bench_launch.h"

#include <stdexcept>

#include <fmt/format.h>

#include "evaluator/gpu_worker/reference_kernel.h"

namespace kloop::gpu {

namespace {

rmsnorm::CallGeometry geometry(const HostTensor& xm, const HostTensor& wm, long long rows,
                               long long x_stride, const void* x, const void* w, void* y) {
  rmsnorm::CallGeometry g = rmsnorm::call_geometry(xm, wm, reinterpret_cast<std::uintptr_t>(x),
                                                   reinterpret_cast<std::uintptr_t>(w),
                                                   reinterpret_cast<std::uintptr_t>(y));
  g.rows = rows;
  g.x_row_stride = x_stride;
  return g;
}

// Occupancy and shared-memory opt-in of the candidate entry point, as the trusted wrapper does.
int blocks_per_sm(const rmsnorm::Manifest& m, const void* fn, long long h) {
  const std::int64_t smem = m.launch.dynamic_smem_bytes(h);
  if (smem > rmsnorm::kDefaultDynamicSmemBytes &&
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(
        fmt::format("launch failed: {} bytes of dynamic shared memory refused", smem));
  }
  int per_sm = 0;
  if (m.launch.grid == rmsnorm::GridKind::kPersistent) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, fn, m.launch.block_threads, static_cast<std::size_t>(smem)) != cudaSuccess ||
        per_sm <= 0) {
      cudaGetLastError();
      throw std::runtime_error("launch failed: no block of the candidate fits on an SM");
    }
  }
  return per_sm;
}

} // namespace

PathLauncher::PathLauncher(const LoadedCandidate* cand, const rmsnorm::DeviceInfo& device,
                           DType dtype, long long rows, int h, long long x_row_stride,
                           const void* x, const void* w, void* y, float eps)
    : cand_(cand), device_(device), dtype_(dtype), rows_(rows), x_stride_(x_row_stride), h_(h),
      eps_(eps), x_meta_(HostTensor::zeros({1, h}, dtype)), w_meta_(HostTensor::zeros({h}, dtype)) {
  const rmsnorm::CallGeometry g = geometry(x_meta_, w_meta_, rows, x_row_stride, x, w, y);
  route_ = cand_ && cand_->manifest
               ? rmsnorm::decide_dispatch(*cand_->manifest, g, device_)
               : rmsnorm::DispatchDecision{rmsnorm::Route::kReference, "no candidate cubin"};
  if (route_.route == rmsnorm::Route::kCandidate) {
    const void* fn = reinterpret_cast<const void*>(cand_->kernels.at(dtype));
    plan_ =
        rmsnorm::plan_launch(*cand_->manifest, g, device_, blocks_per_sm(*cand_->manifest, fn, h));
    entry_ = cand_->manifest->entry_points.at(dtype);
  } else {
    entry_ = "reference";
  }
}

nlohmann::json PathLauncher::to_json() const {
  return {{"route", rmsnorm::route_name(route_.route)},
          {"why", route_.why},
          {"entry", entry_},
          {"plan", route_.route == rmsnorm::Route::kCandidate ? plan_.to_json() : nullptr}};
}

cudaError_t PathLauncher::launch_with(const rmsnorm::LaunchPlan& plan, const void* x, const void* w,
                                      void* y, cudaStream_t stream) const {
  if (route_.route != rmsnorm::Route::kCandidate) {
    RefGeometry rg;
    rg.rows = rows_;
    rg.h = h_;
    rg.outer_ndim = 1;
    rg.outer_shape[0] = rows_;
    rg.outer_stride[0] = x_stride_;
    rg.y_row_stride = h_;
    return launch_reference(dtype_, x, w, y, rg, eps_, stream);
  }
  const void* xp = x;
  const void* wp = w;
  void* yp = y;
  long long rows = rows_, xs = x_stride_, ys = h_;
  int h = h_;
  float eps = eps_;
  void* args[] = {&xp, &wp, &yp, &rows, &h, &xs, &ys, &eps};
  cudaLaunchKernel(reinterpret_cast<const void*>(cand_->kernels.at(dtype_)),
                   dim3(static_cast<unsigned>(plan.grid)), dim3(static_cast<unsigned>(plan.block)),
                   args, static_cast<std::size_t>(plan.dynamic_smem), stream);
  return cudaGetLastError();
}

cudaError_t PathLauncher::launch(const void* x, const void* w, void* y, cudaStream_t stream) const {
  return launch_with(plan_, x, w, y, stream);
}

cudaError_t PathLauncher::wrapper_call(const void* x, const void* w, void* y,
                                       cudaStream_t stream) const {
  const rmsnorm::Validation v =
      rmsnorm::validate(x_meta_, w_meta_, rmsnorm::EpsScalar::of(static_cast<double>(eps_)));
  if (!v.ok()) return cudaErrorInvalidValue;
  const rmsnorm::CallGeometry g = geometry(x_meta_, w_meta_, rows_, x_stride_, x, w, y);
  if (!cand_ || !cand_->manifest) return launch_with(plan_, x, w, y, stream);
  const rmsnorm::DispatchDecision d = rmsnorm::decide_dispatch(*cand_->manifest, g, device_);
  if (d.route != rmsnorm::Route::kCandidate) return launch_with(plan_, x, w, y, stream);
  const void* fn = reinterpret_cast<const void*>(cand_->kernels.at(dtype_));
  int per_sm = 0;
  if (cand_->manifest->launch.grid == rmsnorm::GridKind::kPersistent) {
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, fn, cand_->manifest->launch.block_threads,
        static_cast<std::size_t>(cand_->manifest->launch.dynamic_smem_bytes(h_)));
  }
  return launch_with(rmsnorm::plan_launch(*cand_->manifest, g, device_, per_sm), x, w, y, stream);
}

} // namespace kloop::gpu
