// Correctness on the device through the GPU worker (see device_gates.h).
#include "evaluator/device_gates.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "evaluator/evidence.h"
#include "kernels/manifest.h"
#include "store/hash.h"
#include "store/text_view.h"

#include <unistd.h>

namespace kloop::evaluator {

GateResult correctness_gate_from(const GpuRunResult& run) {
  GateResult g;
  g.name = std::string(kGateCorrectness);
  g.status = run.status;
  g.reason = run.status == GateStatus::kPass ? std::string() : run.reason;
  nlohmann::json ev{{"worker", run.to_json()}};
  if (run.result.is_object()) {
    for (const char* key : {"device", "path_counts", "evidence", "fault", "kernels"})
      if (run.result.contains(key)) ev[key] = run.result.at(key);
    if (run.result.contains("suite"))
      ev["suite"] = evidence::suite_summary_json(run.result["suite"]);
  }
  g.evidence = std::move(ev);
  return g;
}

std::vector<std::string> unlaunched_variants(const op::Operator& op, std::string_view manifest_text,
                                             const std::vector<GpuRunResult>& runs) {
  const op::ManifestParse mp = op::parse_manifest(op.declaration(), manifest_text);
  if (!mp.manifest) return {};
  std::vector<std::int64_t> launched(mp.manifest->variants.size(), 0);
  for (const GpuRunResult& r : runs) {
    if (!r.result.is_object() || !r.result.contains("path_counts")) continue;
    const nlohmann::json per = r.result["path_counts"].value("per_variant", nlohmann::json());
    if (!per.is_array()) continue;
    for (std::size_t i = 0; i < per.size() && i < launched.size(); ++i)
      if (per[i].is_number_integer()) launched[i] += per[i].get<std::int64_t>();
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < launched.size(); ++i)
    if (launched[i] == 0)
      out.push_back(fmt::format("variant {} ({})", i, mp.manifest->variants[i].name));
  return out;
}

namespace {

// The worker request of `mode` for a built candidate of operator `op`: operator, cubin, source
// and the manifest as JSON (the one place this file parses it; the worker validates it again).
GpuRunRequest candidate_request(const op::Operator& op, const BuiltCandidate& built,
                                const std::string& mode) {
  GpuRunRequest req;
  req.mode = mode;
  req.operator_id = op.contract_id();
  req.cubin = built.cubin;
  req.source = built.candidate.source;
  req.manifest = nlohmann::json::parse(built.candidate.manifest_text, nullptr, false);
  req.cases = nlohmann::json::array();
  return req;
}

// The built candidate's operator, checked against the one the baseline was built for.
const op::Operator& operator_of(const BuiltCandidate& built, const GpuGatesOptions& o) {
  if (o.op && o.op != &built.op)
    throw InfraError("GpuWorkerGates: configured with the baseline of " + o.op->contract_id() +
                     ", asked to evaluate a candidate of " + built.op.contract_id());
  if (!o.op && !o.baseline_cubin.empty())
    throw InfraError("GpuWorkerGates: a baseline cubin without GpuGatesOptions::op");
  return built.op;
}

} // namespace

std::vector<GateResult> GpuWorkerGates::run(const BuiltCandidate& built) {
  runs_.clear();
  calls_.clear();
  const op::Operator& op = operator_of(built, options_);
  GpuRunRequest req = candidate_request(op, built, "correctness");
  req.cases = {{"suite", "public"}, {"seed", options_.public_seed}};
  req.options = {{"stop_at_first_failure", true}};
  if (options_.prepare_ahead > 0) req.options["prepare_ahead"] = options_.prepare_ahead;
  GpuRunOptions ro = options_.runner;
  ro.deadline = options_.deadline;
  ro.deadline_cap = options_.deadline * options_.deadline_cap_factor;
  runs_.push_back(run_gpu_worker(req, ro));
  if (!runs_.back().call.argv.empty()) calls_.push_back(runs_.back().call);
  const std::vector<std::string> suites = op.suite_names();
  const bool has_large = std::find(suites.begin(), suites.end(), "large") != suites.end();
  if (options_.large_cases && has_large && runs_.back().status == GateStatus::kPass) {
    req.cases = {{"suite", "large"}, {"seed", options_.public_seed}};
    req.options["concurrency"] = false;
    ro.deadline = options_.large_deadline;
    ro.deadline_cap = options_.large_deadline * options_.deadline_cap_factor;
    runs_.push_back(run_gpu_worker(req, ro));
    if (!runs_.back().call.argv.empty()) calls_.push_back(runs_.back().call);
  }
  // The gate takes the first batch that did not pass (or the last one).
  const GpuRunResult* decisive = &runs_.back();
  for (const GpuRunResult& r : runs_)
    if (r.status != GateStatus::kPass) {
      decisive = &r;
      break;
    }
  GateResult correctness = correctness_gate_from(*decisive);
  { // what the receipt binds: the suite (specs + tolerance policy via the contract hash) and
    // the reference (defined by the contract document: formula, order, casts, errors)
    const std::string contract = op.contract_sha256();
    correctness.evidence["suite_sha256"] = store::sha256_hex(
        nlohmann::json(op.suite("public", options_.public_seed)).dump() + "\n" + contract);
    correctness.evidence["reference_sha256"] = contract;
  }
  if (runs_.size() > 1) correctness.evidence["batches"] = runs_.size();
  if (correctness.status == GateStatus::kPass) {
    const std::vector<std::string> unlaunched =
        unlaunched_variants(op, built.candidate.manifest_text, runs_);
    if (!unlaunched.empty()) {
      correctness.status = GateStatus::kFail;
      correctness.reason = fmt::format(
          "{} served no public case: a variant only the holdout would reach is untested code; "
          "widen the public reach of its when, fold it into another variant or drop it",
          fmt::join(unlaunched, ", "));
      correctness.evidence["unlaunched_variants"] = unlaunched;
    }
  }
  { // every case of every batch, as the worker judged it: the receipt's case-results record (a
    // "raw_" key: the store keeps it as a blob, not inline)
    nlohmann::json cases = nlohmann::json::array();
    for (const GpuRunResult& r : runs_)
      if (r.result.is_object() && r.result.contains("suite") && r.result["suite"].is_object())
        for (const auto& one : r.result["suite"].value("cases", nlohmann::json::array()))
          cases.push_back(one);
    if (!cases.empty()) correctness.evidence["raw_case_results"] = std::move(cases);
  }
  std::vector<GateResult> out{correctness};
  if (correctness.status != GateStatus::kPass) {
    for (std::string_view name : {kGateSanitizer, kGateBenchmark, kGateRoofline})
      out.push_back(GateResult{std::string(name), GateStatus::kNotRun, "correctness did not pass",
                               nlohmann::json::object()});
    return out;
  }
  for (auto& g : run_perf_gates(built))
    out.push_back(std::move(g));
  return out;
}

} // namespace kloop::evaluator

