// Starts kloop-gpu-worker for one batch and classifies what happened (see gpu_runner.h).
#include "evaluator/gpu_runner.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "evaluator/correctness.h"
#include "evaluator/subprocess.h"
#include "store/json_at.h"

namespace kloop::evaluator {
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json parsed = nlohmann::json::parse(text.str(), nullptr, false);
  return parsed.is_discarded() ? nlohmann::json(nullptr) : parsed;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw InfraError(fmt::format("gpu runner: cannot write {}; check the temp directory's space "
                                 "and permissions",
                                 path.string()));
}

// Removes a temporary request folder unless asked to keep it.
struct TempDir {
  fs::path path;
  bool keep = false;
  ~TempDir() {
    if (!keep && !path.empty()) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};

fs::path fresh_dir() {
  std::random_device rd;
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("kloop-gpu-{}-{:08x}", ::getpid(), rd());
  fs::create_directories(dir);
  return dir;
}

std::string case_label(const nlohmann::json& progress) {
  if (!progress.is_object()) return "before the first case";
  // Read with type checks: a progress file of another shape names no case, never throws.
  const auto index = progress.find("index");
  return fmt::format("case {} ({})",
                     index != progress.end() && index->is_number_integer() ? index->get<long long>()
                                                                           : -1LL,
                     store::string_at(progress, "name", "?"));
}

// The reason of a watchdog kill: a stall (no new case began for `deadline`) or, with a cap, the
// batch's whole allowance spent while cases kept beginning (slow, not hung).
std::string watchdog_reason(const ToolCall& call, const GpuRunOptions& o,
                            const nlohmann::json& progress) {
  const double stall_s = static_cast<double>(o.deadline.count()) / 1e3;
  const double cap_s = static_cast<double>(std::max(o.deadline, o.deadline_cap).count()) / 1e3;
  if (o.deadline_cap <= o.deadline) // one deadline for the whole batch: progress says nothing
    return fmt::format("timeout: the GPU worker passed its watchdog deadline of {:g} s during {}; "
                       "the kernel did not finish (an endless loop or a deadlocked barrier?)",
                       stall_s, case_label(progress));
  if (call.deadline_capped)
    return fmt::format(
        "timeout: the GPU worker was still working at {} when the batch's limit of {:g} s "
        "passed; every case had begun within {:g} s of the one before, so the batch is slow "
        "rather than hung (a kernel this slow on these cases, or a device shared with other work)",
        case_label(progress), cap_s, stall_s);
  return fmt::format("timeout: the GPU worker passed its watchdog deadline during {} (no new case "
                     "began for {:g} s); the kernel did not finish (an endless loop or a "
                     "deadlocked barrier?)",
                     case_label(progress), stall_s);
}

// Environment the worker may see: nothing of kloop's (no API keys, no store paths).
std::map<std::string, std::string> worker_env() {
  std::map<std::string, std::string> env{{"PATH", "/usr/bin:/bin"}, {"CUDA_CACHE_DISABLE", "1"}};
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH",
                           "NVIDIA_VISIBLE_DEVICES", "TMPDIR"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return env;
}

} // namespace

nlohmann::json GpuRunResult::to_json() const {
  return {{"status", gate_status_name(status)},
          {"reason", reason},
          {"fault_class", fault_class},
          {"progress", progress},
          {"exit_code", exit_code},
          {"term_signal", term_signal},
          {"timed_out", timed_out},
          {"network_isolated", network_isolated},
          {"wall_ms", wall_ms},
          {"max_rss_kib", call.max_rss_kib},
          {"device_memory", device_memory}};
}

nlohmann::json device_memory_of(const nlohmann::json& worker_result) {
  if (!worker_result.is_object()) return nullptr;
  const auto it = worker_result.find("device_memory");
  if (it == worker_result.end() || !it->is_object() || !it->contains("peak_allocated_bytes"))
    return nullptr;
  for (const auto& [key, value] : it->items())
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<long long>() >= 0))
      return nullptr;
  return *it;
}

ToolCall worker_tool_call(ToolCall call, const std::string& mode, const GpuRunResult& run) {
  call.detail["tool"] = "kloop-gpu-worker";
  call.detail["mode"] = mode;
  call.detail["status"] = gate_status_name(run.status);
  call.detail["device_memory"] = run.device_memory;
  return call;
}

