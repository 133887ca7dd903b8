// Store commands: sessions, show, compare, replay, report, `store verify`, `keys generate`,
// `receipt sign`, `receipt verify`. All take --store DIR (default $KLOOP_STORE or ./kloop-store).
// Store errors propagate as exceptions; main() prints them and exits 3 (2 for a session or
// --store that does not exist, and for a file named on the command line that cannot be read).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <unistd.h>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "app/commands.h"
#include "app/show_resources.h"
#include "evaluator/evidence.h"
#include "store/compare.h"
#include "store/error.h"
#include "store/generator_compare.h"
#include "store/html_report.h"
#include "store/phase_view.h"
#include "store/receipt.h"
#include "store/replay.h"
#include "store/store.h"
#include "store/text_view.h"

namespace kloop::app {
namespace {

using store::Store;

struct Opts {
  std::string dir = Store::default_dir();
  bool json = false;
  std::int64_t id = 0;
  std::vector<std::int64_t> ids;
  std::string file, key, keys, reviewer, out;
};

void add_store_flag(CLI::App* sub, Opts& o) {
  sub->add_option("--store", o.dir, "Store directory (default $KLOOP_STORE or ./kloop-store)");
}

std::string fmt_opt(const std::optional<double>& v, const char* f) {
  return v ? fmt::format(fmt::runtime(f), *v) : "-";
}

void print(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}

// Reads the file named by command-line `option`; throws UsageError naming it when unreadable.
std::string read_text(const std::string& path, const char* option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("{} {} is a directory; give a file", option, path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UsageError(
        fmt::format("cannot read {} {} ({}); check the path", option, path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const std::string& path, const char* what, const char* option) {
  auto j = nlohmann::json::parse(read_text(path, option), nullptr, false);
  if (j.is_discarded())
    throw UsageError(fmt::format("{} {} is not valid JSON; give the {} file", option, path, what));
  return j;
}

// Throws UsageError naming command-line `option` unless `path` can be a file written in an
// existing, writable folder (checked before any work whose result it would hold).
void check_output_path(const std::string& path, const char* option) {
  std::error_code ec;
  const auto parent = std::filesystem::absolute(path, ec).parent_path();
  if (std::filesystem::is_directory(path, ec) || !std::filesystem::is_directory(parent, ec) ||
      ::access(parent.c_str(), W_OK) != 0 ||
      (std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) != 0))
    throw UsageError(fmt::format("cannot write {} {}: give a file path in an existing, writable "
                                 "folder",
                                 option, path));
}

// Opens `path` (named by command-line `option`) for writing; throws UsageError naming the option
// when it cannot be created (missing folder, no permission).
std::ofstream open_output(const std::string& path, const char* option) {
  check_output_path(path, option);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw UsageError(fmt::format("cannot create {} {} ({}); give a file path in an existing, "
                                 "writable folder",
                                 option, path, std::strerror(errno)));
  return out;
}

// Writes `text` to an output opened by open_output; a failed write (disk full) is not the
// caller's mistake: StoreError (exit 3).
void write_output(std::ofstream& out, const std::string& text, const std::string& path) {
  if (!(out << text) || !out.flush())
    throw store::StoreError(fmt::format("cannot write {}; is the disk full?", path));
}

// Appends to `out` the JSON pointers of strings and keys in `j` that are not valid UTF-8.
void invalid_utf8_paths(const nlohmann::json& j, const std::string& path,
                        std::vector<std::string>& out) {
  const auto valid = [](const std::string& text) {
    try {
      (void)nlohmann::json(text).dump();
      return true;
    } catch (const nlohmann::json::type_error&) {
      return false;
    }
  };
  if (j.is_string()) {
    if (!valid(j.get_ref<const std::string&>())) out.push_back(path.empty() ? "its text" : path);
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string key; // a JSON pointer token: "~" -> "~0", "/" -> "~1" (RFC 6901)
      for (const char ch : it.key())
        key += ch == '~' ? std::string("~0") : ch == '/' ? std::string("~1") : std::string(1, ch);
      const std::string child = path + "/" + key;
      if (!valid(it.key())) out.push_back(child + " (key)");
      invalid_utf8_paths(it.value(), child, out);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      invalid_utf8_paths(j[i], fmt::format("{}/{}", path, i), out);
  }
}

// Prints on stderr the note that stored text at `where` (`what`: "kloop show: session 3") is not
// valid UTF-8 and was printed with U+FFFD, and what to check.
void note_invalid_utf8(const std::string& what, const std::vector<std::string>& where) {
  std::fprintf(stderr,
               "%s: note: stored text that is not valid UTF-8 (an edited or damaged row) at %s; "
               "printed with U+FFFD in place of the invalid bytes. Run `kloop store verify`: it "
               "checks the blobs, the database structure and each session's row chain (an edited "
               "row of a session recorded before row chaining goes unnoticed: compare with a copy "
               "you trust)\n",
               what.c_str(),
               where.empty() ? "an unnamed field"
                             : fmt::format("{}", fmt::join(where, ", ")).c_str());
}

// Serialises store content for printing. Stored text that is not valid UTF-8 (an edited or
// damaged row) would make the serializer throw; its bytes are printed as U+FFFD instead, and a
// note on stderr (`what`: "kloop show: session 3") names the JSON paths and what to check, so the
// rest of the record stays readable.
std::string dump_store_json(const nlohmann::json& j, const std::string& what, int indent = 2) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::type_error&) {
  }
  std::vector<std::string> bad;
  invalid_utf8_paths(j, "", bad);
  note_invalid_utf8(what, bad);
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Stored text for the text views (`kloop sessions`, `kloop show`): text that is not valid UTF-8
// (an edited or damaged row) is printed with U+FFFD, as the JSON views print it, and one note on
// stderr names the fields so repaired (`what`: "kloop show: session 3").
class TextScrub {
public:
  explicit TextScrub(std::string what) : what_(std::move(what)) {}
  // `text` made valid UTF-8; `field` ("session 3 model") is named in the note when it was not.
  std::string operator()(const std::string& text, const std::string& field) {
    std::string out = store::replace_invalid_utf8(text);
    if (out != text) fields_.push_back(field);
    return out;
  }
  // Prints `out` on stdout, made valid UTF-8 as a whole (invalid bytes left there come from a
  // stored value not passed through operator(): "other stored text"), then the note when
  // anything was replaced.
  // Control bytes in stored text (a candidate's compiler diagnostic, a model name) are printed as
  // escapes (store::terminal_text), so stored text cannot drive the terminal.
  void print_all(const std::string& out) {
    const std::string valid = store::replace_invalid_utf8(out);
    if (valid != out) fields_.push_back("other stored text");
    print(store::terminal_text(valid));
    if (!fields_.empty()) note_invalid_utf8(what_, fields_);
  }

private:
  std::string what_;
  std::vector<std::string> fields_;
};

// Display width of UTF-8 `text` in code points (bytes that do not continue a sequence).
std::size_t text_width(const std::string& text) {
  std::size_t n = 0;
  for (const unsigned char c : text)
    n += (c & 0xC0) != 0x80;
  return n;
}

void cmd_sessions(const Opts& o) {
  Store st = Store::open(o.dir, store::OpenMode::kReadOnly);
  const auto list = st.list_sessions();
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& s : list)
      j.push_back(s.to_json());
    print(dump_store_json(j, "kloop sessions") + "\n");
    return;
  }
  // Names are never cut: the operator and provider/model columns are as wide as their longest
  // value. `kind` tells optimize sessions from checker-coverage runs (store::session_kind).
  TextScrub text("kloop sessions");
  struct Row {
    const store::SessionSummary* s;
    std::string op, pm, started;
  };
  std::vector<Row> rows;
  std::size_t op_w = text_width("operator"), pm_w = text_width("provider/model");
  for (const auto& s : list) {
    const std::string id = fmt::format("session {} ", s.session.id);
    Row r{&s, text(s.session.operator_name, id + "operator"),
          text(s.session.provider, id + "provider") + "/" + text(s.session.model, id + "model"),
          text(s.session.started_at, id + "started_at")};
    op_w = std::max(op_w, text_width(r.op));
    pm_w = std::max(pm_w, text_width(r.pm));
    rows.push_back(std::move(r));
  }
  const auto pad = [](const std::string& t, std::size_t width) {
    return t + std::string(width - std::min(width, text_width(t)), ' ');
  };
  std::size_t sb_w = text_width("sandbox");
  for (const auto& s : list)
    sb_w = std::max(sb_w, text_width(store::sandbox_text(s.sandboxes)));
  std::string out = fmt::format("{:>5}  {:<16} {} {} {:>7}  {:<26} {:>14}  {}  {}\n", "id", "kind",
                                pad("operator", op_w), pad("provider/model", pm_w), "budget",
                                "verdict", "best speed-up", pad("sandbox", sb_w), "date");
  for (const auto& [s, op, pm, started] : rows) {
    const std::string verdict =
        s->decision ? std::string(store::name(*s->decision))
                    : (s->session.verdict ? std::string(store::name(*s->session.verdict))
                                          : std::string(store::name(s->session.status)));
    out += fmt::format("{:>5}  {:<16} {} {} {:>7}  {:<26} {:>14}  {}  {}\n", s->session.id,
                       store::session_kind(s->session), pad(op, op_w), pad(pm, pm_w),
                       fmt::format("{}/{}", s->iterations, s->session.budget), verdict,
                       fmt_opt(s->best_speedup, "{:.2f}x"),
                       pad(text(store::sandbox_text(s->sandboxes),
                                fmt::format("session {} sandbox", s->session.id)),
                           sb_w),
                       started);
  }
  text.print_all(out);
}

// The benchmark gate's per-state decisions of one candidate (evidence "summary": shape-states
// faster, indistinguishable and slower than the baseline beyond the A/A noise floor, and the
// promotion rule's clears_noise_floor).
struct BenchmarkStates {
  std::int64_t faster = 0, indistinguishable = 0, slower = 0;
  std::optional<bool> clears_noise_floor; // nullopt: not recorded
};

// The states of `c`; nullopt when its benchmark gate recorded no summary (not run, or a session
// recorded before the summary existed) or the counts are not integers (an edited row).
std::optional<BenchmarkStates> benchmark_states(const store::CandidateDetail& c) {
  const store::GateRecord* g = c.gate("benchmark");
  if (g == nullptr) return std::nullopt;
  evaluator::evidence::Problems problems; // the schema of evaluator/evidence.h
  const auto ev = evaluator::evidence::BenchmarkEvidence::read(g->evidence, problems);
  for (const auto& p : problems)
    if (p.rfind("summary.", 0) == 0) return std::nullopt; // an edited row: no counts to trust
  if (!ev.summary) return std::nullopt;
  return BenchmarkStates{ev.summary->faster, ev.summary->indistinguishable, ev.summary->slower,
                         ev.summary->clears_noise_floor};
}

// The frozen candidate's line of `kloop show`: why it was frozen (the benchmark states and
// whether they clear the noise floor, which the freeze ranks first), or that no states were
// recorded.
std::string frozen_text(const store::CandidateDetail& c) {
  const auto b = benchmark_states(c);
  if (!b) return "    frozen for the holdout; its benchmark gate recorded no per-state summary\n";
  const std::string counts = fmt::format(
      "{} shape-states faster than the baseline beyond the A/A noise floor, {} slower, {} "
      "indistinguishable",
      b->faster, b->slower, b->indistinguishable);
  if (!b->clears_noise_floor)
    return fmt::format("    frozen for the holdout: {}; clears_noise_floor not recorded\n", counts);
  return fmt::format("    frozen for the holdout: {}; {} the noise floor (clears_noise_floor {}: "
                     "the promotion rule needs at least one state faster and none slower)\n",
                     counts, *b->clears_noise_floor ? "clears" : "does NOT clear",
                     *b->clears_noise_floor);
}

// `kloop show`'s lines on how a session ended and what it spent: the error that ended it
// `failed` (params "failure"), its tokens (iterations whose usage made no sense are named as
// uncounted), and how its candidates were built (sandbox kinds).
std::string session_end_text(const store::SessionDetail& d, TextScrub& text) {
  std::string out;
  const auto& p = d.session.params;
  if (p.is_object() && p.contains("failure") && p["failure"].is_object())
    out += fmt::format(
        "ended failed: {}\n",
        text(store::json_string(p["failure"].value("error", nlohmann::json())), "session failure"));
  const int unknown = d.unknown_usage_iterations();
  if (d.tokens() > 0 || unknown > 0)
    out += fmt::format("tokens: {} reported{}\n", d.tokens(),
                       unknown == 0 ? ""
                                    : fmt::format(", plus {} iteration(s) whose usage made no "
                                                  "sense (unknown, not counted)",
                                                  unknown));
  out += fmt::format("sandbox: {}\n", d.sandboxes().empty() ? std::string("no candidate was built")
                                                            : store::sandbox_text(d.sandboxes()));
  return out;
}

void cmd_show(const Opts& o) {
  Store st = Store::open(o.dir, store::OpenMode::kReadOnly);
  const auto d = st.load_session(o.id);
  const std::string what = fmt::format("kloop show: session {}", o.id);
  if (o.json) {
    print(dump_store_json(d.to_json(), what) + "\n");
    return;
  }
  TextScrub text(what);
  const auto& s = d.session;
  const auto field = [&](const std::string& value, const char* name) {
    return text(value, fmt::format("session {} {}", s.id, name));
  };
  std::string out;
  out += fmt::format("session {} {} (contract {}), {}/{}, budget {}, seed {}, status {}, "
                     "verdict {}\n",
                     s.id, field(s.operator_name, "operator"),
                     field(s.contract_version, "contract_version"), field(s.provider, "provider"),
                     field(s.model, "model"), s.budget, s.seed, store::name(s.status),
                     s.verdict ? store::name(*s.verdict) : "none");
  out += fmt::format("kloop {} ({}), toolkit {}, driver {}, device {}, started {}\n",
                     field(s.kloop_version, "kloop_version"), field(s.kloop_commit, "kloop_commit"),
                     field(s.toolkit_version, "toolkit_version"),
                     s.driver_version.empty() ? "none" : field(s.driver_version, "driver_version"),
                     s.device_name.empty() ? "none" : field(s.device_name, "device_name"),
                     field(s.started_at, "started_at"));
  out += session_resources_text(s);
  out += session_end_text(d, text);
  if (store::session_kind(s) == "checker-coverage") out += store::checker_coverage_text(d);
  // The candidate frozen for the holdout: the promotion decision's, else the holdout run's.
  std::optional<std::int64_t> frozen;
  if (d.promotion && d.promotion->candidate_id)
    frozen = d.promotion->candidate_id;
  else if (!d.holdout_runs.empty())
    frozen = d.holdout_runs.back().candidate_id;
  for (const auto& it : d.iterations) {
    out += fmt::format("iteration {} ({:.1f} s)\n", it.iteration.index + 1,
                       it.iteration.wall_ms / 1000);
    if (it.iteration.notes.is_object() && it.iteration.notes.contains("usage_invalid"))
      out += fmt::format("  provider usage made no sense (tokens unknown, not counted): {}\n",
                         text(store::json_string(it.iteration.notes["usage_invalid"]),
                              fmt::format("iteration {} usage", it.iteration.index + 1)));
    for (const auto& c : it.candidates) {
      // The interval is the benchmark gate's within-run 95 % interval of the geometric mean
      // (measurement noise of this run; another run or GPU can land outside it).
      std::string line = fmt::format(
          "  candidate {}: {} speed-up {} [{}, {}] (within-run 95 %)", c.candidate.id,
          store::name(c.candidate.verdict), fmt_opt(c.candidate.speedup, "{:.2f}x"),
          fmt_opt(c.candidate.speedup_lo, "{:.2f}"), fmt_opt(c.candidate.speedup_hi, "{:.2f}"));
      if (const auto b = benchmark_states(c))
        line += fmt::format(", states {} faster / {} indistinguishable / {} slower", b->faster,
                            b->indistinguishable, b->slower);
      out += line + "\n";
      if (frozen == c.candidate.id) out += frozen_text(c);
      // How it was built (the build gate's evidence); nothing for a candidate never built.
      if (const std::string sandbox = c.sandbox(); !sandbox.empty())
        out += "    built in sandbox " +
               text(sandbox, fmt::format("candidate {} sandbox", c.candidate.id)) + "\n";
      const std::string cand = fmt::format("candidate {}", c.candidate.id);
      for (const auto& g : c.gates) {
        const std::string gate = text(g.name, cand + " gate name");
        out += fmt::format("    {:<12} {:<12} {}\n", gate, store::name(g.status),
                           text(g.reason, fmt::format("{} gate {} reason", cand, gate)));
      }
      for (const auto& tc : c.cases)
        if (tc.status != store::GateCode::kPass)
          out += fmt::format(
              "    failing case [{}] {}: {} {}\n", text(tc.gate, cand + " case gate"),
              text(tc.name, cand + " case name"), store::name(tc.status),
              dump_store_json(tc.detail,
                              fmt::format("{}, candidate {}, case {}", what, c.candidate.id,
                                          store::replace_invalid_utf8(tc.name)),
                              -1));
      out += candidate_resources_text(c);
      out += store::candidate_phase_text(c);
    }
  }
  out += store::phase_summary_text(d); // where the time went (store/phase_view.h)
  out += store::holdout_text(d);       // store/text_view.h, shared with the HTML report
  if (d.promotion)
    out +=
        fmt::format("promotion: {} (candidate {}): {}\n", store::name(d.promotion->decision),
                    d.promotion->candidate_id ? std::to_string(*d.promotion->candidate_id) : "none",
                    text(d.promotion->reason, "promotion reason"));
  else
    out += "promotion: none recorded\n";
  text.print_all(out);
}

int cmd_verify(const Opts& o) {
  Store st = Store::open(o.dir, store::OpenMode::kReadOnly);
  const auto rep = st.verify();
  for (const auto& m : rep.missing)
    print(fmt::format("missing blob {}\n", m));
  for (const auto& a : rep.altered)
    print(fmt::format("altered blob {}\n", a));
  if (rep.integrity != "ok") print(fmt::format("database integrity_check: {}\n", rep.integrity));
  print(verify_chain_text(rep.chains));
  for (const auto& f : rep.orphans)
    print(fmt::format("orphan blob file blobs/{} (no row registers it)\n", f));
  // Blobs are content-addressed and re-hashed; rows are checked by their hash chains.
  print(fmt::format("{}: {} blobs checked, {} missing, {} altered, database structure {} (SQLite "
                    "integrity_check), row chains {}, {} orphan file(s) ({} bytes)\n",
                    st.dir(), rep.blobs_checked, rep.missing.size(), rep.altered.size(),
                    rep.integrity == "ok" ? "ok" : "damaged", rep.chains.ok() ? "ok" : "BROKEN",
                    rep.orphans.size(), rep.orphan_bytes));
  if (!rep.orphans.empty())
    print("orphan files are blobs of a step that never committed (a killed run writes blobs "
          "before the rows naming them) or of deleted rows; no record names them, so they are "
          "not damage: they can be deleted\n");
  return rep.ok() ? kExitOk : kExitCouldNotFinish; // a damaged store (README exit codes)
}

int cmd_replay(const Opts& o) {
  Store st = Store::open(o.dir, store::OpenMode::kReadOnly);
  if (const auto rec = st.load_session(o.id).session; store::session_kind(rec) != "optimize")
    throw UsageError(fmt::format(
        "session {} is a {} run: it recorded mutants of the in-tree baseline, not candidates, so "
        "there is nothing to replay; `{}` shows it, and `kloop checker-coverage rmsnorm "
        "--check-record FILE` re-runs the analysis against a recorded score",
        o.id, store::session_kind(rec), store::kloop_command(fmt::format("show {}", o.id), o.dir)));
  const auto* fn = store::default_reevaluator();
  const auto rows = store::replay_session(st, o.id, fn);
  if (o.json) {
    print(dump_store_json({{"session", o.id},
                           {"reevaluated", fn != nullptr},
                           {"candidates", store::to_json(rows)}},
                          fmt::format("kloop replay: session {}", o.id)) +
          "\n");
  } else {
    if (!fn)
      print("replay: re-evaluation requires the evaluator hookup (not wired in this build); "
            "showing recorded verdicts\n");
    for (const auto& r : rows) {
      std::string line =
          fmt::format("iteration {} candidate {}: recorded {}", r.iteration_index + 1,
                      r.candidate_id, store::name(r.recorded));
      if (r.now)
        line += fmt::format(", now {}{}", store::name(*r.now), r.changed ? " (CHANGED)" : "");
      for (const auto& g : r.changed_gates)
        line += "; " + g;
      if (!r.newly_run_gates.empty())
        line +=
            fmt::format("; {} gate(s) newly run{}: {}", r.newly_run_gates.size(),
                        r.newly_failed ? " (NEW FAILURE)" : "", fmt::join(r.newly_run_gates, "; "));
      if (!r.not_rerun_gates.empty())
        line += fmt::format("; {} gate(s) not re-run here: {}", r.not_rerun_gates.size(),
                            fmt::join(r.not_rerun_gates, "; "));
      if (fn && !r.error.empty()) line += "; error: " + r.error;
      print(line + "\n");
    }
  }
  if (!fn) return kExitCouldNotFinish;
  // A changed result, or a gate that ran for the first time and failed, is evidence against the
  // record (1); gates that ran for the first time and passed are not.
  if (store::replay_found_regression(rows)) return kExitRejected;
  bool partial = false;
  for (const auto& r : rows)
    partial |= !r.not_rerun_gates.empty() || !r.error.empty();
  // Gates that could not run here (no GPU) or a candidate that could not be re-evaluated: the
  // replay did not re-check everything, so it could not finish (3), as optimize without a device.
  return partial ? kExitCouldNotFinish : kExitOk;
}

} // namespace

