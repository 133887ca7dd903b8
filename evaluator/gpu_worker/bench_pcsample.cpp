// The worker's "pcsample" mode (bench_run.h; h7-api.md): CUPTI PC sampling of the candidate on one
// representative streaming shape (default bfloat16 65536 x 4096), informational feedback only.
#include <fstream>

#include <fmt/format.h>

#include "evaluator/gpu_worker/bench_kernels.h"
#include "evaluator/gpu_worker/bench_launch.h"
#include "evaluator/gpu_worker/bench_run.h"
#include "evaluator/gpu_worker/pcsampling.h"

namespace kloop::gpu {

ModeOutcome run_pcsample(const nlohmann::json& req, const LoadedCandidate& cand,
                         const rmsnorm::DeviceInfo& device, const std::filesystem::path& dir,
                         nlohmann::json extra) {
  const nlohmann::json spec = req.contains("pcsample")
                                  ? req["pcsample"]
                                  : req.value("options", nlohmann::json::object())
                                        .value("pcsample", nlohmann::json::object());
  const nlohmann::json shape =
      spec.value("shape", nlohmann::json{{"rows", 65536}, {"h", 4096}, {"dtype", "bfloat16"}});
  const DType dt = parse_dtype(shape.value("dtype", "bfloat16")).value_or(DType::kBFloat16);
  const long long rows = shape.value("rows", 65536LL);
  const int h = shape.value("h", 4096);
  const std::size_t n = static_cast<std::size_t>(rows) * h, es = dtype_bytes(dt);
  Stream stream;
  DeviceBuffer x(n * es), y(n * es), w(h * es);
  check(fill_uniform(dt, x.data(), static_cast<std::int64_t>(n), 5, -2.f, 2.f, stream.get()),
        "fill");
  check(fill_uniform(dt, w.data(), h, 6, 0.5f, 1.5f, stream.get()), "fill");
  check(cudaStreamSynchronize(stream.get()), "fill");
  ModeOutcome o;
  o.status = "pass";
  std::string cubin;
  if (req.contains("cubin") && req["cubin"].is_string()) {
    std::ifstream in(dir / req["cubin"].get<std::string>(), std::ios::binary);
    cubin.assign(std::istreambuf_iterator<char>(in), {});
  }
  nlohmann::json result{{"shape", {{"rows", rows}, {"h", h}, {"dtype", dtype_name(dt)}}},
                        {"status_note", "informational: profiler feedback, not a gate"}};
  try {
    const PathLauncher p(&cand, device, dt, rows, h, h, x.data(), w.data(), y.data(), 1e-6f);
    result["path"] = p.to_json();
    PcSampleOptions opt;
    opt.sampling_period = spec.value("sampling_period", 10u);
    opt.top_pcs = spec.value("top_pcs", 16);
    p.launch(x.data(), w.data(), y.data(), stream.get()); // warm-up outside sampling
    check(cudaStreamSynchronize(stream.get()), "warm-up");
    result.update(pc_sample(
        [&] {
          const cudaError_t e = p.launch(x.data(), w.data(), y.data(), stream.get());
          if (e != cudaSuccess && is_sticky(e)) throw StickyFault{e, "sampled launch"};
        },
        spec.value("launches", 3), cubin, opt));
  } catch (const std::runtime_error& e) {
    result["status"] = "not_run";
    result["reason"] = e.what();
  }
  extra["pcsample"] = result;
  o.extra = std::move(extra);
  return o;
}

} // namespace kloop::gpu