void note_device(ToolCall& call, const GpuRunOptions& device, DeviceWork work, double wait_ms) {
  if (!call.detail.is_object()) call.detail = nlohmann::json::object();
  call.detail["device"] = device.device;
  call.detail["device_work"] = device_work_name(work);
  call.detail["device_wait_ms"] = wait_ms;
}

ToolCall run_on_device(const std::vector<std::string>& argv, SubprocessOptions options,
                       const GpuRunOptions& device, DeviceWork work,
                       const std::function<void()>& before_retry) {
  if (!device.device.empty()) options.env["CUDA_VISIBLE_DEVICES"] = device.device;
  ToolCall call;
  double wait_ms = 0;
  {
    const DeviceHold hold(device.access, work);
    call = run_subprocess(argv, options);
    wait_ms = hold.wait_ms();
  }
  if (!call.timed_out || work != DeviceWork::kShared || device.access == nullptr) {
    note_device(call, device, work, wait_ms);
    return call;
  }
  const double first_wall_ms = call.wall_ms;
  if (before_retry) before_retry();
  const DeviceHold alone(device.access, DeviceWork::kTimed);
  call = run_subprocess(argv, options);
  note_device(call, device, DeviceWork::kTimed, wait_ms + alone.wait_ms());
  call.detail["retried_alone"] = true;
  call.detail["shared_attempt_wall_ms"] = first_wall_ms;
  return call;
}

bool network_isolation_available() {
  static std::once_flag once;
  static bool available = false;
  std::call_once(once, [] {
    if (::access("/usr/bin/unshare", X_OK) != 0) return;
    SubprocessOptions o;
    o.deadline = std::chrono::milliseconds(5000);
    try {
      available = run_subprocess({"/usr/bin/unshare", "-n", "/bin/true"}, o).exited_ok();
    } catch (const InfraError&) {
      available = false;
    }
  });
  return available;
}

GpuRunResult classify_gpu_run(int exit_code, int term_signal, bool timed_out,
                              const nlohmann::json& result, const nlohmann::json& progress) {
  GpuRunResult r;
  r.exit_code = exit_code;
  r.term_signal = term_signal;
  r.timed_out = timed_out;
  r.result = result;
  r.progress = progress;
  const std::string worker_reason = store::string_at(result, "reason", "");
  if (timed_out) {
    r.status = GateStatus::kTimeout;
    r.fault_class = "timeout";
    r.reason = fmt::format("timeout: the GPU worker passed its watchdog deadline during {}; the "
                           "kernel did not finish (an endless loop or a deadlocked barrier?)",
                           case_label(progress));
    return r;
  }
  if (term_signal != 0) {
    r.status = GateStatus::kCrashed;
    r.fault_class = "signal";
    r.reason = fmt::format("crashed: the GPU worker died by signal {} ({}) during {}", term_signal,
                           strsignal(term_signal), case_label(progress));
    return r;
  }
  if (exit_code == kGpuWorkerStickyFault) {
    r.status = GateStatus::kCrashed;
    const nlohmann::json fault =
        result.is_object() ? result.value("fault", nlohmann::json()) : nlohmann::json();
    r.fault_class = store::string_at(fault, "class", "cuda_fault");
    r.reason = !worker_reason.empty() ? worker_reason
                                      : fmt::format("crashed: sticky CUDA fault ({}) during {}",
                                                    r.fault_class, case_label(progress));
    return r;
  }
  if (exit_code == kGpuWorkerNoDevice) {
    r.status = GateStatus::kNotRun;
    r.reason = worker_reason.empty() ? "not_run: no CUDA device" : worker_reason;
    return r;
  }
  if (exit_code == kGpuWorkerOk && result.is_object()) {
    const std::string status = store::string_at(result, "status", "infra_error");
    try {
      r.status = parse_gate_status(status);
    } catch (const std::invalid_argument&) {
      r.status = GateStatus::kInfraError;
    }
    r.reason = worker_reason;
    return r;
  }
  r.status = GateStatus::kInfraError;
  r.reason = fmt::format("infra_error: the GPU worker exited with code {}{}{}", exit_code,
                         worker_reason.empty() ? "" : ": ", worker_reason);
  if (!result.is_object()) r.reason += " and wrote no result.json";
  return r;
}

