// The worker's "sanitize" mode (bench_run.h; h7-api.md): representative small cases (tails
// around the tile, all dtypes, a strided view) run once per shared-memory poison pattern, with
// exact-size allocations (cudaMalloc of exactly the bytes the view spans: no guard padding that
// would hide an out-of-bounds access from memcheck) and an output buffer that is never written
// before the candidate (so initcheck sees a read of it). Before each candidate launch a scrub
// kernel fills every SM's shared memory with the pattern; the two results must be identical and
// within tolerance of the trusted reference kernel's output. compute-sanitizer wraps the whole
// worker process (evaluator/sanitizer.h).
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "evaluator/gpu_worker/bench_kernels.h"
#include "evaluator/gpu_worker/bench_launch.h"
#include "evaluator/gpu_worker/bench_run.h"
#include "kernels/rmsnorm/contract.h"

namespace kloop::gpu {

namespace {

using nlohmann::json;

constexpr std::uint32_t kPatterns[] = {0xFFFFFFFFu, 0x42424242u}; // NaN; finite non-zero

json default_cases() {
  json cases = json::array();
  for (DType dt : kAllDTypes) {
    for (int h : {1, 31, 33, 129, 255, 257, 1009, 2049, 4099}) {
      cases.push_back({{"dtype", dtype_name(dt)}, {"rows", 3}, {"h", h}, {"x_row_stride", h}});
    }
    cases.push_back({{"dtype", dtype_name(dt)}, {"rows", 4}, {"h", 1000}, {"x_row_stride", 1032}});
  }
  return cases;
}

std::vector<unsigned char> to_host(const DeviceBuffer& b, cudaStream_t s) {
  std::vector<unsigned char> v(b.size());
  copy_to_host(v.data(), b.data(), b.size(), s, "copy y to host");
  return v;
}

} // namespace

ModeOutcome run_sanitize(const json& req, const LoadedCandidate& cand,
                         const rmsnorm::DeviceInfo& device, json extra) {
  // The spec may also come as options.sanitize (GpuRunRequest carries only "options").
  const json spec = req.contains("sanitize")
                        ? req["sanitize"]
                        : req.value("options", json::object()).value("sanitize", json::object());
  const json cases = spec.value("cases", default_cases());
  // shared_scrub false (the racecheck run, evaluator/throughput.h racecheck_scrub): no scrub
  // kernel before the launches. racecheck tracks shared-memory accesses, not values, and the
  // poisoning verdict is read from the memcheck run alone, so the scrub only costs time there:
  // its stores to every SM's whole shared memory are what racecheck spent most of its time on.
  const bool scrub = spec.value("shared_scrub", true);
  const int blocks = std::max(1, device.sm_count) * spec.value("scrub_blocks_per_sm", 2);
  const int smem = static_cast<int>(device.max_dynamic_smem_optin);
  Stream stream;
  const cudaStream_t s = stream.get();
  DeviceBuffer cmp(24);
  json out = json::array();
  std::string failure;
  for (const json& c : cases) {
    const DType dt = parse_dtype(c.at("dtype").get<std::string>()).value();
    const long long rows = c.at("rows").get<long long>();
    const int h = c.at("h").get<int>();
    const long long stride = c.value("x_row_stride", static_cast<long long>(h));
    const std::size_t es = dtype_bytes(dt);
    const std::size_t x_elems = static_cast<std::size_t>((rows - 1) * stride + h);
    const std::size_t y_elems = static_cast<std::size_t>(rows) * h;
    const std::string name = fmt::format("{} {}x{} stride {}", dtype_name(dt), rows, h, stride);
    DeviceBuffer x(x_elems * es), w(h * es), yref(y_elems * es);
    check(fill_uniform(dt, x.data(), static_cast<std::int64_t>(x_elems), 7 + h, -2.f, 2.f, s),
          "fill x");
    check(fill_uniform(dt, w.data(), h, 11 + h, 0.5f, 1.5f, s), "fill weight");
    json item{{"case", name}, {"exact_alloc", true}};
    std::unique_ptr<PathLauncher> pc;
    try {
      pc = std::make_unique<PathLauncher>(&cand, device, dt, rows, h, stride, x.data(), w.data(),
                                          yref.data(), 1e-6f);
    } catch (const std::runtime_error& e) {
      item["identical"] = false;
      item["correct"] = false;
      item["reason"] = e.what();
      if (failure.empty()) failure = name + ": " + e.what();
      out.push_back(item);
      continue;
    }
    const PathLauncher ref(nullptr, device, dt, rows, h, stride, x.data(), w.data(), yref.data(),
                           1e-6f);
    check(ref.launch(x.data(), w.data(), yref.data(), s), "reference launch");
    item["route"] = rmsnorm::route_name(pc->route());
    std::vector<std::vector<unsigned char>> results;
    bool correct = true;
    std::string why;
    for (std::uint32_t pattern : kPatterns) {
      DeviceBuffer y(y_elems * es); // fresh, never written before the candidate
      if (scrub) check(scrub_shared(pattern, blocks, smem, s), "scrub shared memory");
      const cudaError_t e = pc->launch(x.data(), w.data(), y.data(), s);
      if (e != cudaSuccess) {
        if (is_sticky(e)) throw StickyFault{e, "candidate launch (" + name + ")"};
        correct = false;
        why = "launch failed: " + cuda_error_text(e);
        break;
      }
      check(cudaStreamSynchronize(s), ("candidate (" + name + ")").c_str());
      const rmsnorm::Tolerance tol = rmsnorm::tolerance_for(dt);
      check(compare_outputs(dt, y.data(), yref.data(), static_cast<std::int64_t>(y_elems), tol.atol,
                            tol.rtol, reinterpret_cast<unsigned long long*>(cmp.data()), s),
            "compare");
      unsigned long long r[3] = {};
      copy_to_host(r, cmp.data(), sizeof(r), s, "compare copy");
      if (r[0] != 0 && correct) {
        correct = false;
        why = fmt::format("{} elements outside tolerance with shared memory poisoned to {:#010x}, "
                          "first at flat index {}",
                          r[0], pattern, r[1] - 1);
      }
      results.push_back(to_host(y, s));
    }
    const bool identical = results.size() == 2 && results[0] == results[1];
    item["identical"] = identical;
    item["correct"] = correct;
    item["reason"] = why;
    if (failure.empty() && (!identical || !correct)) {
      failure = name + ": " +
                (!correct ? why
                          : "results differ between shared-memory poison "
                            "patterns (uninitialised shared read)");
    }
    out.push_back(item);
  }
  extra["poison"] = {{"scrubbed", scrub},
                     {"patterns", {"0xffffffff", "0x42424242"}},
                     {"scrub_blocks", blocks},
                     {"scrub_smem_bytes", smem},
                     {"cases", out}};
  ModeOutcome o;
  o.status = failure.empty() ? "pass" : "fail";
  o.reason = failure;
  o.extra = std::move(extra);
  return o;
}

} // namespace kloop::gpu
