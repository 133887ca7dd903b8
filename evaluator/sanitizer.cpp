// The sanitizer gate (sanitizer.h): commands, judging of tool runs and the gate decision.
#include "evaluator/sanitizer.h"

#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "evaluator/gpu_runner.h"
#include "store/hash.h"
#include "store/json_at.h"

namespace kloop::evaluator::sanitizer {

namespace {

bool worker_ok(const nlohmann::json& result) {
  return store::string_at(result, "status", "") == "pass";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_location(const Report& r) {
  for (const auto& h : r.hazards) {
    if (h.line > 0) return fmt::format(" at {}:{}", h.file, h.line);
  }
  return {};
}

} // namespace

std::vector<std::string> tool_command(const std::string& sanitizer_path, std::string_view tool,
                                      const std::string& log_path,
                                      const std::vector<std::string>& worker_argv) {
  std::vector<std::string> argv{sanitizer_path,
                                "--tool",
                                std::string(tool),
                                "--error-exitcode",
                                std::to_string(kErrorExitCode),
                                "--log-file",
                                log_path};
  argv.insert(argv.end(), worker_argv.begin(), worker_argv.end());
  return argv;
}

std::string_view tool_outcome_name(ToolOutcome o) {
  switch (o) {
  case ToolOutcome::kClean:
    return "clean";
  case ToolOutcome::kHazards:
    return "hazards";
  case ToolOutcome::kUnexplained:
    return "unexplained";
  case ToolOutcome::kTimeout:
    return "timeout";
  case ToolOutcome::kInfraError:
    return "infra_error";
  case ToolOutcome::kNotRun:
    return "not_run";
  }
  return "not_run";
}

nlohmann::json ToolRun::to_json() const {
  nlohmann::json hazards = nlohmann::json::array();
  for (std::size_t i = 0; i < report.hazards.size() && i < 20; ++i) {
    hazards.push_back(report.hazards[i].to_json());
  }
  return {{"tool", tool},
          {"outcome", tool_outcome_name(outcome)},
          {"reason", reason},
          {"command", command},
          {"exit_code", exit_code},
          {"wall_ms", wall_ms},
          {"report_sha256", report_sha256},
          {"hazard_count", report.hazards.size()},
          {"error_summary",
           report.error_summary ? nlohmann::json(*report.error_summary) : nlohmann::json(nullptr)},
          {"tool_errors", report.tool_errors},
          {"kinds", report.kind_counts()},
          {"hazards", hazards}};
}

ToolRun judge_tool_run(std::string_view tool, const ToolCall& call, std::string report_text,
                       const nlohmann::json& worker_result) {
  ToolRun run;
  run.tool = std::string(tool);
  run.command = call.argv;
  run.exit_code = call.exit_code;
  run.wall_ms = call.wall_ms;
  run.report_sha256 = store::sha256_hex(report_text);
  run.report = parse_report(tool, report_text);
  run.report_text = std::move(report_text);
  const Report& r = run.report;
  const std::size_t n = r.hazards.size();
  if (call.timed_out) {
    run.outcome = ToolOutcome::kTimeout;
    run.reason = fmt::format("{} ran past its deadline ({:.0f} ms); the kernel may hang under "
                             "instrumentation",
                             tool, call.wall_ms);
  } else if (n > 0) {
    run.outcome = ToolOutcome::kHazards;
    run.reason = fmt::format("{}: {} hazard(s), first: {}{}", tool, n, r.hazards.front().message,
                             first_location(r));
  } else if (call.term_signal == 0 &&
             (call.exit_code == kGpuWorkerBadRequest || call.exit_code == kGpuWorkerInternal)) {
    run.outcome = ToolOutcome::kInfraError;
    run.reason = fmt::format("{}: the worker reported an infrastructure failure (exit {}): {}",
                             tool, call.exit_code, store::string_at(worker_result, "reason", ""));
  } else if (call.term_signal == 0 && call.exit_code == kGpuWorkerNoDevice) {
    run.outcome = ToolOutcome::kNotRun;
    run.reason = std::string(tool) + ": no CUDA device under the sanitizer";
  } else if (call.exit_code == 0 && call.term_signal == 0 && r.tool_errors.empty() &&
             r.error_summary.value_or(0) == 0 && worker_ok(worker_result)) {
    run.outcome = ToolOutcome::kClean;
  } else {
    run.outcome = ToolOutcome::kUnexplained;
    std::string why;
    if (!r.tool_errors.empty()) {
      why = "tool error: " + r.tool_errors.front();
    } else if (r.error_summary.value_or(0) > 0) {
      why = fmt::format("ERROR SUMMARY reports {} error(s) of kinds the parser does not know",
                        *r.error_summary);
    } else if (call.term_signal != 0) {
      why = fmt::format("ended by signal {}", call.term_signal);
    } else if (call.exit_code != 0) {
      why = fmt::format("exit code {} without a parsed hazard", call.exit_code);
    } else {
      why = "the worker did not report success under instrumentation";
    }
    run.reason = fmt::format("{}: unexplained report ({}); read the raw report {}", tool, why,
                             run.report_sha256.substr(0, 12));
  }
  return run;
}

std::string judge_poison(const nlohmann::json& worker_result) {
  if (!worker_result.is_object() || !worker_result.contains("poison")) {
    return "the worker returned no shared-memory poisoning result";
  }
  const auto& p = worker_result["poison"];
  const nlohmann::json cases = store::array_at(p, "cases");
  for (const auto& c : cases) {
    const std::string name = store::string_at(c, "case", "?");
    if (!store::bool_at(c, "identical", false)) {
      return fmt::format("case {}: results differ between shared-memory poison patterns {} "
                         "(a read of uninitialised shared memory)",
                         name,
                         store::array_at(p, "patterns")
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    if (!store::bool_at(c, "correct", false)) {
      return fmt::format("case {}: wrong result with shared memory poisoned: {}", name,
                         store::string_at(c, "reason", "no reason given"));
    }
  }
  if (cases.empty()) return "poisoning ran no case";
  return {};
}

GateResult gate_from_runs(const std::vector<ToolRun>& runs, const std::string& tool_version,
                          const nlohmann::json& poison_result) {
  GateResult g;
  g.name = std::string(kGateSanitizer);
  nlohmann::json tools = nlohmann::json::array();
  for (const auto& r : runs)
    tools.push_back(r.to_json());
  const std::string poison_failure = judge_poison(poison_result);
  g.evidence = {
      {"tool_version", tool_version},
      {"error_exitcode", kErrorExitCode},
      {"exact_alloc", true},
      {"tools", tools},
      {"poison",
       {{"status", poison_failure.empty() ? "pass" : "fail"},
        {"reason", poison_failure},
        {"result", poison_result.is_object() ? poison_result.value("poison", nlohmann::json())
                                             : nlohmann::json()}}}};
  auto first = [&](ToolOutcome o) -> const ToolRun* {
    for (const auto& r : runs) {
      if (r.outcome == o) return &r;
    }
    return nullptr;
  };
  if (const ToolRun* r = first(ToolOutcome::kHazards)) {
    g.status = GateStatus::kFail;
    g.reason = r->reason;
  } else if (const ToolRun* u = first(ToolOutcome::kUnexplained)) {
    g.status = GateStatus::kFail;
    g.reason = u->reason;
  } else if (const ToolRun* t = first(ToolOutcome::kTimeout)) {
    g.status = GateStatus::kTimeout;
    g.reason = t->reason;
  } else if (const ToolRun* i = first(ToolOutcome::kInfraError)) {
    g.status = GateStatus::kInfraError;
    g.reason = i->reason;
  } else if (const ToolRun* n = first(ToolOutcome::kNotRun)) {
    g.status = GateStatus::kNotRun;
    g.reason = n->reason;
  } else if (!poison_failure.empty()) {
    g.status = GateStatus::kFail;
    g.reason = "shared-memory poisoning: " + poison_failure;
  } else if (runs.empty()) {
    g.status = GateStatus::kNotRun;
    g.reason = "no sanitizer tool ran";
  } else {
    g.status = GateStatus::kPass;
  }
  return g;
}

namespace {

// One tool run in folder `dir` (the config's work_dir or a copy of it): its log, the worker's
// result, the judged run.
struct DirRun {
  ToolRun run;
  nlohmann::json worker_result;
};

DirRun run_tool(const GateConfig& config, const ProcessRunner& runner, std::string_view tool,
                const std::string& dir, const SubprocessOptions& opts) {
  std::vector<std::string> worker_argv = config.worker_argv;
  std::string result_path = config.worker_result_path;
  if (dir != config.work_dir) {
    for (auto& a : worker_argv)
      if (a == config.work_dir) a = dir;
    if (result_path.rfind(config.work_dir, 0) == 0)
      result_path = dir + result_path.substr(config.work_dir.size());
  }
  const std::string log = dir + "/sanitizer-" + std::string(tool) + ".log";
  ::unlink(log.c_str());
  ::unlink(result_path.c_str());
  if (config.prepare_folder) config.prepare_folder(tool, dir);
  SubprocessOptions o = opts;
  o.cwd = dir;
  const ToolCall call = runner(tool_command(config.sanitizer_path, tool, log, worker_argv), o);
  std::string text = read_text(log);
  if (text.empty()) text = call.stdout_text + call.stderr_text;
  nlohmann::json result = nlohmann::json::parse(read_text(result_path), nullptr, false);
  if (result.is_discarded()) result = nullptr;
  DirRun out;
  out.run = judge_tool_run(tool, call, std::move(text), result);
  out.worker_result = std::move(result);
  return out;
}

// A copy of the request files in work_dir/<tool> for a concurrent run; "" when it cannot be made
// (the tool then runs in work_dir after the others).
std::string tool_folder(const GateConfig& config, std::string_view tool) {
  const std::string dir = config.work_dir + "/" + std::string(tool);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "";
  for (const auto& name : config.request_files) {
    std::filesystem::copy_file(config.work_dir + "/" + name, dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return "";
  }
  return dir;
}

ToolRun not_run_after_hazards(std::string_view tool, const ToolRun& decisive) {
  ToolRun r;
  r.tool = std::string(tool);
  r.outcome = ToolOutcome::kNotRun;
  r.reason = fmt::format("{}: not run: {} already reported hazards, which decide the gate", tool,
                         decisive.tool);
  return r;
}

} // namespace

GateResult run_gate(const GateConfig& config, const ProcessRunner& runner,
                    std::map<std::string, std::string>* reports) {
  std::vector<ToolRun> runs;
  if (config.sanitizer_path.empty() || ::access(config.sanitizer_path.c_str(), X_OK) != 0) {
    const std::string why =
        config.sanitizer_path.empty()
            ? "compute-sanitizer not found; install the CUDA toolkit's sanitizer on the GPU machine"
            : "compute-sanitizer at " + config.sanitizer_path + " is not executable";
    for (auto tool : kTools) {
      ToolRun r;
      r.tool = std::string(tool);
      r.outcome = ToolOutcome::kNotRun;
      r.reason = why;
      runs.push_back(std::move(r));
    }
    return gate_from_runs(runs, "", nlohmann::json());
  }
  SubprocessOptions opts;
  opts.cwd = config.work_dir;
  opts.env = config.env;
  opts.deadline = std::chrono::milliseconds(30000);
  const ToolCall version = runner({config.sanitizer_path, "--version"}, opts);
  const std::string tool_version = parse_version(version.stdout_text + version.stderr_text);
  opts.deadline = config.deadline_per_tool;
  const auto keep = [&](DirRun&& r) {
    if (reports) (*reports)[r.run.tool] = r.run.report_text;
    runs.push_back(std::move(r.run));
  };
  // memcheck first, alone: its worker result also carries the poisoning verdict.
  DirRun memcheck = run_tool(config, runner, kTools[0], config.work_dir, opts);
  const nlohmann::json poison_result = memcheck.worker_result;
  keep(std::move(memcheck));
  const std::vector<std::string_view> rest(std::begin(kTools) + 1, std::end(kTools));
  // The first tool that reported hazards (its status and reason decide the gate), by position.
  std::optional<std::size_t> hazards;
  if (runs.front().outcome == ToolOutcome::kHazards) hazards = 0;
  if (config.fail_fast && hazards) {
    const ToolRun decisive = runs[*hazards];
    for (auto tool : rest)
      runs.push_back(not_run_after_hazards(tool, decisive));
    return gate_from_runs(runs, tool_version, poison_result);
  }
  if (config.concurrent) {
    std::vector<std::string> dirs;
    for (auto tool : rest)
      dirs.push_back(tool_folder(config, tool));
    std::vector<std::optional<DirRun>> done(rest.size());
    std::vector<std::exception_ptr> failures(rest.size()); // rethrown here, as the serial path
    {
      std::vector<std::jthread> threads;
      for (std::size_t i = 0; i < rest.size(); ++i)
        if (!dirs[i].empty())
          threads.emplace_back([&, i] {
            try {
              done[i] = run_tool(config, runner, rest[i], dirs[i], opts);
            } catch (...) {
              failures[i] = std::current_exception();
            }
          });
    }
    for (const auto& f : failures)
      if (f) std::rethrow_exception(f);
    for (std::size_t i = 0; i < rest.size(); ++i) // a folder that could not be made: here, after
      if (!done[i]) done[i] = run_tool(config, runner, rest[i], config.work_dir, opts);
    for (auto& d : done)
      keep(std::move(*d));
    return gate_from_runs(runs, tool_version, poison_result);
  }
  for (auto tool : rest) {
    if (config.fail_fast && hazards) {
      const ToolRun decisive = runs[*hazards];
      runs.push_back(not_run_after_hazards(tool, decisive));
      continue;
    }
    keep(run_tool(config, runner, tool, config.work_dir, opts));
    if (!hazards && runs.back().outcome == ToolOutcome::kHazards) hazards = runs.size() - 1;
  }
  return gate_from_runs(runs, tool_version, poison_result);
}

} // namespace kloop::evaluator::sanitizer
