// `kloop export ID --torch DIR [--rollout FILE] [--allow-unpromoted]` and
// `kloop shadow ID --inputs DIR [--json] [--allow-unpromoted]` (agent/torch_export.h,
// agent/shadow.h). Exit codes (README): 0 written / shadow pass; 1 shadow divergence (the kernel
// disagrees with the reference); 2 usage (not promoted without --allow-unpromoted, the rollout
// file, a rollout other than the one a signed receipt covers, the inputs folder, an output folder
// in a missing folder); 3 could not finish (shadow not run, damaged store).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/core.h>

#include "agent/shadow.h"
#include "agent/torch_export.h"
#include "app/commands.h"
#include "store/receipt.h"
#include "store/store.h"

namespace kloop::app {
namespace {

struct ExportOpts {
  std::string dir = store::Store::default_dir();
  std::int64_t id = 0;
  std::string torch_dir, rollout_file, inputs, python;
  bool allow_unpromoted = false, json = false;
  int timeout_s = 600;
};

// export and shadow read a session: a mistyped --store must not create an empty store.
bool require_store(const std::string& dir, const char* cmd) {
  if (std::filesystem::exists(std::filesystem::path(dir) / "kloop.db")) return true;
  std::fprintf(stderr,
               "kloop %s: no store at %s (kloop.db missing); pass --store DIR of an existing "
               "store (default $KLOOP_STORE or ./kloop-store)\n",
               cmd, dir.c_str());
  return false;
}

int cmd_export(const ExportOpts& o) {
  agent::TorchExportOptions eo;
  eo.allow_unpromoted = o.allow_unpromoted;
  if (!o.rollout_file.empty()) {
    std::ifstream in(o.rollout_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "kloop export: cannot read --rollout %s; check the path\n",
                   o.rollout_file.c_str());
      return kExitUsage;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    auto parsed = agent::parse_rollout(ss.str());
    if (!parsed.rollout) {
      std::fprintf(stderr, "kloop export: --rollout %s: %s\n", o.rollout_file.c_str(),
                   parsed.error.c_str());
      return kExitUsage;
    }
    eo.rollout = std::move(parsed.rollout);
  }
  if (!require_store(o.dir, "export")) return kExitUsage;
  store::Store st = store::Store::open(o.dir);
  const auto r = agent::export_torch_package(st, o.id, o.torch_dir, eo);
  if (!r.ok) {
    std::fprintf(stderr, "kloop export: %s\n", r.error.c_str());
    return r.exit_code;
  }
  if (!r.promoted)
    std::fprintf(stderr,
                 "kloop export: WARNING: session %lld is NOT promoted; candidate %lld exported "
                 "for review only (export.json and the package say so)\n",
                 static_cast<long long>(o.id), static_cast<long long>(r.candidate_id));
  std::string msg =
      fmt::format("wrote {} ({} files; candidate {}{})\n", r.package_dir.string(), r.files.size(),
                  r.candidate_id, r.promoted ? ", promoted" : ", NOT promoted");
  if (!r.receipt_note.empty()) std::fprintf(stderr, "kloop export: %s\n", r.receipt_note.c_str());
  if (eo.rollout && !r.rollout_recorded)
    msg += "rollout written to receipt.json only: the session has no promotion decision to "
           "attach it to\n";
  else if (eo.rollout)
    msg += "rollout recorded in the store (on its promotion decision, which is unchanged)\n";
  if (r.receipt_signed)
    msg += fmt::format("receipt.json is the signed receipt of the store (key {}); check it with "
                       "`kloop receipt verify`\n",
                       r.receipt["approval"].value("signing_key_id", std::string("?")));
  else if (!store::empty_rollout_fields(r.receipt["payload"]).empty())
    msg += "receipt.json has an empty rollout section (not signable for deployment); pass "
           "--rollout FILE to fill it\n";
  else if (r.promoted)
    msg += "receipt.json is unsigned: sign it with `kloop receipt sign " + std::to_string(o.id) +
           " --key KEY --reviewer NAME`, then export again to carry the signature\n";
  std::fwrite(msg.data(), 1, msg.size(), stdout);
  return kExitOk;
}

int cmd_shadow(const ExportOpts& o) {
  if (!require_store(o.dir, "shadow")) return kExitUsage;
  store::Store st = store::Store::open(o.dir);
  agent::ShadowOptions so;
  so.inputs = o.inputs;
  so.allow_unpromoted = o.allow_unpromoted;
  so.python = o.python;
  so.deadline = std::chrono::seconds(o.timeout_s);
  const auto r = agent::run_shadow(st, o.id, so);
  if (o.json) {
    const nlohmann::json j = {
        {"session_id", o.id}, {"candidate_id", r.candidate_id},   {"status", r.status},
        {"reason", r.reason}, {"report_sha256", r.report_sha256}, {"report", r.report}};
    const std::string text = j.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    const std::string text = agent::format_shadow_table(r);
    std::fwrite(text.data(), 1, text.size(), r.exit_code == 0 ? stdout : stderr);
  }
  return r.exit_code;
}

} // namespace

void register_export_commands(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExportOpts>();
  int* ec = &exit_code;

  auto* exp = app.add_subcommand(
      "export", "Write the promoted candidate of a session as an importable PyTorch package");
  exp->add_option("--store", o->dir, "Store directory (default $KLOOP_STORE or ./kloop-store)");
  exp->add_option("ID", o->id, "Session id")->required()->check(session_id_check());
  exp->add_option("--torch", o->torch_dir, "Directory to write the package kloop_<operator>/ into")
      ->required();
  exp->add_option("--rollout", o->rollout_file,
                  "JSON {feature_flag_and_scope, healthy_worker_recovery_and_reference_target, "
                  "revalidation_policy}: recorded in the store and the receipt");
  exp->add_flag("--allow-unpromoted", o->allow_unpromoted,
                "Export the frozen candidate of an unpromoted session (marked as such)");
  exp->callback([o, ec] { *ec = cmd_export(*o); });

  auto* shadow = app.add_subcommand(
      "shadow", "Run the promoted candidate and the reference side by side on captured inputs");
  shadow->add_option("--store", o->dir, "Store directory (default $KLOOP_STORE or ./kloop-store)");
  shadow->add_option("ID", o->id, "Session id")->required()->check(session_id_check());
  shadow
      ->add_option("--inputs", o->inputs,
                   "Folder of NAME.safetensors (tensors x, weight; eps in metadata) or "
                   "NAME.x.npy + NAME.weight.npy files")
      ->required();
  shadow->add_flag("--json", o->json, "Print JSON");
  shadow->add_flag("--allow-unpromoted", o->allow_unpromoted,
                   "Shadow the frozen candidate of an unpromoted session");
  shadow->add_option("--python", o->python, "python3 to run (default: python3 on PATH)");
  shadow->add_option("--timeout", o->timeout_s, "Seconds before the shadow run is stopped")
      ->check(CLI::Range(1, 86400));
  shadow->callback([o, ec] { *ec = cmd_shadow(*o); });
}

} // namespace kloop::app
