// The worker's "pcsample" mode (bench_run.h; h7-api.md): CUPTI PC sampling of the candidate on one
// representative streaming shape (default bfloat16 65536 x 4096), informational feedback only.
#include <fstream>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "evaluator/gpu_worker/bench_kernels.h"
#include "evaluator/gpu_worker/bench_launch.h"
#include "evaluator/gpu_worker/bench_run.h"
#include "evaluator/gpu_worker/pcsampling.h"

namespace kloop::gpu {

namespace {

// The default sampled shape: the operator's largest bfloat16 benchmark shape (65536 x 4096 for
// RMSNorm), else its first.
op::BenchShape default_shape(const op::Operator& op) {
  const std::vector<op::BenchShape> shapes = op.benchmark_shapes();
  const op::BenchShape* best = nullptr;
  auto elements = [&](const op::BenchShape& s) { return s.rows * s.width(op.declaration()); };
  for (const op::BenchShape& s : shapes)
    if (s.dtype == DType::kBFloat16 && (!best || elements(s) > elements(*best))) best = &s;
  if (!best && !shapes.empty()) best = &shapes.front();
  if (!best) throw std::runtime_error(op.contract_id() + " has no benchmark shape");
  return *best;
}

} // namespace

ModeOutcome run_pcsample(const nlohmann::json& req, const op::Operator& op,
                         const LoadedCandidate& cand, const op::DeviceInfo& device,
                         const std::filesystem::path& dir, nlohmann::json extra) {
  const nlohmann::json spec = req.contains("pcsample")
                                  ? req["pcsample"]
                                  : req.value("options", nlohmann::json::object())
                                        .value("pcsample", nlohmann::json::object());
  const op::Declaration& d = op.declaration();
  const op::BenchShape shape =
      spec.contains("shape") ? read_shape(d, spec["shape"]) : default_shape(op);
  Stream stream;
  const ShapePlan plan = plan_shape(op, shape);
  const ShapeBuffers buf(plan, 5, stream.get());
  check(cudaStreamSynchronize(stream.get()), "fill");
  ModeOutcome o;
  o.status = "pass";
  std::string cubin;
  if (req.contains("cubin") && req["cubin"].is_string()) {
    std::ifstream in(dir / req["cubin"].get<std::string>(), std::ios::binary);
    cubin.assign(std::istreambuf_iterator<char>(in), {});
  }
  nlohmann::json result{{"shape", shape.to_json(d)},
                        {"status_note", "informational: profiler feedback, not a gate"}};
  const std::vector<std::uintptr_t> addr = buf.addresses();
  const std::unique_ptr<CallLauncher> p = plan.launcher(&cand, device, addr);
  result["path"] = p->to_json();
  if (!p->failure().empty()) {
    result["status"] = "not_run";
    result["reason"] = "launch failed: " + p->failure();
  } else {
    try {
      PcSampleOptions opt;
      opt.sampling_period = spec.value("sampling_period", 10u);
      opt.top_pcs = spec.value("top_pcs", 16);
      p->launch(addr, stream.get()); // warm-up outside sampling
      check(cudaStreamSynchronize(stream.get()), "warm-up");
      result.update(pc_sample(
          [&] {
            const cudaError_t e = p->launch(addr, stream.get());
            if (e != cudaSuccess && is_sticky(e)) throw StickyFault{e, "sampled launch"};
          },
          spec.value("launches", 3), cubin, opt));
    } catch (const std::runtime_error& e) {
      result["status"] = "not_run";
      result["reason"] = e.what();
    }
  }
  extra["pcsample"] = result;
  o.extra = std::move(extra);
  return o;
}

} // namespace kloop::gpu
