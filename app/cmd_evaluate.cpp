// Placeholder until this command is built: says so plainly and exits 3.
#include <cstdio>

#include "app/commands.h"

namespace kloop::app {

void register_evaluate(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("evaluate", "Run one candidate through every gate that can run here (not built yet)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    std::fprintf(stderr, "kloop evaluate: not built yet in this version\n");
    exit_code = kExitCouldNotFinish;
  });
}

}  // namespace kloop::app
