// `kloop contract OP [--out FILE]`: the operator's machine-readable contract (the document the
// prompts are rendered from and the sessions record the hash of), as canonical JSON. The build
// stages it in share/kloop/contracts/, where `cmake --install` puts it.
#include <fstream>

#include <fmt/core.h>

#include "app/commands.h"
#include "kernels/registry.h"

namespace kloop::app {

void register_contract_command(CLI::App& app, int& exit_code) {
  auto op = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("contract", "Print an operator's machine-readable contract");
  sub->add_option("OP", *op, "Operator (kloop operators lists them)")->required();
  sub->add_option("--out", *out, "Write it to this file instead of stdout");
  int* ec = &exit_code;
  sub->callback([op, out, ec] {
    const std::string text = resolve_operator(*op).contract().dump(2) + "\n";
    if (out->empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      std::ofstream f(*out, std::ios::binary | std::ios::trunc);
      if (!(f << text) || !f.flush())
        throw UsageError(fmt::format("cannot write --out {}; give a file in an existing, "
                                     "writable folder",
                                     *out));
    }
    *ec = kExitOk;
  });
}

} // namespace kloop::app
