// Placeholder until this command is built: says so plainly and exits 3.
#include <cstdio>

#include "app/commands.h"

namespace kloop::app {

void register_optimize(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("optimize", "Run the refinement loop for an operator (not built yet)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    std::fprintf(stderr, "kloop optimize: not built yet in this version\n");
    exit_code = kExitCouldNotFinish;
  });
}

}  // namespace kloop::app
