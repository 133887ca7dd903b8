// kloop-gpu-worker REQUEST_DIR: runs one evaluation batch on the GPU (evaluator/gpu_runner.h
// documents the request/result files and the exit codes). Started fresh per batch by the runner;
// links cudart_static only, so it starts on machines without a driver and reports `not_run`.
// Before each case it writes progress.json so that a watchdog kill still names the case. On a
// sticky CUDA fault it writes what it knows and exits with kGpuWorkerStickyFault; it never calls
// the reference kernel in a faulted process.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluator/correctness.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/gpu_worker/bench_mode.h"
#include "evaluator/gpu_worker/bench_run.h"
#include "evaluator/gpu_worker/cuda_rt.h"
#include "evaluator/gpu_worker/device_candidate.h"
#include "evaluator/gpu_worker/launch.h"
#include "kernels/gpu_reference.h"
#include "kernels/manifest.h"
#include "kernels/registry.h"
#include "store/json_at.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace kloop;

namespace {

fs::path g_dir;
// Phase timings for result.json "timings" (evaluator/phases.h): context creation and cubin load;
// a mode may add its own keys (benchmark: per shape-state sampling times) under extra["timings"].
json g_timings = json::object();

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Atomic write (tmp + rename) so a kill never leaves half a JSON document.
void write_json(const std::string& name, const json& j) {
  const fs::path tmp = g_dir / (name + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1);
  }
  fs::rename(tmp, g_dir / name);
}

int finish(int code, const std::string& status, const std::string& reason, json extra = {}) {
  json r = extra.is_object() ? extra : json::object();
  json timings = g_timings;
  if (r.contains("timings") && r["timings"].is_object()) timings.update(r["timings"]);
  r["timings"] = timings;
  r["status"] = status;
  r["reason"] = reason;
  r["exit_code"] = code;
  r["device_memory"] = gpu::memory_report(); // every mode, also after a fault (issue 8)
  write_json("result.json", r);
  std::fprintf(stderr, "kloop-gpu-worker: %s: %s\n", status.c_str(), reason.c_str());
  return code;
}

// The case specs of the request: a list of specs, or {"suite": one of the operator's suite names,
// "seed", optional "first" and "count" (a slice)}.
std::vector<json> resolve_cases(const op::Operator& op, const json& cases) {
  if (cases.is_array()) return cases.get<std::vector<json>>();
  const std::string suite = cases.value("suite", std::string("public"));
  std::vector<json> out = op.suite(suite, cases.value("seed", std::uint64_t{1}));
  if (cases.contains("first") || cases.contains("count")) { // a slice of the suite
    const std::size_t first = std::min(out.size(), cases.value("first", std::size_t{0}));
    const std::size_t count = std::min(out.size() - first, cases.value("count", out.size()));
    out = std::vector<json>(out.begin() + first, out.begin() + first + count);
  }
  return out;
}

// The operator the request names ("operator": a contract id), else the manifest's "contract".
const op::Operator* request_operator(const json& req) {
  std::string id = req.value("operator", std::string());
  if (id.empty() && req.contains("manifest") && req["manifest"].is_object())
    id = req["manifest"].value("contract", std::string());
  // Neither (requests written before issue 25): weighted_rmsnorm/1, the only operator then.
  return op::find_operator(id.empty() ? "weighted_rmsnorm/1" : id);
}

json device_json(const op::DeviceInfo& info) {
  json d = info.to_json();
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    d["name"] = p.name;
    // nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (16 bytes, hex).
    std::string uuid = "GPU-";
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
      uuid += fmt::format("{:02x}", static_cast<unsigned char>(p.uuid.bytes[i]));
    }
    d["uuid"] = uuid;
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  d["driver_version"] = drv;
  d["runtime_version"] = rt;
  return d;
}

// The correctness mode: every case of the request through the device adapter and the
// correctness core; a sticky fault ends the run with what is known and the case in progress.
int run_correctness(const json& req, const op::Operator& op, gpu::LoadedCandidate cand,
                    const op::DeviceInfo& info, json extra) {
  const std::vector<json> specs = resolve_cases(op, req.value("cases", json::object()));
  const json opts = req.value("options", json::object());
  gpu::DeviceAdapter adapter(op, std::move(cand), info, gpu::AdapterOptions::from_json(opts));
  evaluator::SuiteRunOptions run;
  run.stop_at_first_failure = opts.value("stop_at_first_failure", false);
  run.prepare_ahead =
      static_cast<int>(std::clamp<std::int64_t>(store::int_at(opts, "prepare_ahead", 0), 0, 16));
  run.before_case = [&](std::size_t i, const json& spec) {
    write_json(
        "progress.json",
        {{"index", i}, {"name", spec.value("name", std::string())}, {"total", specs.size()}});
  };
  run.after_case = [&](const evaluator::CaseResult&) {
    if (adapter.sticky()) throw *adapter.sticky();
  };
  evaluator::SuiteResult suite;
  try {
    evaluator::run_suite(op, adapter.as_candidate(), specs, suite, run);
  } catch (const gpu::StickyFault& f) {
    const json progress = json::parse(read_file(g_dir / "progress.json"), nullptr, false);
    const std::string cls = gpu::fault_class(f.error);
    suite.pass = false;
    extra["suite"] = suite.to_json();
    extra["evidence"] = adapter.evidence();
    extra["path_counts"] = adapter.path_counts().to_json();
    extra["fault"] = {{"class", cls},
                      {"cuda_error", gpu::cuda_error_text(f.error)},
                      {"where", f.where},
                      {"case_index", progress.value("index", -1)},
                      {"case_name", progress.value("name", "")}};
    return finish(evaluator::kGpuWorkerStickyFault, "crashed",
                  fmt::format("crashed: {} ({}) in {} during case {} ({})", cls,
                              gpu::cuda_error_text(f.error), f.where, progress.value("index", -1),
                              progress.value("name", "")),
                  extra);
  }
  extra["evidence"] = adapter.evidence();
  extra["path_counts"] = adapter.path_counts().to_json();
  const json result = evaluator::correctness_batch_result(suite, std::move(extra));
  return finish(evaluator::kGpuWorkerOk, result["status"].get<std::string>(),
                result["reason"].get<std::string>(), result);
}

