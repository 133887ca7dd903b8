#include "agent/components.h"

#include <fmt/core.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "evaluator/build.h"
#include "evaluator/candidate.h"
#include "evaluator/pipeline.h"
#include "evaluator/subprocess.h"
#include "kernels/rmsnorm/manifest.h"

namespace kloop::agent {
namespace {

class PipelineEvaluator : public CandidateEvaluator {
public:
  PipelineEvaluator(evaluator::EvaluateOptions options,
                    std::unique_ptr<evaluator::DeviceGates> gates)
      : options_(std::move(options)), gates_(std::move(gates)) {}
  evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) override {
    return evaluator::evaluate_candidate(candidate, options_, *gates_);
  }

private:
  evaluator::EvaluateOptions options_;
  std::unique_ptr<evaluator::DeviceGates> gates_;
};

class WorkerHoldoutRunner : public HoldoutRunner {
public:
  explicit WorkerHoldoutRunner(std::chrono::milliseconds deadline) : deadline_(deadline) {}
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
    return holdout_result_from(evaluator::run_gpu_worker(req, o));
  }

private:
  std::chrono::milliseconds deadline_;
};

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

DeviceContext::DeviceContext(const DeviceOptions& options, ProgressSink& progress)
    : options_(options), progress_(progress) {
  evaluator::GpuRunRequest probe;
  probe.mode = "probe";
  probe.cases = nlohmann::json::array();
  evaluator::GpuRunOptions po;
  po.deadline = std::chrono::milliseconds(20000);
  evaluator::GpuRunResult result;
  try {
    result = evaluator::run_gpu_worker(probe, po);
  } catch (const evaluator::InfraError& e) {
    result.status = evaluator::GateStatus::kInfraError;
    result.reason = e.what();
  }
  has_device_ = result.status == evaluator::GateStatus::kPass;
  if (has_device_ && result.result.contains("device")) {
    const auto& dev = result.result["device"];
    device_name_ = dev.value("name", std::string());
    device_uuid_ = dev.value("uuid", std::string());
    driver_version_ =
        dev.contains("driver_version") && dev["driver_version"].is_number_integer()
            ? driver_description(nvidia_driver_version(), dev["driver_version"].get<long long>())
            : nvidia_driver_version();
    progress.line(fmt::format("device: {}", dev.dump()));
  } else {
    progress.line(fmt::format("device: none ({}); device gates will report not_run",
                              result.reason.empty() ? "probe failed" : result.reason));
  }
  holdout_ = std::make_unique<WorkerHoldoutRunner>(
      std::chrono::milliseconds(static_cast<long>(options.worker_timeout_s * 1000)));
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
  if (has_device_) { // the benchmark baseline: the in-tree baseline, built once like a candidate
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
    progress_.line(go.baseline_cubin.empty()
                       ? "baseline: in-tree baseline did not build; timing against the reference"
                       : "baseline: in-tree baseline built for the benchmark gate");
  }
  go.deadline = std::chrono::milliseconds(static_cast<long>(options_.worker_timeout_s * 1000));
  auto& slot = evaluators_[&op];
  slot = std::make_unique<PipelineEvaluator>(eo, std::make_unique<evaluator::GpuWorkerGates>(go));
  return *slot;
}

} // namespace kloop::agent
