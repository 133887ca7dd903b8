// Test executable: the real store commands of app/cmd_store.cpp behind a CLI11 entry point like
// app/main.cpp, without the optimize/evaluate commands (so the store CLI is testable on its own).
// With KLOOP_TEST_REPLAY=pass (or fail) set, `replay` re-evaluates through a fake evaluator: every
// gate recorded not_run now passes (or fails), the others keep their recorded status; the verdict
// is pass when every gate passes, else reject. With KLOOP_TEST_REPLAY=cpu it is a machine without
// a GPU: every gate keeps its recorded status (not_run stays not_run, reason "no CUDA device") and
// the verdict is pending_device_validation when any gate is not_run. Unset, replay has no
// evaluator (as before).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "app/commands.h"
#include "store/replay.h"

namespace {

void register_fake_reevaluator() {
  const char* mode = std::getenv("KLOOP_TEST_REPLAY");
  if (mode == nullptr) return;
  const bool cpu = std::string(mode) == "cpu";
  const auto now_status =
      std::string(mode) == "pass" ? kloop::store::GateCode::kPass : kloop::store::GateCode::kFail;
  kloop::store::set_default_reevaluator([now_status, cpu](const kloop::store::ReplayCandidate& c) {
    kloop::store::ReplayOutcome out;
    out.verdict = kloop::store::VerdictCode::kPass;
    for (auto g : c.recorded_gates) {
      if (cpu) {
        if (g.status == kloop::store::GateCode::kNotRun) {
          g.reason = "no CUDA device";
          out.verdict = kloop::store::VerdictCode::kPendingDeviceValidation;
        }
        out.gates.push_back(g);
        continue;
      }
      if (g.status == kloop::store::GateCode::kNotRun) {
        g.status = now_status;
        g.reason = now_status == kloop::store::GateCode::kPass ? "" : "fake evaluator: fail";
      }
      if (g.status != kloop::store::GateCode::kPass)
        out.verdict = kloop::store::VerdictCode::kReject;
      out.gates.push_back(g);
    }
    return out;
  });
}

} // namespace

int main(int argc, char** argv) {
  register_fake_reevaluator();
  CLI::App app{"kloop store commands (test build)"};
  app.require_subcommand(1);
  int exit_code = kloop::app::kExitOk;
  kloop::app::register_store_commands(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e); // --help
    return kloop::app::report_usage_error(app, e, argc, argv);
  } catch (const std::exception& e) {
    return kloop::app::report_error(e, argc, argv);
  }
  return exit_code;
}
