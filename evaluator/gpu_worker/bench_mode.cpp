// Quick timing of candidate launches against a copy of the same bytes (see bench_mode.h).
#include "evaluator/gpu_worker/bench_mode.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "evaluator/gpu_worker/reference_kernel.h"

namespace kloop::gpu {
namespace {

// Median of `iters` event-timed runs of `fn` on stream `s`, in milliseconds.
template <typename F> double median_ms(cudaStream_t s, int iters, F&& fn) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  fn(); // warm-up
  check(cudaStreamSynchronize(s), "warm-up");
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    check(cudaEventRecord(a, s), "cudaEventRecord");
    fn();
    check(cudaEventRecord(b, s), "cudaEventRecord");
    check(cudaEventSynchronize(b), "timed run");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

} // namespace

nlohmann::json run_bench(const LoadedCandidate& cand, const rmsnorm::DeviceInfo& device,
                         const nlohmann::json& options) {
  nlohmann::json out = nlohmann::json::array();
  const int iters = options.value("iters", 20);
  Stream stream;
  for (const auto& shape : options.value("shapes", nlohmann::json::array())) {
    const DType dtype = parse_dtype(shape.value("dtype", "bfloat16")).value_or(DType::kBFloat16);
    const long long rows = shape.value("rows", 65536LL);
    const int h = shape.value("h", 4096);
    const std::size_t es = dtype_bytes(dtype);
    const std::size_t bytes = static_cast<std::size_t>(rows) * h * es;
    DeviceBuffer x(bytes), y(bytes), w(h * es);
    check(cudaMemset(x.data(), 0x3C, bytes), "memset"); // ~0.0115 in every dtype
    check(cudaMemset(w.data(), 0x3C, h * es), "memset");
    // The legacy-stream memsets above do not order with the non-blocking `stream`.
    check(cudaDeviceSynchronize(), "memset");
    const HostTensor xt = HostTensor::zeros({1, h}, dtype), wt = HostTensor::zeros({h}, dtype);
    rmsnorm::CallGeometry g = rmsnorm::call_geometry(
        xt, wt, reinterpret_cast<std::uintptr_t>(x.data()),
        reinterpret_cast<std::uintptr_t>(w.data()), reinterpret_cast<std::uintptr_t>(y.data()));
    g.rows = rows;
    g.x_row_stride = h;
    nlohmann::json row{{"dtype", dtype_name(dtype)}, {"rows", rows}, {"h", h}};
    const rmsnorm::DispatchDecision d =
        cand.manifest ? rmsnorm::decide_dispatch(*cand.manifest, g, device)
                      : rmsnorm::DispatchDecision{rmsnorm::Route::kReference, "no candidate"};
    row["route"] = rmsnorm::route_name(d.route);
    std::function<void()> launch;
    if (d.route == rmsnorm::Route::kCandidate) {
      const void* fn = reinterpret_cast<const void*>(cand.kernels.at(dtype));
      const rmsnorm::Manifest& m = *cand.manifest;
      const std::int64_t smem = m.launch.dynamic_smem_bytes(h);
      if (smem > rmsnorm::kDefaultDynamicSmemBytes)
        check(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)),
              "cudaFuncSetAttribute");
      int per_sm = 0;
      if (m.launch.grid == rmsnorm::GridKind::kPersistent)
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, m.launch.block_threads,
                                                            static_cast<std::size_t>(smem)),
              "occupancy");
      const rmsnorm::LaunchPlan plan = rmsnorm::plan_launch(m, g, device, per_sm);
      row["plan"] = plan.to_json();
      launch = [=, &x, &w, &y, &stream] {
        const void* xp = x.data();
        const void* wp = w.data();
        void* yp = y.data();
        long long r = rows, xs = h, ys = h;
        int hh = h;
        float eps = 1e-5f;
        void* args[] = {&xp, &wp, &yp, &r, &hh, &xs, &ys, &eps};
        check(cudaLaunchKernel(fn, dim3(static_cast<unsigned>(plan.grid)),
                               dim3(static_cast<unsigned>(plan.block)), args,
                               static_cast<std::size_t>(plan.dynamic_smem), stream.get()),
              "cudaLaunchKernel");
      };
    } else {
      RefGeometry rg;
      rg.rows = rows;
      rg.h = h;
      rg.outer_ndim = 1;
      rg.outer_shape[0] = rows;
      rg.outer_stride[0] = h;
      rg.y_row_stride = h;
      launch = [=, &x, &w, &y, &stream] {
        check(launch_reference(dtype, x.data(), w.data(), y.data(), rg, 1e-5f, stream.get()),
              "reference launch");
      };
    }
    const double ms = median_ms(stream.get(), iters, launch);
    const double copy_ms = median_ms(stream.get(), iters, [&] {
      check(cudaMemcpyAsync(y.data(), x.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()),
            "copy");
    });
    const double logical = 2.0 * static_cast<double>(bytes) + static_cast<double>(h * es);
    row["median_ms"] = ms;
    row["tbps"] = logical / (ms * 1e-3) / 1e12;
    row["copy_tbps"] = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e12;
    out.push_back(row);
  }
  return {{"shapes", out}, {"iters", iters}};
}

} // namespace kloop::gpu