nlohmann::json correctness_batch_result(const SuiteResult& suite, nlohmann::json extra) {
  nlohmann::json r = extra.is_object() ? std::move(extra) : nlohmann::json::object();
  r["suite"] = suite.to_json();
  r["status"] = suite.pass ? "pass" : "fail";
  std::string reason;
  if (suite.first_failure && *suite.first_failure < suite.cases.size()) {
    const CaseResult& f = suite.cases[*suite.first_failure];
    reason = fmt::format("case {} failed: {}", f.case_name, f.reason);
  }
  r["reason"] = reason;
  return r;
}

GpuRunResult run_gpu_worker(const GpuRunRequest& request, const GpuRunOptions& options) {
  TempDir temp;
  fs::path dir = options.work_dir;
  if (dir.empty()) {
    dir = fresh_dir();
    temp.path = dir;
    temp.keep = options.keep_work_dir;
  } else {
    fs::create_directories(dir);
  }
  nlohmann::json req{{"mode", request.mode},
                     {"cases", request.cases},
                     {"options", request.options},
                     {"manifest", request.manifest}};
  if (!request.operator_id.empty()) req["operator"] = request.operator_id;
  if (request.cubin) {
    write_file(dir / "kernel.cubin", *request.cubin);
    req["cubin"] = "kernel.cubin";
    write_file(dir / "kernel.cu", request.source);
    req["source"] = "kernel.cu";
  }
  std::error_code ec;
  fs::remove(dir / "result.json", ec);
  fs::remove(dir / "progress.json", ec);
  write_file(dir / "request.json", req.dump(2));

  std::string worker = options.worker;
  if (worker.empty()) {
    try {
      worker = worker_path("kloop-gpu-worker");
    } catch (const InfraError& e) { // a build without CUDA: the tool is missing, not our fault
      GpuRunResult r;
      r.status = GateStatus::kNotRun;
#if KLOOP_BUILT_WITH_CUDA
      r.reason = std::string("GPU worker not built: ") + e.what();
#else
      (void)e;
      r.reason = "GPU worker not built: this kloop was configured with KLOOP_WITH_CUDA=OFF, "
                 "which builds no GPU worker; the device gates need a build with CUDA (the "
                 "default, README \"Set-up commands\") on a machine with an NVIDIA GPU";
#endif
      return r;
    }
  }
  std::vector<std::string> argv;
  const bool isolate = options.isolate_network && network_isolation_available();
  if (isolate) argv = {"/usr/bin/unshare", "-n"};
  argv.push_back(worker);
  argv.push_back(dir.string());

  SubprocessOptions so;
  so.cwd = dir.string();
  so.env = worker_env();
  so.deadline = options.deadline;
  so.progress_file = (dir / "progress.json").string();
  so.deadline_cap = options.deadline_cap;
  so.kill_grace = std::chrono::milliseconds(2000);
  so.output_cap = 1 << 16;
  ToolCall call;
  try {
    call = run_on_device(argv, so, options, options.work, [&dir] {
      std::error_code ec; // the first attempt's files must not stand for the retry's
      fs::remove(dir / "result.json", ec);
      fs::remove(dir / "progress.json", ec);
    });
  } catch (const InfraError& e) {
    GpuRunResult r;
    r.status = GateStatus::kInfraError;
    r.reason = fmt::format("infra_error: could not start the GPU worker: {}", e.what());
    return r;
  }
  const nlohmann::json progress = read_json_file(dir / "progress.json");
  GpuRunResult r = classify_gpu_run(call.exit_code, call.term_signal, call.timed_out,
                                    read_json_file(dir / "result.json"), progress);
  if (call.timed_out) r.reason = watchdog_reason(call, options, progress);
  r.network_isolated = isolate;
  r.wall_ms = call.wall_ms;
  r.device_memory = device_memory_of(r.result);
  const std::string& err = call.stderr_text;
  r.stderr_tail = err.size() > 4000 ? err.substr(err.size() - 4000) : err;
  call.detail["progress_changes"] = call.progress_changes;
  if (call.timed_out) call.detail["deadline_capped"] = call.deadline_capped;
  const nlohmann::json device_keys = call.detail; // run_on_device's keys, kept
  r.call = worker_tool_call(std::move(call), request.mode, r);
  r.call.detail.update(device_keys);
  if (request.cases.is_object() && request.cases.contains("suite"))
    r.call.detail["suite"] = request.cases["suite"];
  if (r.result.is_object() && r.result.contains("timings") && r.result["timings"].is_object())
    r.call.detail["worker_timings"] = r.result["timings"];
  return r;
}

} // namespace kloop::evaluator
