#include "agent/components.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "evaluator/build.h"
#include "evaluator/candidate.h"
#include "evaluator/pipeline.h"
#include "evaluator/subprocess.h"
#include "kernels/manifest.h"

namespace kloop::agent {
namespace {

class WorkerHoldoutRunner : public HoldoutRunner {
public:
  WorkerHoldoutRunner(std::chrono::milliseconds deadline, std::string device)
      : deadline_(deadline), device_(std::move(device)) {}
  holdout::HoldoutResult run(const op::Operator& op, const evaluator::Candidate& candidate,
                             const std::string& cubin,
                             const std::vector<nlohmann::json>& suite) override {
    evaluator::GpuRunRequest req;
    req.mode = "correctness";
    req.operator_id = op.contract_id();
    req.cubin = cubin;
    req.source = candidate.source;
    req.manifest = nlohmann::json::parse(candidate.manifest_text);
    req.cases = suite;
    evaluator::GpuRunOptions o;
    o.deadline = deadline_;
    o.device = device_; // the first chosen device ("" without one: kloop's own environment)
    return holdout_result_from(evaluator::run_gpu_worker(req, o));
  }

private:
  std::chrono::milliseconds deadline_;
  std::string device_;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    std::string item = text.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ')
      item.erase(item.begin());
    while (!item.empty() && item.back() == ' ')
      item.pop_back();
    out.push_back(item);
    pos = end + 1;
  }
  return out;
}

bool is_uuid(const std::string& s) {
  return s.rfind("GPU-", 0) == 0 || s.rfind("MIG-", 0) == 0;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 4 && s.find_first_not_of("0123456789") == std::string::npos;
}

// One `probe` worker batch (pinned to `device` when set); infra errors become the result.
evaluator::GpuRunResult probe(const std::string& device) {
  evaluator::GpuRunRequest req;
  req.mode = "probe";
  req.cases = nlohmann::json::array();
  evaluator::GpuRunOptions po;
  po.deadline = std::chrono::milliseconds(20000);
  po.device = device;
  evaluator::GpuRunResult result;
  try {
    result = evaluator::run_gpu_worker(req, po);
  } catch (const evaluator::InfraError& e) {
    result.status = evaluator::GateStatus::kInfraError;
    result.reason = e.what();
  }
  return result;
}

double ms_since(double started_ms) {
  return evaluator::steady_now_ms() - started_ms;
}

} // namespace

std::string nvidia_driver_version(const std::string& proc_file) {
  std::ifstream in(proc_file);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  std::istringstream words(line);
  std::string w;
  while (words >> w) {
    // digits.digits or digits.digits.digits, nothing else
    int dots = 0;
    bool ok = !w.empty() && std::isdigit(static_cast<unsigned char>(w.front())) &&
              std::isdigit(static_cast<unsigned char>(w.back()));
    for (std::size_t i = 0; ok && i < w.size(); ++i) {
      if (w[i] == '.') {
        ok = ++dots <= 2 && std::isdigit(static_cast<unsigned char>(w[i + 1]));
      } else {
        ok = std::isdigit(static_cast<unsigned char>(w[i])) != 0;
      }
    }
    if (ok && dots >= 1) return w;
  }
  return "";
}

std::string driver_description(const std::string& kernel_driver, long long cuda_api_version) {
  const std::string api =
      fmt::format("CUDA driver API {}.{}", cuda_api_version / 1000, (cuda_api_version % 1000) / 10);
  return kernel_driver.empty() ? api : fmt::format("{} ({})", kernel_driver, api);
}

holdout::HoldoutResult holdout_result_from(const evaluator::GpuRunResult& run) {
  holdout::HoldoutResult r;
  r.status = run.status;
  r.reason = run.reason;
  if (run.result.is_object() && run.result.contains("suite")) {
    const auto& suite = run.result["suite"];
    r.passed = suite.value("passed", std::int64_t{0});
    r.failed = suite.value("failed", std::int64_t{0});
    r.detail = suite;
  }
  r.detail["fault_class"] = run.fault_class;
  return r;
}

