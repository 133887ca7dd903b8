// Placeholder until this command is built: says so plainly and exits 3.
#include <cstdio>

#include "app/commands.h"

namespace kloop::app {

void register_store_commands(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("sessions", "List stored sessions (not built yet)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    std::fprintf(stderr, "kloop sessions: not built yet in this version\n");
    exit_code = kExitCouldNotFinish;
  });
}

}  // namespace kloop::app
