// Fuzz target `cli_values`: values from the command line and the files it names, as kloop checks
// them before any work: the session ID, seed and floating-point validators (app/commands.h), the
// --json scan of argv, the --rollout file (agent::parse_rollout) and a --key / --sign-key file
// (store::read_secret_key). Input: one byte choosing the check, then the value.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "agent/torch_export.h"
#include "app/commands.h"
#include "fuzz/fuzz_target.h"
#include "store/error.h"
#include "store/receipt.h"

namespace {

// A validator's verdict on `text`; an accepted value must parse as the option's type.
void check_value(const std::string& text) {
  using namespace kloop::app;
  if (session_id_check()(text).empty()) {
    std::int64_t v = 0;
    if (!parse_whole(text, v) || v <= 0) __builtin_trap();
  }
  (void)seed_check()(text);
  if (finite_number_check(0, 3600, "seconds")(text).empty()) {
    double v = 0;
    if (!parse_whole(text, v) || !std::isfinite(v) || v < 0 || v > 3600) __builtin_trap();
  }
  (void)finite_number_check(1, 1e9, "x", /*lo_open=*/true)(text);
}

// A key file with these bytes, owner-only (the permission read_secret_key insists on).
void check_key_file(const std::string& bytes) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("kloop-fuzz-key-" + std::to_string(::getpid())))
          .string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  ::chmod(path.c_str(), 0600);
  try {
    (void)kloop::store::read_secret_key(path);
  } catch (const kloop::store::StoreError&) { // documented: names the file and the fix
  }
}

} // namespace

KLOOP_FUZZ_TARGET(cli_values) {
  if (size == 0) return 0;
  const std::string value(kloop::fuzz::text_of(data + 1, size - 1));
  switch (data[0] % 4) {
  case 0:
    check_value(value);
    break;
  case 1: {
    std::vector<std::string> words = kloop::fuzz::split_input(value, 8);
    std::vector<const char*> argv{"kloop"};
    for (const auto& w : words)
      argv.push_back(w.c_str());
    (void)kloop::app::json_requested(static_cast<int>(argv.size()), argv.data());
    break;
  }
  case 2: {
    const auto r = kloop::agent::parse_rollout(value);
    if (r.rollout.has_value() == !r.error.empty()) __builtin_trap(); // one or the other
    break;
  }
  default:
    check_key_file(value);
  }
  return 0;
}
