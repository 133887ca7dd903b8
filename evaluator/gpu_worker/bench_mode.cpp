// Quick timing of candidate launches against a copy of the same bytes (see bench_mode.h).
#include "evaluator/gpu_worker/bench_mode.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "evaluator/gpu_worker/bench_launch.h"
#include "evaluator/roofline.h"

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

nlohmann::json run_bench(const op::Operator& op, const LoadedCandidate& cand,
                         const op::DeviceInfo& device, const nlohmann::json& options) {
  const op::Declaration& d = op.declaration();
  nlohmann::json out = nlohmann::json::array();
  const int iters = options.value("iters", 20);
  std::vector<op::BenchShape> shapes;
  for (const auto& shape : options.value("shapes", nlohmann::json::array()))
    shapes.push_back(read_shape(d, shape));
  if (shapes.empty()) shapes = op.benchmark_shapes();
  Stream stream;
  for (const op::BenchShape& shape : shapes) {
    const ShapePlan plan = plan_shape(op, shape);
    const ShapeBuffers buf(plan, 1000, stream.get());
    check(cudaStreamSynchronize(stream.get()), "fill");
    const std::unique_ptr<CallLauncher> l = plan.launcher(&cand, device, buf.addresses());
    nlohmann::json row = shape.to_json(d);
    row.update(l->to_json());
    if (!l->failure().empty()) {
      row["error"] = l->failure();
      out.push_back(row);
      continue;
    }
    const double ms = median_ms(stream.get(), iters,
                                [&] { check(l->launch(buf.addresses(), stream.get()), "launch"); });
    // The copy ceiling of the same traffic: the first batched input copied into the first
    // batched output, read and written once.
    const std::size_t copy = plan.bytes[static_cast<std::size_t>(plan.inputs.front())];
    void* dst = buf.tensors[static_cast<std::size_t>(plan.outputs.front())].data();
    const double copy_ms = median_ms(stream.get(), iters, [&] {
      check(cudaMemcpyAsync(
                dst, buf.tensors[static_cast<std::size_t>(plan.inputs.front())].data(),
                std::min(copy, plan.bytes[static_cast<std::size_t>(plan.outputs.front())]),
                cudaMemcpyDeviceToDevice, stream.get()),
            "copy");
    });
    const double logical =
        static_cast<double>(evaluator::roofline::logical_bytes(d, shape).unique());
    row["median_ms"] = ms;
    row["tbps"] = logical / (ms * 1e-3) / 1e12;
    row["copy_tbps"] = 2.0 * static_cast<double>(copy) / (copy_ms * 1e-3) / 1e12;
    out.push_back(row);
  }
  return {{"shapes", out}, {"iters", iters}};
}

} // namespace kloop::gpu
