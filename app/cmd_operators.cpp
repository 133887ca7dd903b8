// `kloop operators [--json]`: the registered operators (kernels/registry.h) with their contract
// id and hash, dtypes and kernel signature; and the one way every command resolves its operator
// argument (resolve_operator).
#include <cstdio>

#include <fmt/format.h>

#include "app/commands.h"
#include "kernels/registry.h"

namespace kloop::app {

const op::Operator& resolve_operator(const std::string& name) {
  if (const op::Operator* o = op::find_operator(name)) return *o;
  throw UsageError(fmt::format("unknown operator '{}'; available: {} (`kloop operators` lists "
                               "them with their contracts)",
                               name, op::operator_names()));
}

void register_operators(CLI::App& app, int& exit_code) {
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand(
      "operators", "List the registered operators with their contract ids and hashes");
  sub->add_flag("--json", *json, "Print JSON (one object per operator)");
  sub->callback([json, &exit_code] {
    if (*json) {
      std::printf("%s\n", op::operators_json().dump(2).c_str());
    } else {
      for (const op::Operator* o : op::operators()) {
        std::printf("%s\n", fmt::format("{:<10} {} sha256 {}\n           {}\n           {}",
                                        o->cli_name(), o->contract_id(), o->contract_sha256(),
                                        o->summary(), op::kernel_signature(o->declaration()))
                                .c_str());
      }
    }
    exit_code = kExitOk;
  });
}

} // namespace kloop::app