void register_store_commands(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Opts>();
  int* ec = &exit_code;

  auto* sessions = app.add_subcommand("sessions", "List stored sessions");
  add_store_flag(sessions, *o);
  sessions->add_flag("--json", o->json, "Print JSON");
  sessions->callback([o] { cmd_sessions(*o); });

  auto* show = app.add_subcommand("show", "Show one session: iterations, gates, failing cases");
  add_store_flag(show, *o);
  show->add_option("ID", o->id, "Session id")->required()->check(session_id_check());
  show->add_flag("--json", o->json, "Print JSON");
  show->callback([o] { cmd_show(*o); });

  auto* compare = app.add_subcommand(
      "compare", "Compare sessions grouped by provider/model, or generators (--by generator)");
  add_store_flag(compare, *o);
  compare->add_option("IDS", o->ids, "Session ids")->check(session_id_check());
  compare->add_flag("--json", o->json, "Print JSON");
  auto by = std::make_shared<GeneratorCompareArgs>();
  add_generator_compare_flags(compare, *by);
  compare->callback([o, by] {
    if (!by->by.empty()) {
      if (!o->ids.empty())
        throw UsageError("compare --by generator compares every optimize session of the store; "
                         "leave out the session ids (or drop --by to compare those sessions)");
      if (!by->html.empty()) check_output_path(by->html, "--html");
      const nlohmann::json cmp = generator_comparison(o->dir, *by);
      if (!by->html.empty()) {
        std::ofstream out = open_output(by->html, "--html");
        write_output(out, store::render_generator_comparison_html(cmp), by->html);
      }
      print(o->json ? dump_store_json(cmp, "kloop compare --by generator") + "\n"
                    : store::format_generator_comparison(cmp));
      if (!by->html.empty() && !o->json) print(fmt::format("wrote {}\n", by->html));
      return;
    }
    if (o->ids.empty())
      throw UsageError("compare needs session ids (kloop compare ID...) or --by generator");
    Store st = Store::open(o->dir, store::OpenMode::kReadOnly);
    const auto cmp = store::compare_sessions(st, o->ids);
    print(o->json ? dump_store_json(cmp, "kloop compare") + "\n" : store::format_compare(cmp));
  });

  auto* replay = app.add_subcommand("replay", "Re-evaluate stored candidates; report changes");
  add_store_flag(replay, *o);
  replay->add_option("ID", o->id, "Session id")->required()->check(session_id_check());
  replay->add_flag("--json", o->json, "Print JSON");
  replay->callback([o, ec] { *ec = cmd_replay(*o); });

  auto* report = app.add_subcommand("report", "Write a self-contained HTML report of a session");
  add_store_flag(report, *o);
  report->add_option("ID", o->id, "Session id")->required()->check(session_id_check());
  report->add_option("--html", o->file, "Output HTML file")->required();
  report->callback([o] {
    check_output_path(o->file, "--html");
    Store st = Store::open(o->dir, store::OpenMode::kReadOnly);
    const std::string html = store::render_html_report(st.load_session(o->id));
    std::ofstream out = open_output(o->file, "--html");
    write_output(out, html, o->file);
    print(fmt::format("wrote {}\n", o->file));
  });

  auto* storecmd = app.add_subcommand("store", "Store maintenance");
  storecmd->require_subcommand(1);
  auto* verify = storecmd->add_subcommand(
      "verify", "Re-hash every blob, check every session's row chain; exit 3 on damage");
  add_store_flag(verify, *o);
  verify->callback([o, ec] { *ec = cmd_verify(*o); });
  register_store_merge(storecmd, exit_code); // cmd_merge.cpp

  auto* keys = app.add_subcommand("keys", "Signing keys");
  keys->require_subcommand(1);
  auto* gen = keys->add_subcommand("generate", "Generate an Ed25519 key pair");
  gen->add_option("--out", o->out, "Secret key file to create (mode 0600)")->required();
  gen->callback([o] {
    std::error_code err;
    if (std::filesystem::exists(o->out, err))
      throw UsageError(fmt::format("--out {} exists; kloop never overwrites a key file, pick a "
                                   "new file name",
                                   o->out));
    check_output_path(o->out, "--out");
    const auto kp = store::generate_keypair();
    store::write_secret_key(o->out, kp);
    print(fmt::format("wrote secret key {} (keep it private)\nregistry entry: "
                      "{{\"{}\": \"{}\"}}\n",
                      o->out, kp.key_id, kp.public_hex));
  });

  auto* receipt = app.add_subcommand("receipt", "Promotion receipts");
  receipt->require_subcommand(1);
  auto* sign = receipt->add_subcommand("sign", "Sign the promotion receipt of a session");
  add_store_flag(sign, *o);
  sign->add_option("ID", o->id, "Session id")->required()->check(session_id_check());
  sign->add_option("--key", o->key, "Secret key file from `kloop keys generate`")->required();
  sign->add_option("--reviewer", o->reviewer, "Reviewer identity")->required();
  sign->add_option("--out", o->out, "Write the receipt here (default stdout)");
  sign->callback([o, ec] {
    if (o->reviewer.find_first_not_of(" \t\r\n\v\f") == std::string::npos)
      throw UsageError("--reviewer is empty; give the reviewer's identity (a name or e-mail), "
                       "which the receipt records as approval_identity.reviewer");
    store::KeyPair kp;
    try {
      kp = store::read_secret_key(o->key);
    } catch (const store::StoreError& e) { // unreadable or not a key file: the caller's input
      throw UsageError(fmt::format("--key {}: {}", o->key, e.what()));
    }
    if (!o->out.empty()) check_output_path(o->out, "--out"); // before anything is recorded
    if (!std::filesystem::exists(std::filesystem::path(o->dir) / "kloop.db")) {
      std::fprintf(stderr,
                   "kloop receipt sign: no store at %s (kloop.db missing); pass --store "
                   "DIR of an existing store\n",
                   o->dir.c_str());
      *ec = kExitUsage;
      return;
    }
    Store st = Store::open(o->dir);
    nlohmann::json r;
    try {
      r = store::sign_session_receipt(st, o->id, kp, o->reviewer);
    } catch (const store::StoreError& e) {
      // No such session, not promoted or an empty rollout (store::Refused): usage (2). Missing,
      // altered or self-contradicting evidence: the store is damaged (3).
      std::fprintf(stderr, "kloop receipt sign: %s\n", e.what());
      *ec = exit_code_of(e);
      return;
    }
    if (o->out.empty()) {
      print(r.dump(2) + "\n");
    } else {
      std::ofstream out = open_output(o->out, "--out");
      write_output(out, r.dump(2) + "\n", o->out);
      print(fmt::format("wrote {}\n", o->out));
    }
  });
  auto* rverify = receipt->add_subcommand("verify", "Verify a receipt against a key registry");
  rverify->add_option("FILE", o->file, "Receipt JSON")->required();
  rverify->add_option("--keys", o->keys, "Key registry JSON {key_id: public_key_hex}")->required();
  rverify->callback([o, ec] {
    const auto receipt_json = read_json(o->file, "receipt", "FILE"); // FILE first, as typed
    const auto registry = read_json(o->keys, "key registry", "--keys");
    const auto check = store::verify_receipt(receipt_json, registry);
    std::fprintf(check.ok ? stdout : stderr, "%s\n", check.message.c_str());
    *ec = check.ok ? kExitOk : kExitRejected;
  });
}

} // namespace kloop::app
