// Test executable: the real store commands of app/cmd_store.cpp behind a CLI11 entry point like
// app/main.cpp, without the optimize/evaluate commands (so the store CLI is testable on its own).
#include <cstdio>
#include <exception>

#include "app/commands.h"

int main(int argc, char** argv) {
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
