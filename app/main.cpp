// kloop: turns AI-generated GPU kernels into evidence. Entry point of the CLI.
#include <cstdio>
#include <exception>

#include <fmt/core.h>

#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kloop: sends an operator contract to a kernel generator, builds and checks every candidate "
      "through hard gates, and promotes only fully verified kernels.\n"
      "Exit codes (README \"Exit codes\"): 0 ok/promoted/passed, 1 rejected (a hard gate failed; "
      "a malformed manifest fails the contract gate), 2 usage error, 3 could not finish (no "
      "device, provider unreachable, damaged store, infrastructure fault)."};
  app.set_version_flag("--version", fmt::format("kloop {} ({})", KLOOP_VERSION, KLOOP_GIT_COMMIT));
  app.require_subcommand(1);
  int exit_code = kloop::app::kExitOk;
  kloop::app::register_operators(app, exit_code);
  kloop::app::register_optimize(app, exit_code);
  kloop::app::register_evaluate(app, exit_code);
  kloop::app::register_checker_coverage(app, exit_code);
  kloop::app::register_store_commands(app, exit_code);
  kloop::app::register_export_commands(app, exit_code);
  kloop::app::register_sweep_commands(app, exit_code);
  kloop::app::register_contract_command(app, exit_code);
  kloop::app::register_replay_evaluator();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return kloop::app::report_usage_error(app, e, argc, argv);
  } catch (const std::exception& e) {
    return kloop::app::report_error(e, argc, argv);
  }
  return exit_code;
}
