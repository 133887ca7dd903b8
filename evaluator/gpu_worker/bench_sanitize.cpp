// The worker's "sanitize" mode (bench_run.h; h7-api.md): representative small cases (tails
// around the tile, all dtypes, a strided view) run once per shared-memory poison pattern, with
// exact-size allocations (cudaMalloc of exactly the bytes the view spans: no guard padding that
// would hide an out-of-bounds access from memcheck) and an output buffer that is never written
// before the candidate (so initcheck sees a read of it). Before each candidate launch a scrub
// kernel fills every SM's shared memory with the pattern; the two results must be identical and
// within tolerance of the trusted reference kernel's output. compute-sanitizer wraps the whole
// worker process (evaluator/sanitizer.h).
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "evaluator/gpu_worker/bench_kernels.h"
#include "evaluator/gpu_worker/bench_launch.h"
#include "evaluator/gpu_worker/bench_run.h"

namespace kloop::gpu {

namespace {

using nlohmann::json;

constexpr std::uint32_t kPatterns[] = {0xFFFFFFFFu, 0x42424242u}; // NaN; finite non-zero

// Per dtype: three rows at each tail width around common tiles, then four rows of width 1000 with
// every batched input at row stride 1032 (a strided view); the row axis takes the width, other
// variable axes their minimum. Widths outside the row axis's range are left out.
json default_cases(const op::Declaration& d) {
  json cases = json::array();
  const int ra = d.row_axis();
  auto shape = [&](DType dt, std::int64_t rows, std::int64_t width) {
    op::BenchShape s{rows, {}, dt};
    for (std::size_t a = 0; a < d.axes.size(); ++a)
      s.axes.push_back(static_cast<int>(a) == ra ? width
                       : d.axes[a].variable      ? d.axes[a].min
                                                 : d.axes[a].value);
    return s.to_json(d);
  };
  auto fits = [&](std::int64_t w) {
    return ra < 0 || (w >= d.axes[ra].min && w <= d.axes[ra].max);
  };
  for (DType dt : kAllDTypes) {
    for (std::int64_t w : {1, 31, 33, 129, 255, 257, 1009, 2049, 4099})
      if (fits(w)) cases.push_back(shape(dt, 3, w));
    if (!fits(1000)) continue;
    json strided = shape(dt, 4, 1000);
    for (const op::Tensor& t : d.tensors)
      if (t.batched && t.role == op::Role::kInput) strided[t.name + "_row_stride"] = 1032;
    cases.push_back(strided);
  }
  return cases;
}

std::vector<unsigned char> to_host(const DeviceBuffer& b, cudaStream_t s) {
  std::vector<unsigned char> v(b.size());
  copy_to_host(v.data(), b.data(), b.size(), s, "copy an output to host");
  return v;
}

// One case: the reference's outputs, then the candidate once per shared-memory poison pattern
// into fresh, never-written outputs (each launch after a scrub of shared memory with the pattern
// when `scrub`). Returns the case's evidence; sets *failure on the first problem.
json sanitize_case(const op::Operator& op, const json& c, const LoadedCandidate& cand,
                   const op::DeviceInfo& device, bool scrub, int blocks, int smem,
                   DeviceBuffer& cmp, cudaStream_t s, std::string* failure) {
  const op::Declaration& d = op.declaration();
  std::vector<std::int64_t> strides;
  const op::BenchShape shape = read_shape(d, c, &strides);
  const ShapePlan plan = plan_shape(op, shape, strides);
  std::string name = shape.label(d);
  for (std::size_t t = 0; t < strides.size(); ++t)
    if (strides[t] > 0) name += fmt::format(" {} stride {}", d.tensors[t].name, strides[t]);
  const ShapeBuffers ref_buf(plan, 7 + static_cast<std::uint64_t>(shape.width(d)), s);
  json item{{"case", name}, {"exact_alloc", true}};
  const std::unique_ptr<CallLauncher> ref = plan.launcher(nullptr, device, ref_buf.addresses());
  check(ref->launch(ref_buf.addresses(), s), "reference launch");
  item["route"] = "reference";
  std::vector<std::vector<std::vector<unsigned char>>> results;
  bool correct = true;
  std::string why;
  for (std::uint32_t pattern : kPatterns) {
    // Fresh outputs, never written before the candidate; the inputs are the reference's.
    std::vector<DeviceBuffer> outs;
    std::vector<std::uintptr_t> addr = ref_buf.addresses();
    for (int t : plan.outputs) {
      outs.emplace_back(plan.bytes[static_cast<std::size_t>(t)]);
      addr[static_cast<std::size_t>(t)] = reinterpret_cast<std::uintptr_t>(outs.back().data());
    }
    const std::unique_ptr<CallLauncher> pc = plan.launcher(&cand, device, addr);
    item["route"] = op::route_name(pc->route());
    item["variant"] = pc->variant();
    if (!pc->failure().empty()) {
      correct = false;
      why = "launch failed: " + pc->failure();
      break;
    }
    if (scrub) check(scrub_shared(pattern, blocks, smem, s), "scrub shared memory");
    const cudaError_t e = pc->launch(addr, s);
    if (e != cudaSuccess) {
      if (is_sticky(e)) throw StickyFault{e, "candidate launch (" + name + ")"};
      correct = false;
      why = "launch failed: " + cuda_error_text(e);
      break;
    }
    check(cudaStreamSynchronize(s), ("candidate (" + name + ")").c_str());
    results.emplace_back();
    for (std::size_t k = 0; k < plan.outputs.size(); ++k) {
      const int t = plan.outputs[k];
      const op::Tensor& decl = d.tensors[static_cast<std::size_t>(t)];
      const DType dt = decl.dtype == op::DTypeRule::kFloat32 ? DType::kFloat32 : shape.dtype;
      const op::Tolerance tol = op.tolerance(shape.dtype, t);
      check(compare_outputs(dt, outs[k].data(), ref_buf.tensors[static_cast<std::size_t>(t)].data(),
                            static_cast<std::int64_t>(outs[k].size() / dtype_bytes(dt)), tol.atol,
                            tol.rtol, reinterpret_cast<unsigned long long*>(cmp.data()), s),
            "compare");
      unsigned long long r[3] = {};
      copy_to_host(r, cmp.data(), sizeof(r), s, "compare copy");
      if (r[0] != 0 && correct) {
        correct = false;
        why = fmt::format("{}{} elements outside tolerance with shared memory poisoned to "
                          "{:#010x}, first at flat index {}",
                          plan.outputs.size() > 1 ? decl.name + ": " : "", r[0], pattern, r[1] - 1);
      }
      results.back().push_back(to_host(outs[k], s));
    }
  }
  const bool identical = results.size() == 2 && results[0] == results[1];
  item["identical"] = identical;
  item["correct"] = correct;
  item["reason"] = why;
  if (failure->empty() && (!identical || !correct)) {
    *failure = name + ": " +
               (!correct ? why
                         : "results differ between shared-memory poison patterns (uninitialised "
                           "shared read)");
  }
  return item;
}

} // namespace

ModeOutcome run_sanitize(const json& req, const op::Operator& op, const LoadedCandidate& cand,
                         const op::DeviceInfo& device, json extra) {
  // The spec may also come as options.sanitize (GpuRunRequest carries only "options").
  const json spec = req.contains("sanitize")
                        ? req["sanitize"]
                        : req.value("options", json::object()).value("sanitize", json::object());
  const json cases = spec.value("cases", default_cases(op.declaration()));
  // shared_scrub false (the racecheck run, evaluator/throughput.h racecheck_scrub): no scrub
  // kernel before the launches. racecheck tracks shared-memory accesses, not values, and the
  // poisoning verdict is read from the memcheck run alone, so the scrub only costs time there:
  // its stores to every SM's whole shared memory are what racecheck spent most of its time on.
  const bool scrub = spec.value("shared_scrub", true);
  const int blocks = std::max(1, device.sm_count) * spec.value("scrub_blocks_per_sm", 2);
  const int smem = static_cast<int>(device.max_dynamic_smem_optin);
  Stream stream;
  DeviceBuffer cmp(24);
  json out = json::array();
  std::string failure;
  for (const json& c : cases)
    out.push_back(
        sanitize_case(op, c, cand, device, scrub, blocks, smem, cmp, stream.get(), &failure));
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