void check_devices_syntax(const std::string& spec) {
  if (spec == "all" || spec == "none") return;
  std::vector<std::string> seen;
  for (const auto& item : split_list(spec)) {
    if (!is_index(item) && !is_uuid(item))
      throw DeviceSelectionError(fmt::format(
          "--devices {}: '{}' is not a device; give all, none, or a comma list of device indices "
          "(0,1) or GPU UUIDs (GPU-...)",
          spec, item));
    // The same text twice, whether or not this machine has the device (select_devices also
    // catches an index and a UUID that name one device).
    const std::string canonical = is_index(item) ? std::to_string(std::stoi(item)) : item;
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end())
      throw DeviceSelectionError(fmt::format(
          "--devices {}: device '{}' is named twice; name each device once", spec, item));
    seen.push_back(canonical);
  }
}

std::vector<std::string> select_devices(const std::string& spec, int count,
                                        const std::string& parent) {
  check_devices_syntax(spec);
  std::vector<std::string> out;
  if (spec == "none" || count <= 0) return out;
  const std::vector<std::string> visible =
      parent.empty() ? std::vector<std::string>() : split_list(parent);
  const auto pin = [&](int index) {
    return index < static_cast<int>(visible.size()) ? visible[static_cast<std::size_t>(index)]
                                                    : std::to_string(index);
  };
  if (spec == "all") {
    for (int i = 0; i < count; ++i)
      out.push_back(pin(i));
    return out;
  }
  for (const auto& item : split_list(spec)) {
    std::string value = item;
    if (is_index(item)) {
      const int index = std::stoi(item);
      if (index >= count)
        throw DeviceSelectionError(
            fmt::format("--devices {}: device {} does not exist here ({} visible device{}: 0{}){}",
                        spec, item, count, count == 1 ? "" : "s",
                        count > 1 ? fmt::format("..{}", count - 1) : std::string(),
                        parent.empty() ? "" : fmt::format(" (CUDA_VISIBLE_DEVICES={})", parent)));
      value = pin(index);
    }
    if (std::find(out.begin(), out.end(), value) != out.end())
      throw DeviceSelectionError(fmt::format(
          "--devices {}: device '{}' is named twice; name each device once", spec, item));
    out.push_back(value);
  }
  return out;
}

nlohmann::json DeviceContext::throughput_record() const {
  return {{"switches", throughput_.to_json()}, {"devices", devices_}, {"startup", startup_}};
}

DeviceContext::DeviceContext(const DeviceOptions& options, ProgressSink& progress)
    : options_(options), progress_(progress), throughput_(options.throughput) {
  check_devices_syntax(options.devices);
  double t = evaluator::steady_now_ms();
  evaluator::GpuRunResult result = probe("");
  startup_.push_back({{"name", "probe"}, {"wall_ms", ms_since(t)}});
  has_device_ = result.status == evaluator::GateStatus::kPass;
  int count = 0;
  if (has_device_ && result.result.contains("device")) {
    const auto& dev = result.result["device"];
    device_name_ = dev.value("name", std::string());
    device_uuid_ = dev.value("uuid", std::string());
    driver_version_ =
        dev.contains("driver_version") && dev["driver_version"].is_number_integer()
            ? driver_description(nvidia_driver_version(), dev["driver_version"].get<long long>())
            : nvidia_driver_version();
    progress.line(fmt::format("device: {}", dev.dump()));
    const auto listed = result.result.value("devices", nlohmann::json::array());
    count = listed.is_array() && !listed.empty() ? static_cast<int>(listed.size()) : 1;
  } else {
    progress.line(fmt::format("device: none ({}); device gates will report not_run",
                              result.reason.empty() ? "probe failed" : result.reason));
  }
  const char* parent = std::getenv("CUDA_VISIBLE_DEVICES");
  devices_ = select_devices(options.devices, count, parent ? parent : "");
  if (!has_device_ && options.devices != "all" && options.devices != "none")
    progress.line(fmt::format("--devices {}: no device here, so none is used", options.devices));
  no_device_reason_ = result.reason.empty() ? "no usable CUDA device" : result.reason;
  if (has_device_ && devices_.empty())
    no_device_reason_ = "--devices none: the device gates do not run";
  if (devices_.size() > 1) { // each chosen device answers pinned, or the session does not start
    t = evaluator::steady_now_ms();
    for (const auto& d : devices_) {
      const auto r = probe(d);
      if (r.status != evaluator::GateStatus::kPass)
        throw DeviceSelectionError(fmt::format(
            "--devices: device {} (CUDA_VISIBLE_DEVICES={}) did not answer the probe: {}; leave it "
            "out of --devices",
            d, d, r.reason));
    }
    startup_.push_back({{"name", "probe_each_device"}, {"wall_ms", ms_since(t)}});
  }
  if (!devices_.empty())
    progress.line(fmt::format("devices: {} ({})", devices_.size(), fmt::join(devices_, ", ")));
  for (const auto& d : devices_) // each device measures its own copy ceiling, once per session
    if (throughput_.copy_ceiling_once)
      copy_ceilings_[d] = std::make_shared<evaluator::GpuGatesOptions::CopyCeiling>();
  holdout_ = std::make_unique<WorkerHoldoutRunner>(
      std::chrono::milliseconds(static_cast<long>(options.worker_timeout_s * 1000)),
      devices_.empty() ? "" : devices_.front());
}

