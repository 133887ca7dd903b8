// `kloop store merge OUT STORE...`, `kloop compare --by generator` and the row-chain lines of
// `kloop store verify` (app/commands.h).
#include <filesystem>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "app/commands.h"
#include "store/generator_compare.h"
#include "store/store.h"

namespace kloop::app {
namespace {

struct MergeArgs {
  std::string out;
  std::vector<std::string> sources;
  bool json = false;
};

int run_merge(const MergeArgs& a) {
  std::error_code ec;
  if (std::filesystem::exists(a.out, ec) && !std::filesystem::is_directory(a.out, ec))
    throw UsageError(fmt::format("store merge: OUT {} is a file; give a store directory (it is "
                                 "created when missing)",
                                 a.out));
  // Every source is checked before anything is written, so a typo creates no OUT store.
  for (const auto& s : a.sources)
    if (!std::filesystem::exists(std::filesystem::path(s) / "kloop.db", ec))
      throw UsageError(fmt::format("store merge: {} is not a kloop store (no kloop.db); give "
                                   "store directories",
                                   s));
  store::Store out = store::Store::open(a.out);
  nlohmann::json doc = {{"out", a.out}, {"sources", nlohmann::json::array()}};
  for (const auto& s : a.sources) {
    const auto rep = out.merge_from(s);
    nlohmann::json merged = nlohmann::json::array();
    for (const auto& [from, to] : rep.merged)
      merged.push_back({{"source_id", from}, {"id", to}});
    doc["sources"].push_back({{"source", rep.source},
                              {"merged", merged},
                              {"skipped", rep.skipped},
                              {"blobs_copied", rep.blobs_copied},
                              {"blobs_present", rep.blobs_present},
                              {"holdout_files", rep.holdout_files}});
    if (a.json) continue;
    std::string ids;
    for (const auto& [from, to] : rep.merged)
      ids += fmt::format("{}{}->{}", ids.empty() ? "" : ", ", from, to);
    std::printf("%s: %zu session(s) merged%s%s, %zu skipped; %lld blob(s) copied, %lld already "
                "here; %d holdout suite(s) copied sealed as they were\n",
                rep.source.c_str(), rep.merged.size(), ids.empty() ? "" : " (",
                ids.empty() ? "" : (ids + ")").c_str(), rep.skipped.size(),
                static_cast<long long>(rep.blobs_copied), static_cast<long long>(rep.blobs_present),
                rep.holdout_files);
    for (const auto& line : rep.skipped)
      std::printf("  skipped %s\n", line.c_str());
  }
  if (a.json) std::printf("%s\n", doc.dump(2).c_str());
  return kExitOk;
}

} // namespace

void register_store_merge(CLI::App* store_cmd, int& exit_code) {
  auto a = std::make_shared<MergeArgs>();
  auto* merge = store_cmd->add_subcommand(
      "merge", "Merge stores (e.g. a sweep's task stores) into OUT; idempotent");
  merge->add_option("OUT", a->out, "Output store directory (created when missing)")->required();
  merge->add_option("STORE", a->sources, "Stores to merge into OUT")->required();
  merge->add_flag("--json", a->json, "Print JSON");
  int* ec = &exit_code;
  merge->callback([a, ec] { *ec = run_merge(*a); });
}

void add_generator_compare_flags(CLI::App* compare, GeneratorCompareArgs& args) {
  compare->add_option("--by", args.by, "Compare every optimize session by generator")
      ->check(CLI::IsMember({"generator"}));
  compare->add_option("--operator", args.op, "With --by: only this operator's sessions");
  compare->add_option("--html", args.html, "With --by: also write an HTML report with plots");
}

nlohmann::json generator_comparison(const std::string& store_dir,
                                    const GeneratorCompareArgs& args) {
  if (args.by != "generator")
    throw UsageError("compare --by takes `generator` (got '" + args.by + "')");
  store::Store st = store::Store::open(store_dir, store::OpenMode::kReadOnly);
  return store::compare_generators(st, args.op.empty() ? std::nullopt
                                                       : std::optional<std::string>(args.op));
}

std::string verify_chain_text(const store::ChainReport& c) {
  std::string out;
  for (const auto& p : c.problems)
    out += "row chain: " + p + "\n";
  out += fmt::format("row chains: {} session(s) chained, {} link(s) checked", c.chained, c.links);
  if (c.partially_chained > 0)
    out += fmt::format("; {} partially chained (recorded before row chaining, resumed after: "
                       "their older rows carry no hash)",
                       c.partially_chained);
  if (!c.unchained.empty())
    out += fmt::format("; {} unchained (recorded before row chaining, their rows carry no hash, "
                       "so an edited value there goes unnoticed): sessions {}",
                       c.unchained.size(), fmt::join(c.unchained, ", "));
  return out + "\n";
}

} // namespace kloop::app
