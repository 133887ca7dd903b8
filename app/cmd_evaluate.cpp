// `kloop evaluate OP --candidate DIR [--json] [--no-sandbox] [--build-timeout S]`: one candidate
// through every gate that can run here (evaluator/pipeline.h). Exit codes: 0 pass, 1 reject,
// 2 usage (unknown operator, unreadable candidate directory), 3 could not finish (no device:
// pending_device_validation; infrastructure fault).
#include <cstdio>
#include <string>

#include <fmt/core.h>

#include "agent/components.h"
#include "app/commands.h"
#include "app/work_root.h"
#include "evaluator/pipeline.h"
#include "evaluator/subprocess.h"
#include "evaluator/throughput.h"
#include "kernels/registry.h"
#include "store/store.h"
#include "store/text_view.h"

namespace kloop::app {
namespace {

class StderrProgress : public agent::ProgressSink {
public:
  void line(const std::string& text) override { std::fprintf(stderr, "%s\n", text.c_str()); }
};

struct EvaluateArgs {
  std::string op;
  std::string candidate_dir;
  bool json = false;
  bool no_sandbox = false;
  double build_timeout_s = 60;
  std::string devices = "all"; // the candidate runs on the first chosen device
};

void print_table(const evaluator::PublicReport& report) {
  std::printf("%-12s %-12s %s\n", "gate", "status", "reason");
  for (const auto& g : report.gates) {
    // The whole reason (it often ends with the fix), made safe for the terminal.
    const std::string reason = store::terminal_text(g.reason);
    std::printf("%-12s %-12s %s\n", g.name.c_str(),
                std::string(evaluator::gate_status_name(g.status)).c_str(), reason.c_str());
  }
  for (const auto& [name, sha] : report.artifacts)
    std::printf("artifact %-14s sha256 %s\n", name.c_str(), sha.c_str());
  std::printf("verdict: %s\n", std::string(evaluator::verdict_name(report.verdict)).c_str());
}

// Every phase of the evaluation with its start and wall time (evaluator/phases.h).
void print_phases(const evaluator::Evaluation& ev) {
  std::printf("time %.2f s:\n", ev.wall_ms / 1000);
  for (const auto& p : ev.phases)
    std::printf("  %-34s %s%8.3f s (at %.3f s)%s\n", p.name.c_str(), p.nested ? "  " : "",
                p.wall_ms / 1000, p.start_ms / 1000,
                p.device.empty() ? "" : (" device " + p.device).c_str());
}

int run_evaluate(const EvaluateArgs& a) {
  // A usage error: the message on stderr and, with --json, {"error", "exit_code"} on stdout (as
  // every other command prints it).
  const auto usage_error = [&](const std::string& message) {
    std::fprintf(stderr, "kloop evaluate: %s\n", message.c_str());
    if (a.json) print_json_error("kloop evaluate: " + message, kExitUsage);
    return kExitUsage;
  };
  const op::Operator* op = nullptr;
  try {
    op = &resolve_operator(a.op);
  } catch (const UsageError& e) {
    return usage_error(e.what());
  }
  if (!(a.build_timeout_s > 0 && a.build_timeout_s <= 3600))
    return usage_error("--build-timeout must be in (0, 3600] seconds");
  auto loaded = evaluator::load_candidate_dir(a.candidate_dir);
  if (!loaded.candidate) return usage_error(loaded.error);
  if (a.no_sandbox) {
    std::fprintf(stderr, "kloop evaluate: --no-sandbox: the candidate is compiled WITHOUT "
                         "isolation (recorded in the build gate's evidence)\n");
  }
  // The same evaluator as `kloop optimize`: sandboxed build, static inspection and the GPU worker
  // device gates (not_run with the reason where there is no device). Progress goes to stderr.
  StderrProgress progress;
  agent::DeviceOptions device_options;
  device_options.no_sandbox = a.no_sandbox;
  device_options.build_timeout_s = a.build_timeout_s;
  device_options.devices = a.devices;
  try {
    device_options.throughput = evaluator::throughput_from_env();
  } catch (const std::invalid_argument& e) {
    return usage_error(e.what());
  }
  const WorkRoot work_root; // $TMPDIR of this run; a killed run's is removed by the next kloop
  std::optional<agent::DeviceContext> device;
  try {
    device.emplace(device_options, progress);
  } catch (const agent::DeviceSelectionError& e) {
    return usage_error(e.what());
  }
  auto ev = device->evaluator(*op).evaluate(*loaded.candidate);
  if (a.json) { // the public report, plus where its time went (evaluator/phases.h)
    nlohmann::json doc = ev.report.to_json();
    doc["phases"] = evaluator::phases_telemetry(ev.phases, ev.wall_ms);
    std::printf("%s\n", store::json_text(doc, 2).c_str());
  } else {
    print_table(ev.report);
    print_phases(ev);
  }
  // kloop's own host-memory peak, children excluded (stderr: --json keeps stdout the report).
  std::fprintf(stderr, "kloop peak RSS %ld MiB\n", (evaluator::self_max_rss_kib() + 1023) / 1024);
  switch (ev.report.verdict) {
  case evaluator::Verdict::kPass:
    return kExitOk;
  case evaluator::Verdict::kReject:
    return kExitRejected;
  case evaluator::Verdict::kPendingDeviceValidation:
    return kExitCouldNotFinish;
  }
  return kExitCouldNotFinish;
}

} // namespace

void register_evaluate(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<EvaluateArgs>();
  auto* sub = app.add_subcommand(
      "evaluate", "Run one candidate (kernel.cu + manifest.json) through every gate that can run "
                  "here. Exit: 0 pass, 1 reject, 2 usage, 3 could not finish (no device)");
  sub->add_option("op", args->op, "Operator: " + op::operator_names())->required();
  sub->add_option("--candidate", args->candidate_dir, "Folder with kernel.cu and manifest.json")
      ->required();
  sub->add_flag("--json", args->json, "Print one JSON document (the public report)");
  sub->add_flag("--no-sandbox", args->no_sandbox,
                "Build without namespace isolation (recorded; only for trusted sources)");
  sub->add_option("--build-timeout", args->build_timeout_s,
                  "Wall-clock limit of one build in seconds (default 60)")
      ->check(finite_number_check(0, 3600, "seconds", /*lo_open=*/true));
  sub->add_option("--devices", args->devices,
                  "GPUs to consider: all (default), none, or a comma list of indices / GPU UUIDs; "
                  "the candidate runs on the first")
      ->check(devices_check());
  sub->callback([args, &exit_code] {
    try {
      exit_code = run_evaluate(*args);
    } catch (const std::exception& e) {
      // An infrastructure fault (ours, never the candidate's): --json still gets its document.
      const std::string message = std::string("kloop evaluate: could not finish: ") + e.what();
      std::fprintf(stderr, "%s\n", message.c_str());
      if (args->json) print_json_error(message, kExitCouldNotFinish);
      exit_code = kExitCouldNotFinish;
    }
  });
}

} // namespace kloop::app