CandidateEvaluator& DeviceContext::evaluator(const op::Operator& op) {
  if (auto it = evaluators_.find(&op); it != evaluators_.end()) return *it->second;
  evaluator::EvaluateOptions eo;
  eo.op = &op;
  if (options_.no_sandbox) eo.build.sandbox = evaluator::SandboxRequest::kNoSandbox;
  eo.build.deadline =
      std::chrono::milliseconds(static_cast<long long>(options_.build_timeout_s * 1000));
  evaluator::GpuGatesOptions go;
  go.op = &op;
  go.public_seed = options_.public_seed;
  if (!devices_.empty()) { // the benchmark baseline: the in-tree baseline, built once per session
    const double t = evaluator::steady_now_ms();
    std::string baseline_dir;
    try {
      baseline_dir = evaluator::data_path(op.baseline_folder());
    } catch (const evaluator::InfraError& e) {
      progress_.line(std::string("baseline: ") + e.what());
    }
    const auto load = baseline_dir.empty() ? evaluator::CandidateLoad{}
                                           : evaluator::load_candidate_dir(baseline_dir);
    if (load.candidate) {
      const auto parsed = op::parse_manifest(op.declaration(), load.candidate->manifest_text);
      if (parsed.manifest) {
        const auto built =
            evaluator::build_candidate(load.candidate->source, *parsed.manifest, eo.build);
        if (!built.cubin.empty()) {
          go.baseline_cubin = built.cubin;
          go.baseline_source = load.candidate->source;
          go.baseline_manifest = load.candidate->manifest_text;
        }
      }
    }
    startup_.push_back({{"name", "baseline_build"}, {"wall_ms", ms_since(t)}});
    progress_.line(go.baseline_cubin.empty()
                       ? "baseline: in-tree baseline did not build; timing against the reference"
                       : "baseline: in-tree baseline built for the benchmark gate");
  }
  go.deadline = std::chrono::milliseconds(static_cast<long>(options_.worker_timeout_s * 1000));
  go.sanitizer_fail_fast = throughput_.sanitizer_fail_fast;
  go.sanitizer_concurrent = throughput_.sanitizer_concurrent;
  go.racecheck_scrub = throughput_.racecheck_scrub;
  go.prepare_ahead = throughput_.prepare_ahead;
  go.bench_stop_rule = throughput_.bench_stop;
  if (throughput_.profile_on_demand) {
    go.measured_dram = false;
    go.ncu_skip_reason = "not measured: ncu runs for no candidate by default, since no gate and "
                         "no feedback reads it (KLOOP_THROUGHPUT=profile_on_demand=0 runs it "
                         "after every passing benchmark)";
  }
  std::vector<std::unique_ptr<DeviceWorker>> workers;
  for (const auto& d : devices_) {
    evaluator::GpuGatesOptions per_device = go;
    if (const auto it = copy_ceilings_.find(d); it != copy_ceilings_.end())
      per_device.copy_ceiling = it->second;
    workers.push_back(std::make_unique<GpuDeviceWorker>(d, per_device));
  }
  SchedulerOptions so = scheduler_options(throughput_);
  so.evaluate = eo;
  so.no_device_reason = no_device_reason_;
  auto& slot = evaluators_[&op];
  slot = std::make_unique<Scheduler>(std::move(workers), so);
  return *slot;
}

} // namespace kloop::agent