// ---- sanitizer, benchmark, roofline, stall sampling ----
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "evaluator/ncu.h"
#include "evaluator/perf_gates.h"
#include "evaluator/roofline.h"
#include "evaluator/sanitizer.h"
#include "store/hash.h"

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

// A private request folder removed on scope exit.
struct RequestDir {
  fs::path path;
  RequestDir() {
    std::string tmpl = (fs::temp_directory_path() / "kloop-gates-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw InfraError("cannot create a request folder");
    path = tmpl;
  }
  ~RequestDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path / name, std::ios::binary | std::ios::trunc);
    if (!(out << bytes)) throw InfraError("cannot write " + (path / name).string());
  }
};

std::string find_sanitizer() {
  for (const char* p : {"/usr/local/cuda/bin/compute-sanitizer", "/usr/bin/compute-sanitizer"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

// request.json of a worker started by another tool (compute-sanitizer, ncu) in `dir`, whose
// kernel.cubin and kernel.cu the caller writes there.
nlohmann::json tool_request(const op::Operator& op, const BuiltCandidate& built,
                            const std::string& mode) {
  const GpuRunRequest r = candidate_request(op, built, mode);
  return {{"mode", r.mode},        {"operator", r.operator_id}, {"cubin", "kernel.cubin"},
          {"source", "kernel.cu"}, {"manifest", r.manifest},    {"cases", r.cases},
          {"options", r.options}};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return in ? std::string((std::istreambuf_iterator<char>(in)), {}) : std::string();
}

// One `benchmark` batch; returns the worker result (status pass/fail) or the failed run.
GpuRunResult benchmark_run(const op::Operator& op, const BuiltCandidate& built,
                           const GpuGatesOptions& o) {
  RequestDir dir;
  GpuRunRequest req = candidate_request(op, built, "benchmark");
  perf::BenchProtocol protocol;
  protocol.time_cap_s = o.bench_time_cap_s;
  protocol.stop_rule = o.bench_stop_rule;
  protocol.max_rounds = 200;
  req.options["benchmark"] =
      perf::bench_request(op.declaration(), op.benchmark_shapes(), protocol, "bench_raw.json");
  if (!o.baseline_cubin.empty()) {
    dir.write("baseline.cubin", o.baseline_cubin);
    dir.write("baseline.cu", o.baseline_source);
    req.options["baseline"] = {{"cubin", "baseline.cubin"},
                               {"source", "baseline.cu"},
                               {"manifest", nlohmann::json::parse(o.baseline_manifest)}};
  }
  GpuRunOptions ro = o.runner;
  ro.deadline = o.bench_deadline;
  ro.work_dir = dir.path;
  ro.work = DeviceWork::kTimed; // alone on its device
  const std::string protocol_sha256 = store::sha256_hex(req.options.dump());
  if (o.copy_ceiling) {
    std::lock_guard<std::mutex> lock(o.copy_ceiling->mu);
    if (o.copy_ceiling->measured.is_object())
      req.options["copy_ceiling_given"] = o.copy_ceiling->measured;
  }
  GpuRunResult run = run_gpu_worker(req, ro);
  run.result["protocol_sha256"] = protocol_sha256;
  if (o.copy_ceiling && run.status == GateStatus::kPass && run.result.is_object() &&
      run.result.contains("benchmark") && !req.options.contains("copy_ceiling_given")) {
    std::lock_guard<std::mutex> lock(o.copy_ceiling->mu);
    const auto& c = run.result["benchmark"].value("copy_ceiling", nlohmann::json());
    if (!o.copy_ceiling->measured.is_object() && c.is_object()) o.copy_ceiling->measured = c;
  }
  run.result["baseline_label"] =
      o.baseline_cubin.empty()
          ? "trusted reference kernel (fp32 accumulation, one final cast)"
          : "in-tree baseline " + op.baseline_folder() + ", source sha256 " +
                store::sha256_hex(o.baseline_source) + " (fp32 accumulation, one final cast)";
  // Raw samples travel into the evidence as "raw_samples" (the store moves raw_* to a blob).
  std::ifstream raw(dir.path / "bench_raw.json");
  if (raw && run.result.is_object() && run.result.contains("benchmark")) {
    std::string bytes((std::istreambuf_iterator<char>(raw)), {});
    run.result["benchmark"]["raw_samples"] = std::move(bytes);
  }
  return run;
}

} // namespace

GateResult sanitizer_gate(const BuiltCandidate& built, const GpuGatesOptions& o,
                          std::map<std::string, std::string>* reports,
                          std::vector<ToolCall>* calls) {
  RequestDir dir;
  dir.write("kernel.cubin", built.cubin);
  dir.write("kernel.cu", built.candidate.source);
  dir.write("request.json", tool_request(operator_of(built, o), built, "sanitize").dump());
  sanitizer::GateConfig config;
  config.sanitizer_path = find_sanitizer();
  const std::string worker =
      o.runner.worker.empty() ? worker_path("kloop-gpu-worker") : o.runner.worker;
  config.worker_argv = {worker, dir.path.string()};
  config.work_dir = dir.path.string();
  config.worker_result_path = (dir.path / "result.json").string();
  config.deadline_per_tool = o.sanitizer_deadline;
  config.fail_fast = o.sanitizer_fail_fast;
  config.concurrent = o.sanitizer_concurrent;
  config.request_files = {"kernel.cubin", "kernel.cu", "request.json"};
  if (!o.racecheck_scrub)
    config.prepare_folder = [&built, &o](std::string_view tool, const std::string& folder) {
      nlohmann::json req = tool_request(operator_of(built, o), built, "sanitize");
      req["options"]["sanitize"] = {{"shared_scrub", tool != "racecheck"}};
      std::ofstream(fs::path(folder) / "request.json", std::ios::binary | std::ios::trunc)
          << req.dump();
    };
  config.env = {{"PATH", "/usr/local/cuda/bin:/usr/bin:/bin"},
                {"HOME", dir.path.string()},
                {"TMPDIR", dir.path.string()}};
  // No network for the sanitized worker either: unshare -n wraps compute-sanitizer.
  const bool isolate = o.runner.isolate_network && network_isolation_available();
  std::mutex calls_mu; // the concurrent tools (config.concurrent) run the runner from threads
  auto runner = [isolate, calls, &calls_mu, &o](const std::vector<std::string>& argv,
                                                const SubprocessOptions& so) {
    std::vector<std::string> full;
    if (isolate) full = {"/usr/bin/unshare", "-n"};
    full.insert(full.end(), argv.begin(), argv.end());
    ToolCall call = run_on_device(full, so, o.runner, DeviceWork::kShared, [&argv] {
      std::error_code ec; // the worker's request folder is the last argument
      for (const char* name : {"result.json", "progress.json"})
        fs::remove(fs::path(argv.back()) / name, ec);
    });
    // argv: sanitizer --tool T ... worker dir, or sanitizer --version
    const bool tool_run = argv.size() > 2 && argv[1] == "--tool";
    call.detail.update(
        {{"tool", "compute-sanitizer"}, {"mode", tool_run ? "sanitize" : "version"}});
    if (tool_run) { // the worker's request folder is the last argument
      call.detail["sanitizer_tool"] = argv[2];
      call.detail["device_memory"] = device_memory_of(
          nlohmann::json::parse(read_text(fs::path(argv.back()) / "result.json"), nullptr, false));
    }
    std::lock_guard<std::mutex> lock(calls_mu);
    if (calls) calls->push_back(call);
    return call;
  };
  GateResult g = sanitizer::run_gate(config, runner, reports);
  g.evidence["network_isolated"] = isolate;
  g.evidence["racecheck_scrub"] = o.racecheck_scrub; // false: racecheck ran without the scrub
  return g;
}

nlohmann::json stalls_from_pcsample(const nlohmann::json& pc) {
  if (!pc.is_object())
    return evidence::StallEvidence{"infra_error",
                                   "the worker's pcsample result is not a JSON object"}
        .to_json();
  // Read field by field with type checks (store/json_at.h): a worker result of another shape
  // gives zeros and empty lists, never a type_error out of the benchmark gate.
  const auto count = [](const nlohmann::json& j, const char* key) { return store::int_at(j, key); };
  evidence::StallEvidence out;
  out.status = store::string_at(pc, "status", "not_run");
  out.reason = store::string_at(pc, "reason");
  out.sampling_period = count(pc, "sampling_period");
  out.total_samples = count(pc, "total_samples");
  out.dropped_samples = count(pc, "dropped_samples");
  if (const auto h = pc.find("stall_reasons"); h != pc.end() && h->is_object())
    for (const auto& [name, n] : h->items())
      if (n.is_number_integer()) out.histogram[name] = n.get<std::int64_t>();
  const auto top = pc.find("top_pcs");
  for (const auto& t : top != pc.end() && top->is_array() ? *top : nlohmann::json::array()) {
    if (!t.is_object()) continue;
    evidence::StallLine line{count(t, "line"), "", count(t, "samples")};
    std::int64_t best = -1;
    if (const auto st = t.find("stalls"); st != t.end() && st->is_object())
      for (const auto& [name, n] : st->items())
        if (n.is_number_integer() && n.get<std::int64_t>() > best)
          best = n.get<std::int64_t>(), line.reason = name;
    out.top_lines.push_back(std::move(line));
  }
  return out.to_json();
}

std::vector<GateResult> GpuWorkerGates::run_perf_gates(const BuiltCandidate& built) {
  std::vector<GateResult> out;
  sanitizer_reports_.clear();
  GateResult san = sanitizer_gate(built, options_, &sanitizer_reports_, &calls_);
  nlohmann::json raw_reports = nlohmann::json::object();
  for (const auto& [tool, text] : sanitizer_reports_)
    raw_reports[tool] = text;
  san.evidence["raw_reports"] = raw_reports;
  out.push_back(san);
  if (san.status != GateStatus::kPass) {
    for (auto& g : perf::not_run("sanitizer did not pass"))
      out.push_back(g);
    return out;
  }
  const op::Operator& op = operator_of(built, options_);
  GpuRunResult bench = benchmark_run(op, built, options_);
  runs_.push_back(bench);
  if (!bench.call.argv.empty()) calls_.push_back(bench.call);
  if (!bench.result.is_object() || !bench.result.contains("benchmark")) {
    const GateStatus st =
        bench.status == GateStatus::kPass ? GateStatus::kInfraError : bench.status;
    for (std::string_view name : {kGateBenchmark, kGateRoofline})
      out.push_back(GateResult{std::string(name), st, bench.reason, {{"worker", bench.to_json()}}});
    return out;
  }
  const nlohmann::json& b = bench.result["benchmark"];
  GateResult bg = perf::benchmark_gate(op.declaration(), b);
  GateResult rg = perf::roofline_gate(op.declaration(), b);
  if (b.contains("raw_samples")) bg.evidence["raw_samples"] = b["raw_samples"];
  bg.evidence["protocol_sha256"] = bench.result.value("protocol_sha256", std::string());
  bg.evidence["baseline"] = bench.result.value("baseline_label", std::string());
  if (bench.status == GateStatus::kCrashed || bench.status == GateStatus::kTimeout) {
    bg.status = bench.status;
    bg.reason = bench.reason;
  }
  if (options_.pc_sampling && bg.status == GateStatus::kPass) {
    const GpuRunRequest req = candidate_request(op, built, "pcsample");
    GpuRunOptions ro = options_.runner;
    ro.deadline = std::chrono::milliseconds(60000);
    ro.work = DeviceWork::kTimed;
    const GpuRunResult pc = run_gpu_worker(req, ro);
    if (!pc.call.argv.empty()) calls_.push_back(pc.call);
    bg.evidence["stalls"] = pc.result.is_object() && pc.result.contains("pcsample")
                                ? stalls_from_pcsample(pc.result["pcsample"])
                                : nlohmann::json{{"status", "not_run"}, {"reason", pc.reason}};
  }
  if (!options_.pc_sampling && !options_.profile_skip_reason.empty() &&
      bg.status == GateStatus::kPass)
    bg.evidence["stalls"] = {{"status", "not_run"}, {"reason", options_.profile_skip_reason}};
  if (options_.measured_dram && bg.status == GateStatus::kPass)
    attach_measured_dram(built, rg);
  else if (!options_.ncu_skip_reason.empty() && bg.status == GateStatus::kPass) {
    rg.evidence["measured_dram"] = {{"status", "not_run"},
                                    {"reason", options_.ncu_skip_reason},
                                    {"shape", measured_dram_shape(op).to_json(op.declaration())}};
  }
  out.push_back(bg);
  out.push_back(rg);
  return out;
}

op::BenchShape measured_dram_shape(const op::Operator& op) {
  const op::Declaration& d = op.declaration();
  const auto shapes = op.benchmark_shapes();
  const op::BenchShape* best = nullptr;
  for (const auto& s : shapes)
    if (s.dtype == DType::kBFloat16 && (!best || roofline::logical_bytes(d, s).unique() >
                                                     roofline::logical_bytes(d, *best).unique()))
      best = &s;
  if (best) return *best;
  for (const auto& s : shapes)
    if (roofline::shape_class(d, s) == "streaming") return s;
  if (shapes.empty()) throw InfraError("operator " + op.contract_id() + " has no benchmark shape");
  return shapes.front();
}

void GpuWorkerGates::attach_measured_dram(const BuiltCandidate& built, GateResult& roofline_gate) {
  const op::Operator& op = operator_of(built, options_);
  const op::BenchShape shape = measured_dram_shape(op);
  const std::int64_t logical = roofline::logical_bytes(op.declaration(), shape).unique();
  const nlohmann::json shape_json = shape.to_json(op.declaration());
  nlohmann::json ev;
  try {
    RequestDir dir;
    dir.write("kernel.cubin", built.cubin);
    dir.write("kernel.cu", built.candidate.source);
    nlohmann::json req = tool_request(op, built, "bench");
    req["options"] = {{"shapes", nlohmann::json::array({shape_json})},
                      {"iters", ncu::kLaunchCount - 1}}; // + 1 warm-up = the launch cap
    dir.write("request.json", req.dump());
    ncu::RunConfig config;
    config.ncu_path =
        options_.ncu_path == "-" ? ncu::find_ncu(std::getenv("PATH")) : options_.ncu_path;
    for (const op::Variant& v : built.manifest.variants) // the first variant with that dtype
      if (const auto entry = v.entry_points.find(shape.dtype); entry != v.entry_points.end()) {
        config.kernel_name = entry->second;
        break;
      }
    config.worker_argv = {options_.runner.worker.empty() ? worker_path("kloop-gpu-worker")
                                                         : options_.runner.worker,
                          dir.path.string()};
    config.work_dir = dir.path.string();
    config.worker_result_path = (dir.path / "result.json").string();
    config.logical_unique_bytes = logical;
    config.deadline = options_.ncu_deadline;
    // No `unshare -n` here: ncu talks to its injected target over a loopback TCP port, which a
    // fresh network namespace does not have up. The worker is ours; the candidate is a cubin.
    const auto on_device = [this](const std::vector<std::string>& argv,
                                  const SubprocessOptions& so) {
      return run_on_device(argv, so, options_.runner, DeviceWork::kTimed);
    };
    ev = ncu::run_measured_dram(config, on_device, &calls_);
    ev["network_isolated"] = false;
  } catch (const InfraError& e) {
    ev = {{"status", "failed"}, {"reason", e.what()}};
  }
  ev["shape"] = shape_json;
  ev["logical_unique_bytes"] = logical;
  roofline_gate.evidence["measured_dram"] = ev;
  if (roofline_gate.evidence.contains("shapes"))
    for (auto& s : roofline_gate.evidence["shapes"]) {
      bool same = true;
      for (const auto& [key, value] : shape_json.items())
        same = same && s.contains(key) && s[key] == value;
      if (same) s["measured_dram"] = ev;
    }
}

} // namespace kloop::evaluator