// The `count` devices this process sees: [{"index", "name", "pci_bus_id"}] (a device whose
// properties cannot be read is left out).
json visible_devices(int count) {
  json devices = json::array();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    char pci[32] = {};
    cudaDeviceGetPCIBusId(pci, sizeof(pci), i);
    devices.push_back({{"index", i}, {"name", p.name}, {"pci_bus_id", pci}});
  }
  return devices;
}

int run(const json& req) {
  int count = 0;
  const cudaError_t dc = cudaGetDeviceCount(&count);
  // The CUDA answer itself, so that callers can tell "no device" (cudaErrorNoDevice, no driver:
  // cudaErrorInsufficientDriver, zero devices) from a device that is there but unusable.
  const json query{{"call", "cudaGetDeviceCount"},
                   {"error", cudaGetErrorName(dc)},
                   {"device_count", dc == cudaSuccess ? count : 0}};
  if (dc != cudaSuccess || count == 0)
    return finish(evaluator::kGpuWorkerNoDevice, "not_run",
                  dc != cudaSuccess ? "no CUDA device: " + gpu::cuda_error_text(dc)
                                    : std::string("no CUDA device: cudaGetDeviceCount returned 0"),
                  {{"device_query", query}});
  const auto t_context = std::chrono::steady_clock::now();
  gpu::check(cudaSetDevice(0), "cudaSetDevice");
  gpu::check(cudaFree(nullptr), "context creation");
  g_timings["context_ms"] = ms_since(t_context);
  const auto t_load = std::chrono::steady_clock::now();
  gpu::mark_memory_start();
  const op::DeviceInfo info = gpu::query_device_info(0);
  json extra{{"device", device_json(info)}, {"mode", req.value("mode", "correctness")}};
  const op::Operator* op = request_operator(req);
  if (op == nullptr)
    return finish(evaluator::kGpuWorkerBadRequest, "infra_error",
                  fmt::format("request names operator '{}', which this worker does not have ({})",
                              req.value("operator", std::string()), op::operator_names()),
                  extra);
  extra["operator"] = op->contract_id();
  if (op::find_gpu_reference(op->contract_id()) == nullptr)
    return finish(evaluator::kGpuWorkerInternal, "infra_error",
                  op->contract_id() + " has no trusted GPU reference kernel in this worker", extra);

  // Candidate: parse the manifest again (trusted code), load the cubin, look up entry points.
  gpu::LoadedCandidate cand;
  gpu::Library lib;
  if (req.contains("cubin") && req["cubin"].is_string()) {
    const op::ManifestParse mp = op::parse_manifest(op->declaration(), req["manifest"].dump());
    if (!mp.manifest)
      return finish(evaluator::kGpuWorkerOk, "fail",
                    "manifest rejected: " + mp.errors.front().message, extra);
    json kernels = json::object();
    const std::string image = read_file(g_dir / req["cubin"].get<std::string>());
    if (std::string why = gpu::load_candidate(*mp.manifest, image, lib, cand, &kernels);
        !why.empty())
      return finish(evaluator::kGpuWorkerOk, "fail", why, extra);
    extra["kernels"] = kernels;
  }
  g_timings["load_ms"] = ms_since(t_load);
  if (extra["mode"] == "probe") { // every visible device, for `--devices` (agent/components.h)
    extra["devices"] = visible_devices(count);
    return finish(evaluator::kGpuWorkerOk, "pass", "", extra);
  }
  if (gpu::is_perf_mode(extra["mode"].get<std::string>())) {
    gpu::ModeOutcome m = gpu::run_perf_mode(req, *op, cand, info, g_dir, extra);
    return finish(m.exit_code, m.status, m.reason, m.extra);
  }
  if (extra["mode"] == "bench") {
    extra["bench"] = gpu::run_bench(*op, cand, info, req.value("options", json::object()));
    return finish(evaluator::kGpuWorkerOk, "pass", "", extra);
  }
  return run_correctness(req, *op, std::move(cand), info, std::move(extra));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kloop-gpu-worker REQUEST_DIR (see evaluator/gpu_runner.h)\n");
    return evaluator::kGpuWorkerBadRequest;
  }
  g_dir = argv[1];
  json req;
  try {
    req = json::parse(read_file(g_dir / "request.json"));
  } catch (const std::exception& e) {
    return finish(evaluator::kGpuWorkerBadRequest, "infra_error",
                  std::string("bad request.json: ") + e.what());
  }
  try {
    return run(req);
  } catch (const gpu::StickyFault& f) {
    return finish(evaluator::kGpuWorkerStickyFault, "crashed",
                  fmt::format("crashed: {} ({}) in {}", gpu::fault_class(f.error),
                              gpu::cuda_error_text(f.error), f.where),
                  {{"fault",
                    {{"class", gpu::fault_class(f.error)},
                     {"cuda_error", gpu::cuda_error_text(f.error)},
                     {"where", f.where}}}});
  } catch (const std::exception& e) {
    return finish(evaluator::kGpuWorkerInternal, "infra_error",
                  std::string("GPU worker internal error: ") + e.what());
  }
}
