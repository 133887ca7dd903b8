// The store CLI (app/cmd_store.cpp, via the store_cli test executable) end to end, and the HTML
// report rendered in headless Chromium: screenshot is a non-blank PNG, the DOM holds the charts.
// Chromium tests skip (GTEST_SKIP) when `chromium` is not installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <sqlite3.h>

#include "store/sqlite.h"
#include "store/store.h"
#include "tests/store/fixture.h"
#include "tests/support/run_command.h"

namespace kloop::store {
namespace {

using testing::TempDir;

using Proc = test_support::CommandResult;

// `cmd` through /bin/sh, stdout and stderr together.
Proc sh(const std::string& cmd) {
  return test_support::run_command(cmd + " 2>&1");
}

std::string bin(const char* name) {
  return test_support::binary_path(name);
}

std::string read(const std::string& path) {
  return test_support::read_file(path);
}

TEST(StoreCliTest, SessionsShowCompareVerifyAndReceiptRoundTrip) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const std::string cli = bin("store_cli") + " ";
  const Proc list = sh(cli + "sessions --store " + s);
  EXPECT_EQ(list.rc, 0) << list.out;
  EXPECT_NE(list.out.find("offline/builtin-v1"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("1.50x"), std::string::npos) << list.out;
  const Proc show = sh(cli + "show 1 --json --store " + s);
  ASSERT_EQ(show.rc, 0) << show.out;
  const auto j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["iterations"].size(), 3u);
  EXPECT_EQ(j["promotion"]["decision"], "promoted");
  // The text view numbers iterations from 1, as `kloop optimize` prints them ([1/3] .. [3/3]),
  // and so does the JSON ("iteration"; the store keeps its 0-based idx).
  const Proc text = sh(cli + "show 1 --store " + s);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("\niteration 1 ("), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\niteration 3 ("), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("\niteration 0 ("), std::string::npos) << text.out;
  EXPECT_EQ(j["iterations"][0]["iteration"], 1);
  EXPECT_FALSE(j["iterations"][0].contains("index"));
  const Proc cmp = sh(cli + "compare 1 --json --store " + s);
  ASSERT_EQ(cmp.rc, 0) << cmp.out;
  EXPECT_EQ(nlohmann::json::parse(cmp.out)["groups"][0]["sessions"][0]["iterations_to_first_pass"],
            3);
  EXPECT_EQ(sh(cli + "store verify --store " + s).rc, 0);
  EXPECT_EQ(sh(cli + "show 9 --store " + s).rc, 2); // unknown id: a usage error, clearly named
  // With --json the error is also one JSON document on stdout (stderr is dropped here).
  const Proc missing = sh("(" + cli + "show 9 --json --store " + s + " 2>/dev/null)");
  EXPECT_EQ(missing.rc, 2);
  const auto err = nlohmann::json::parse(missing.out, nullptr, false);
  ASSERT_TRUE(err.is_object()) << missing.out;
  EXPECT_NE(err.value("error", std::string()).find("no session 9"), std::string::npos)
      << missing.out;
  EXPECT_EQ(err.value("exit_code", 0), 2);
  // An ID beyond int64 is refused as typed (CLI11 alone would clamp it to INT64_MAX).
  const Proc huge = sh(cli + "show 99999999999999999999 --store " + s);
  EXPECT_EQ(huge.rc, 2);
  EXPECT_NE(huge.out.find("got '99999999999999999999'"), std::string::npos) << huge.out;
  EXPECT_EQ(huge.out.find("9223372036854775807 in"), std::string::npos) << huge.out;
  EXPECT_EQ(sh(cli + "compare 1 0 --store " + s).rc, 2);
  // A leading zero is refused, not read as octal (010 would be session 8).
  const Proc octal = sh(cli + "show 010 --store " + s);
  EXPECT_EQ(octal.rc, 2);
  EXPECT_NE(octal.out.find("got '010'"), std::string::npos) << octal.out;
  // Usage errors with --json also give the JSON document on stdout.
  const Proc usage = sh("(" + cli + "show abc --json --store " + s + " 2>/dev/null)");
  EXPECT_EQ(usage.rc, 2);
  const auto uerr = nlohmann::json::parse(usage.out, nullptr, false);
  ASSERT_TRUE(uerr.is_object()) << usage.out;
  EXPECT_NE(uerr.value("error", std::string()).find("got 'abc'"), std::string::npos) << usage.out;
  // A message with bytes that are not UTF-8 (here the store path) still gives valid JSON; a store
  // that does not exist is a usage error.
  const Proc non_utf8 = sh("(" + cli + "show 1 --json --store \"$(printf '" + t.path() +
                           "/bad\\377dir')\" 2>/dev/null)");
  EXPECT_EQ(non_utf8.rc, 2) << non_utf8.out;
  EXPECT_TRUE(nlohmann::json::parse(non_utf8.out, nullptr, false).is_object()) << non_utf8.out;
  // Receipt: generate a key, sign, verify; a tampered receipt fails with exit 1.
  const Proc gen = sh(cli + "keys generate --out " + t.path() + "/key.json");
  ASSERT_EQ(gen.rc, 0) << gen.out;
  const auto key = nlohmann::json::parse(read(t.path() + "/key.json"));
  std::ofstream(t.path() + "/reg.json") << nlohmann::json{{key["key_id"], key["public_key"]}};
  ASSERT_EQ(sh(cli + "receipt sign 1 --key " + t.path() + "/key.json --reviewer bob --out " +
               t.path() + "/r.json --store " + s)
                .rc,
            0);
  const Proc ok =
      sh(cli + "receipt verify " + t.path() + "/r.json --keys " + t.path() + "/reg.json");
  EXPECT_EQ(ok.rc, 0) << ok.out;
  auto r = nlohmann::json::parse(read(t.path() + "/r.json"));
  r["payload"]["approval_identity"]["reviewer"] = "mallory";
  std::ofstream(t.path() + "/bad.json") << r.dump();
  const Proc bad =
      sh(cli + "receipt verify " + t.path() + "/bad.json --keys " + t.path() + "/reg.json");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("payload hash mismatch"), std::string::npos) << bad.out;
  // A damaged blob makes `store verify` exit 3 (a damaged store, README's exit-code table, as
  // receipt sign, export and replay exit for it) and name it.
  const std::string src = j["iterations"][0]["candidates"][0]["source_sha256"];
  std::filesystem::remove(s + "/blobs/" + src.substr(0, 2) + "/" + src.substr(2));
  const Proc ver = sh(cli + "store verify --store " + s);
  EXPECT_EQ(ver.rc, 3);
  EXPECT_NE(ver.out.find("missing blob " + src), std::string::npos) << ver.out;
}

// Edits the store's database behind its back (a damaged or hand-edited row).
void edit_db(const std::string& store_dir, const std::string& sql) {
  Db("file:" + store_dir + "/kloop.db", SQLITE_OPEN_READWRITE, "test edit").exec(sql);
}

// `kloop show` prints the sealed-holdout run on one line: candidate, commitment (short hash) and
// suite, status, cases passed of the total, the commitment check and the retirement; --json
// carries the same; a commitment without a run says "not run".
TEST(StoreCliTest, ShowPrintsTheHoldoutRun) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const std::string cli = bin("store_cli") + " ";
  const Proc text = sh(cli + "show 1 --store " + s);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("\nholdout: candidate 3, commitment eeeeeeeeeeee (suite h1), pass, "
                          "48/48 cases passed, commitment verified, suite retired\n"),
            std::string::npos)
      << text.out;
  const Proc js = sh("(" + cli + "show 1 --json --store " + s + " 2>/dev/null)");
  ASSERT_EQ(js.rc, 0) << js.out;
  const auto j = nlohmann::json::parse(js.out);
  ASSERT_EQ(j["holdout_runs"].size(), 1u) << j["holdout_runs"].dump();
  const auto& run = j["holdout_runs"][0];
  EXPECT_EQ(run["candidate_id"], 3);
  EXPECT_EQ(run["commitment_sha256"], std::string(64, 'e'));
  EXPECT_EQ(run["suite_version"], "h1");
  EXPECT_EQ(run["status"], "pass");
  EXPECT_EQ(run["passed"], 48);
  EXPECT_EQ(run["failed"], 0);
  EXPECT_EQ(run["commitment_verified"], true);
  EXPECT_EQ(run["retired"], true);
  EXPECT_TRUE(run["report_sha256"].is_string()) << run.dump();
  ASSERT_EQ(j["holdout_commitments"].size(), 1u);
  EXPECT_EQ(j["holdout_commitments"][0]["suite_version"], "h1");
  // The commitment was recorded but the holdout never ran (a session that stopped before it).
  edit_db(s, "DELETE FROM holdout_runs");
  const Proc none = sh(cli + "show 1 --store " + s);
  ASSERT_EQ(none.rc, 0) << none.out;
  EXPECT_NE(none.out.find("\nholdout: commitment eeeeeeeeeeee (suite h1), not run\n"),
            std::string::npos)
      << none.out;
}

// Stored text that is not valid UTF-8 (a hand-edited or damaged row) no longer aborts the JSON
// views with the serializer's type_error 316: the output is valid JSON with U+FFFD in place of
// the bad bytes, and stderr names the field and what to check.
TEST(StoreCliTest, DamagedTextIsPrintedWithReplacementAndANote) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 2 --finish").rc, 0);
  edit_db(s, "UPDATE sessions SET model = CAST(X'6275696c74ff' AS TEXT); "
             "UPDATE test_cases SET detail_json = CAST(X'7bff7d' AS TEXT) WHERE status != 0");
  const std::string cli = bin("store_cli") + " ";
  const std::string err = t.path() + "/err.txt";
  const std::pair<std::string, std::string> views[] = {{"sessions --json", "/0/model"},
                                                       {"show 1 --json", "/session/model"},
                                                       {"compare 1 --json", "/groups/0/model"}};
  for (const auto& [cmd, field] : views) {
    const Proc p = sh("(" + cli + cmd + " --store " + s + " 2>" + err + ")");
    EXPECT_EQ(p.rc, 0) << cmd << ": " << p.out;
    const auto j = nlohmann::json::parse(p.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << cmd << ": " << p.out;
    EXPECT_NE(p.out.find("built\xEF\xBF\xBD"), std::string::npos) << cmd << ": " << p.out;
    const std::string note = read(err);
    EXPECT_NE(note.find("not valid UTF-8"), std::string::npos) << cmd << ": " << note;
    EXPECT_NE(note.find(field), std::string::npos) << cmd << ": " << note;
    EXPECT_NE(note.find("kloop store verify"), std::string::npos) << cmd << ": " << note;
    EXPECT_EQ(note.find("type_error"), std::string::npos) << cmd << ": " << note;
    if (cmd.rfind("show", 0) == 0) { // the damaged failing case is named too
      EXPECT_NE(note.find("/failing_cases/0/detail"), std::string::npos) << note;
    }
  }
  // The text view prints the damaged failing case as well.
  const Proc text = sh(cli + "show 1 --store " + s);
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("failing case [correctness] width_127: fail \"{\xEF\xBF\xBD}\""),
            std::string::npos)
      << text.out;
}

// The text views (`kloop show`, `kloop sessions`) print damaged stored text with U+FFFD as the
// JSON views do, never the raw bytes, and say so on stderr naming the fields.
TEST(StoreCliTest, TextViewsReplaceDamagedTextAndSaySo) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 2 --finish").rc, 0);
  edit_db(s, "UPDATE sessions SET model = CAST(X'6275696c74ff' AS TEXT), operator = "
             "CAST(X'77fe72' AS TEXT); UPDATE gate_results SET reason = CAST(X'6f6bc3' AS TEXT) "
             "WHERE name = 'build' AND candidate_id = 2");
  const std::string cli = bin("store_cli") + " ";
  const std::string err = t.path() + "/err.txt";
  for (const std::string cmd : {"show 1", "sessions"}) {
    const Proc p = sh("(" + cli + cmd + " --store " + s + " 2>" + err + ")");
    EXPECT_EQ(p.rc, 0) << cmd << ": " << p.out;
    EXPECT_NE(p.out.find("built\xEF\xBF\xBD"), std::string::npos) << cmd << ": " << p.out;
    EXPECT_NE(p.out.find("w\xEF\xBF\xBDr"), std::string::npos) << cmd << ": " << p.out;
    EXPECT_EQ(p.out.find('\xff'), std::string::npos) << cmd;
    EXPECT_EQ(p.out.find('\xfe'), std::string::npos) << cmd;
    EXPECT_NO_THROW((void)nlohmann::json(p.out).dump()) << cmd << ": not valid UTF-8";
    const std::string note = read(err);
    EXPECT_NE(note.find("not valid UTF-8"), std::string::npos) << cmd << ": " << note;
    EXPECT_NE(note.find("session 1 model"), std::string::npos) << cmd << ": " << note;
    EXPECT_NE(note.find("session 1 operator"), std::string::npos) << cmd << ": " << note;
    EXPECT_NE(note.find("kloop store verify"), std::string::npos) << cmd << ": " << note;
  }
  const Proc show = sh("(" + cli + "show 1 --store " + s + " 2>" + err + ")");
  EXPECT_NE(show.out.find("    build        pass         ok\xEF\xBF\xBD\n"), std::string::npos)
      << show.out;
  EXPECT_NE(read(err).find("candidate 2 gate build reason"), std::string::npos) << read(err);
  // An intact store prints no note.
  const std::string clean = t.path() + "/clean";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + clean + " 2 --finish").rc, 0);
  const Proc ok = sh("(" + cli + "show 1 --store " + clean + " 2>" + err + ")");
  EXPECT_EQ(ok.rc, 0) << ok.out;
  EXPECT_EQ(read(err), "");
}

// Stored text with control bytes (an ESC sequence in a gate reason or a model name) is printed as
// escapes by the text views: it cannot recolour or clear the user's terminal.
TEST(StoreCliTest, TextViewsEscapeControlBytes) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 2 --finish").rc, 0);
  edit_db(s, "UPDATE sessions SET model = 'm' || char(27) || '[2J'; UPDATE gate_results SET "
             "reason = 'x' || char(27) || '[32mPASS' WHERE name = 'build' AND candidate_id = 2");
  const std::string cli = bin("store_cli") + " ";
  for (const std::string cmd : {"show 1", "sessions"}) {
    const Proc p = sh("(" + cli + cmd + " --store " + s + " 2>/dev/null)");
    EXPECT_EQ(p.rc, 0) << cmd << ": " << p.out;
    EXPECT_EQ(p.out.find('\x1b'), std::string::npos) << cmd << ": " << p.out;
    EXPECT_NE(p.out.find("m\\x1b[2J"), std::string::npos) << cmd << ": " << p.out;
  }
  const Proc show = sh("(" + cli + "show 1 --store " + s + " 2>/dev/null)");
  EXPECT_NE(show.out.find("x\\x1b[32mPASS"), std::string::npos) << show.out;
}

// `kloop show` says why the frozen candidate was frozen: the benchmark gate's shape-state counts
// (faster / indistinguishable / slower beyond the A/A noise floor) and clears_noise_floor, which
// were only in --json; every candidate's line carries its counts.
TEST(StoreCliTest, ShowSaysWhyTheCandidateWasFrozen) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const auto summary = [&](int candidate, int faster, int same, int slower, const char* clears) {
    edit_db(s, fmt::format("UPDATE gate_results SET evidence_json = json_set(evidence_json, "
                           "'$.summary', json('{{\"faster\":{},\"indistinguishable\":{},"
                           "\"slower\":{},\"clears_noise_floor\":{}}}')) WHERE name = "
                           "'benchmark' AND candidate_id = {}",
                           faster, same, slower, clears, candidate));
  };
  summary(2, 1, 75, 2, "false");
  summary(3, 4, 74, 0, "true");
  const std::string cli = bin("store_cli") + " ";
  Proc text = sh(cli + "show 1 --store " + s);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("  candidate 2: reject speed-up 1.25x [1.20, 1.30] (within-run 95 %), "
                          "states 1 faster / 75 indistinguishable / 2 slower\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("  candidate 3: pass speed-up 1.50x [1.45, 1.55] (within-run 95 %), "
                          "states 4 faster / 74 indistinguishable / 0 slower\n    frozen for the "
                          "holdout: 4 shape-states faster than the baseline beyond the A/A noise "
                          "floor, 0 slower, 74 indistinguishable; clears the noise floor "
                          "(clears_noise_floor true: "),
            std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("frozen for the holdout"), text.out.rfind("frozen for the holdout"))
      << "only the frozen candidate gets the line\n"
      << text.out;
  // Candidate 1 recorded no summary: no counts on its line.
  EXPECT_NE(text.out.find("  candidate 1: reject speed-up 1.00x [0.95, 1.05] (within-run 95 %)\n"),
            std::string::npos)
      << text.out;
  summary(3, 0, 76, 2, "false");
  text = sh(cli + "show 1 --store " + s);
  EXPECT_NE(text.out.find("frozen for the holdout: 0 shape-states faster than the baseline beyond "
                          "the A/A noise floor, 2 slower, 76 indistinguishable; does NOT clear "
                          "the noise floor (clears_noise_floor false: "),
            std::string::npos)
      << text.out;
  edit_db(s, "UPDATE gate_results SET evidence_json = json_remove(evidence_json, '$.summary') "
             "WHERE candidate_id = 3");
  text = sh(cli + "show 1 --store " + s);
  EXPECT_NE(text.out.find("  candidate 3: pass speed-up 1.50x [1.45, 1.55] (within-run 95 %)\n"
                          "    frozen for the holdout; its benchmark gate recorded no per-state "
                          "summary\n"),
            std::string::npos)
      << text.out;
}

// The HTML report carries the sealed holdout as `kloop show` does (full commitment hash, suite,
// status, cases passed/total, commitment verified, retired), and stored text that is not valid
// UTF-8 is written with U+FFFD, never as raw bytes.
TEST(StoreCliTest, HtmlReportHasTheHoldoutAndNoInvalidUtf8) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const std::string cli = bin("store_cli") + " ";
  const std::string out = t.path() + "/r.html";
  ASSERT_EQ(sh(cli + "report 1 --html " + out + " --store " + s).rc, 0);
  const std::string html = read(out);
  const auto table = html.find("<table id=\"holdout\">");
  ASSERT_NE(table, std::string::npos) << html;
  EXPECT_NE(html.find("<tr><td>3</td><td><code>" + std::string(64, 'e') +
                          "</code></td><td>h1</td><td>pass</td><td>48/48</td><td>yes</td>"
                          "<td>yes</td></tr>",
                      table),
            std::string::npos)
      << html.substr(table);
  // A commitment that never ran, and text with invalid UTF-8 bytes in the session row.
  edit_db(s, "DELETE FROM holdout_runs; UPDATE sessions SET model = CAST(X'6275696c74ff' AS "
             "TEXT), operator = CAST(X'77fe3c' AS TEXT)");
  ASSERT_EQ(sh(cli + "report 1 --html " + out + " --store " + s).rc, 0);
  const std::string damaged = read(out);
  EXPECT_NE(damaged.find("<td>none</td><td><code>" + std::string(64, 'e') +
                         "</code></td><td>h1</td><td>not run</td><td>-</td><td>-</td><td>-</td>"),
            std::string::npos)
      << damaged;
  EXPECT_EQ(damaged.find('\xff'), std::string::npos);
  EXPECT_EQ(damaged.find('\xfe'), std::string::npos);
  EXPECT_NE(damaged.find("built\xEF\xBF\xBD"), std::string::npos);
  EXPECT_NE(damaged.find("w\xEF\xBF\xBD&lt;"), std::string::npos); // replaced, then escaped
  // The whole page is valid UTF-8 (the serializer throws type_error 316 otherwise).
  EXPECT_NO_THROW((void)nlohmann::json(damaged).dump());
}

// `kloop sessions` never cuts a name (the operator and provider/model columns are as wide as
// their longest value) and marks checker-coverage runs (kind column, "kind" in --json).
TEST(StoreCliTest, SessionsShowsWholeNamesAndMarksCheckerCoverageRuns) {
  TempDir t;
  const std::string s = t.path() + "/s";
  {
    Store st = Store::open(s);
    SessionRecord opt{.operator_name = "weighted_rmsnorm_fused_residual",
                      .provider = "openai",
                      .model = "a-rather-long-model-name-2026-11-30",
                      .budget = 1};
    st.create_session(opt);
    st.finish_session(opt.id, SessionStatus::kCompleted, VerdictCode::kReject);
    SessionRecord cc{.operator_name = "weighted_rmsnorm",
                     .provider = std::string(kCheckerCoverageProvider),
                     .model = "in-tree baseline mutants",
                     .budget = 36};
    st.create_session(cc);
    st.finish_session(cc.id, SessionStatus::kCompleted, VerdictCode::kPass);
  }
  const std::string cli = bin("store_cli") + " ";
  const Proc list = sh(cli + "sessions --store " + s);
  ASSERT_EQ(list.rc, 0) << list.out;
  EXPECT_NE(list.out.find(" kind "), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("\n    1  optimize         weighted_rmsnorm_fused_residual "
                          "openai/a-rather-long-model-name-2026-11-30 "),
            std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("\n    2  checker-coverage weighted_rmsnorm                "
                          "checker-coverage/in-tree baseline mutants "),
            std::string::npos)
      << list.out;
  const Proc js = sh("(" + cli + "sessions --json --store " + s + " 2>/dev/null)");
  ASSERT_EQ(js.rc, 0) << js.out;
  const auto j = nlohmann::json::parse(js.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["kind"], "checker-coverage"); // newest first
  EXPECT_EQ(j[1]["kind"], "optimize");
  EXPECT_EQ(j[1]["operator"], "weighted_rmsnorm_fused_residual");
}

// A session recorded on a CPU-only machine (device gates not_run, pending_device_validation)
// replayed where those gates run: passing ones are listed as newly run, not as changed (exit 0);
// a newly run gate that fails is evidence against the candidate (exit 1), and says so.
TEST(StoreCliTest, ReplayListsNewlyRunGatesApartFromChangedOnes) {
  TempDir t;
  const std::string s = t.path() + "/s";
  {
    Store st = Store::open(s);
    SessionRecord rec{.operator_name = "weighted_rmsnorm", .provider = "offline", .budget = 1};
    st.create_session(rec);
    auto step = st.begin_step();
    IterationRecord it{.session_id = rec.id, .index = 0, .wall_ms = 50};
    step.add_iteration(it);
    CandidateRecord c{.iteration_id = it.id,
                      .source_sha256 = step.put_blob("k"),
                      .manifest_sha256 = step.put_blob("{}"),
                      .verdict = VerdictCode::kPendingDeviceValidation};
    step.add_candidate(c);
    int ordinal = 0;
    for (const char* name : {"contract", "build", "static"}) {
      GateRecord g{.candidate_id = c.id, .ordinal = ordinal++, .name = name};
      g.status = GateCode::kPass;
      step.add_gate(g);
    }
    for (const char* name : {"correctness", "sanitizer", "benchmark", "roofline"}) {
      GateRecord g{.candidate_id = c.id, .ordinal = ordinal++, .name = name};
      g.reason = "no device";
      step.add_gate(g);
    }
    step.commit();
    st.finish_session(rec.id, SessionStatus::kCompleted, VerdictCode::kPendingDeviceValidation);
  }
  const std::string cli = bin("store_cli") + " ";
  // Replayed on a machine without a GPU too: the device gates still did not run, so the replay
  // could not finish (3) and names them as not re-run.
  const Proc cpu = sh("KLOOP_TEST_REPLAY=cpu " + cli + "replay 1 --store " + s);
  EXPECT_EQ(cpu.rc, 3) << cpu.out;
  EXPECT_NE(cpu.out.find("4 gate(s) not re-run here: correctness: recorded not_run, not re-run "
                         "(no CUDA device);"),
            std::string::npos)
      << cpu.out;
  EXPECT_EQ(cpu.out.find("CHANGED"), std::string::npos) << cpu.out;
  const Proc pass = sh("KLOOP_TEST_REPLAY=pass " + cli + "replay 1 --store " + s);
  EXPECT_EQ(pass.rc, 0) << pass.out;
  EXPECT_NE(pass.out.find("recorded pending_device_validation, now pass; 4 gate(s) newly run: "
                          "correctness: recorded not_run, now pass; sanitizer: recorded not_run, "
                          "now pass;"),
            std::string::npos)
      << pass.out;
  EXPECT_EQ(pass.out.find("CHANGED"), std::string::npos) << pass.out;
  EXPECT_EQ(pass.out.find("->"), std::string::npos) << pass.out;
  const Proc pj =
      sh("(KLOOP_TEST_REPLAY=pass " + cli + "replay 1 --json --store " + s + " 2>/dev/null)");
  EXPECT_EQ(pj.rc, 0) << pj.out;
  const auto row = nlohmann::json::parse(pj.out)["candidates"][0];
  EXPECT_EQ(row["newly_run_gates"].size(), 4u) << row.dump();
  EXPECT_TRUE(row["changed_gates"].empty()) << row.dump();
  EXPECT_FALSE(row["changed"].get<bool>());
  EXPECT_FALSE(row["newly_failed"].get<bool>());

  const Proc fail = sh("KLOOP_TEST_REPLAY=fail " + cli + "replay 1 --store " + s);
  EXPECT_EQ(fail.rc, 1) << fail.out;
  EXPECT_NE(fail.out.find("now reject; 4 gate(s) newly run (NEW FAILURE): correctness: recorded "
                          "not_run, now fail (fake evaluator: fail);"),
            std::string::npos)
      << fail.out;
  EXPECT_EQ(fail.out.find("CHANGED"), std::string::npos) << fail.out;
  const Proc fj =
      sh("(KLOOP_TEST_REPLAY=fail " + cli + "replay 1 --json --store " + s + " 2>/dev/null)");
  EXPECT_EQ(fj.rc, 1) << fj.out;
  EXPECT_TRUE(nlohmann::json::parse(fj.out)["candidates"][0]["newly_failed"].get<bool>());
}

// `receipt sign` over a damaged store (a blob the payload names is missing) could not finish (3),
// names the field and points at `kloop store verify`; a blank --reviewer is a usage error (2).
// Neither records a receipt.
TEST(StoreCliTest, ReceiptSignRefusesDamagedEvidenceAndABlankReviewer) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 2 --finish").rc, 0);
  const std::string cli = bin("store_cli") + " ";
  ASSERT_EQ(sh(cli + "keys generate --out " + t.path() + "/key.json").rc, 0);
  const std::string sign = cli + "receipt sign 1 --key " + t.path() + "/key.json --store " + s;
  for (const char* blank : {"''", "'   '", "\"$(printf ' \\t ')\""}) {
    const Proc p = sh(sign + " --reviewer " + blank);
    EXPECT_EQ(p.rc, 2) << blank << ": " << p.out;
    EXPECT_NE(p.out.find("--reviewer is empty"), std::string::npos) << p.out;
  }
  const auto j = nlohmann::json::parse(sh(cli + "show 1 --json --store " + s).out);
  const std::string src = j["iterations"][1]["candidates"][0]["source_sha256"];
  std::filesystem::remove(s + "/blobs/" + src.substr(0, 2) + "/" + src.substr(2));
  const Proc p = sh(sign + " --reviewer bob");
  EXPECT_EQ(p.rc, 3) << p.out;
  EXPECT_NE(p.out.find("`candidate_source_sha256` names blob " + src), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("kloop store verify"), std::string::npos) << p.out;
  EXPECT_TRUE(Store::open(s).load_session(1).receipts.empty());
}

// `receipt sign` of a session that was not promoted says so plainly and is a usage-style refusal
// (2), recording nothing.
TEST(StoreCliTest, ReceiptSignOfAnUnpromotedSessionSaysSoAndExitsTwo) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 2 --finish").rc, 0);
  edit_db(s, "UPDATE promotion_decisions SET decision = 1");
  const std::string cli = bin("store_cli") + " ";
  ASSERT_EQ(sh(cli + "keys generate --out " + t.path() + "/key.json").rc, 0);
  const Proc p =
      sh(cli + "receipt sign 1 --key " + t.path() + "/key.json --reviewer bob --store " + s);
  EXPECT_EQ(p.rc, 2) << p.out;
  EXPECT_NE(p.out.find("kloop receipt sign: session 1 was not promoted (status rejected); only "
                       "promoted sessions are signed"),
            std::string::npos)
      << p.out;
  EXPECT_TRUE(Store::open(s).load_session(1).receipts.empty());
}

// A file or folder named on the command line that does not exist or cannot be read is a usage
// error (2) naming the option; a store that exists but is damaged could not be read (3).
TEST(StoreCliTest, MissingFilesAndStoresNamedOnTheCommandLineAreUsageErrors) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 2 --finish").rc, 0);
  const std::string cli = bin("store_cli") + " ";
  const auto usage = [&](const std::string& args, const std::string& names) {
    const Proc p = sh(cli + args);
    EXPECT_EQ(p.rc, 2) << args << ": " << p.out;
    EXPECT_NE(p.out.find(names), std::string::npos) << args << ": " << p.out;
  };
  usage("sessions --store " + t.path() + "/missing", "does not exist");
  usage("show 1 --store " + t.path(), "has no kloop.db"); // a folder that is no store
  std::ofstream(t.path() + "/file") << "x";
  usage("sessions --store " + t.path() + "/file", "is not a directory");
  // Keys and receipts.
  ASSERT_EQ(sh(cli + "keys generate --out " + t.path() + "/key.json").rc, 0);
  usage("keys generate --out " + t.path() + "/key.json", "--out");    // never overwritten
  usage("keys generate --out " + t.path() + "/no/key.json", "--out"); // missing folder
  usage("receipt sign 1 --key " + t.path() + "/nokey.json --reviewer r --store " + s, "--key");
  usage("receipt sign 1 --key " + t.path() + "/file --reviewer r --store " + s, "--key");
  // A key file group or others may read: refused naming the file and the fix.
  std::filesystem::copy_file(t.path() + "/key.json", t.path() + "/open.json");
  std::filesystem::permissions(t.path() + "/open.json", std::filesystem::perms(0644));
  usage("receipt sign 1 --key " + t.path() + "/open.json --reviewer r --store " + s,
        "chmod 600 " + t.path() + "/open.json");
  usage("receipt sign 1 --key " + t.path() + "/key.json --reviewer r --out " + t.path() +
            "/no/r.json --store " + s,
        "--out");
  EXPECT_TRUE(Store::open(s).load_session(1).receipts.empty()); // refused before recording
  ASSERT_EQ(sh(cli + "receipt sign 1 --key " + t.path() + "/key.json --reviewer r --out " +
               t.path() + "/r.json --store " + s)
                .rc,
            0);
  usage("receipt verify " + t.path() + "/nor.json --keys " + t.path() + "/noreg.json", "FILE");
  usage("receipt verify " + t.path() + "/r.json --keys " + t.path() + "/noreg.json", "--keys");
  usage("receipt verify " + t.path() + "/r.json --keys " + t.path() + "/file", "is not valid JSON");
  usage("report 1 --html " + t.path() + "/no/r.html --store " + s, "--html");
  // With --json the error document carries the same exit code.
  const Proc js = sh("(" + cli + "sessions --json --store " + t.path() + "/missing 2>/dev/null)");
  EXPECT_EQ(nlohmann::json::parse(js.out, nullptr, false).value("exit_code", 0), 2) << js.out;
  // A store that exists but whose database is damaged is not the caller's mistake.
  const std::string bad = t.path() + "/corrupt";
  std::filesystem::create_directories(bad);
  std::ofstream(bad + "/kloop.db", std::ios::binary) << std::string(8192, '\x5a');
  const Proc corrupt = sh(cli + "sessions --store " + bad);
  EXPECT_EQ(corrupt.rc, 3) << corrupt.out;
}

// Inflates the IDAT stream of a PNG; returns the number of distinct byte values (a blank page
// gives only a handful: filter bytes and one colour).
int png_distinct_bytes(const std::string& png) {
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return -1;
  std::string idat;
  for (std::size_t p = 8; p + 8 <= png.size();) {
    const auto u = [&](std::size_t i) { return static_cast<unsigned char>(png[i]); };
    const std::size_t len = (u(p) << 24) | (u(p + 1) << 16) | (u(p + 2) << 8) | u(p + 3);
    if (png.compare(p + 4, 4, "IDAT") == 0) idat += png.substr(p + 8, len);
    p += 12 + len;
  }
  std::string raw(64u << 20, '\0');
  uLongf raw_len = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_len,
                 reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK)
    return -2;
  std::set<unsigned char> seen(raw.begin(), raw.begin() + static_cast<long>(raw_len));
  return static_cast<int>(seen.size());
}

Proc chromium(const std::string& args) {
  return sh("chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
            "--disable-background-networking --disable-component-update --disable-sync "
            "--user-data-dir=$(mktemp -d) " +
            args);
}

TEST(StoreReportTest, HtmlReportRendersChartsInHeadlessChromium) {
  if (sh("command -v chromium").rc != 0)
    GTEST_SKIP() << "chromium is not installed (Debian package `chromium`); report not rendered";
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const std::string html = t.path() + "/report.html";
  ASSERT_EQ(sh(bin("store_cli") + " report 1 --html " + html + " --store " + s).rc, 0);
  const std::string page = read(html);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  const Proc dom = chromium("--dump-dom file://" + html);
  ASSERT_EQ(dom.rc, 0) << dom.out;
  for (const char* id : {"timeline", "gates", "roofline", "speedup", "stalls"})
    EXPECT_NE(dom.out.find(std::string("<svg id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(dom.out.find("class=\"speedup-point\""), std::string::npos);
  EXPECT_NE(dom.out.find("class=\"gate fail\""), std::string::npos);
  const std::string shot = t.path() + "/shot.png";
  const Proc sc = chromium("--screenshot=" + shot + " --window-size=1200,1600 file://" + html);
  ASSERT_EQ(sc.rc, 0) << sc.out;
  EXPECT_GT(png_distinct_bytes(read(shot)), 32);
}

TEST(StoreReportTest, SessionWithoutDeviceDataSaysSoInsteadOfCharts) {
  TempDir t;
  const std::string s = t.path() + "/s";
  {
    Store st = Store::open(s);
    SessionRecord rec{.operator_name = "weighted_rmsnorm", .provider = "offline", .budget = 1};
    st.create_session(rec);
    auto step = st.begin_step();
    IterationRecord it{.session_id = rec.id, .index = 0, .wall_ms = 50};
    step.add_iteration(it);
    CandidateRecord c{.iteration_id = it.id,
                      .source_sha256 = step.put_blob("k"),
                      .verdict = VerdictCode::kPendingDeviceValidation};
    step.add_candidate(c);
    GateRecord g{.candidate_id = c.id,
                 .name = "benchmark",
                 .status = GateCode::kNotRun,
                 .reason = "no device"};
    step.add_gate(g);
    step.commit();
    st.finish_session(rec.id, SessionStatus::kCompleted, VerdictCode::kPendingDeviceValidation);
  }
  const std::string html = t.path() + "/report.html";
  ASSERT_EQ(sh(bin("store_cli") + " report 1 --html " + html + " --store " + s).rc, 0);
  const std::string page = read(html);
  EXPECT_NE(page.find("no benchmark data (not run: no device)"), std::string::npos);
  EXPECT_NE(page.find("id=\"roofline-missing\""), std::string::npos);
  EXPECT_NE(page.find("id=\"stalls-missing\""), std::string::npos);
  EXPECT_NE(page.find("<svg id=\"gates\""), std::string::npos);
  // Iterations are numbered from 1, as `kloop optimize` prints them (stored index 0).
  EXPECT_NE(page.find("<title>iteration 1 ("), std::string::npos);
  EXPECT_NE(page.find(">iter 1 cand 1</text>"), std::string::npos);
  EXPECT_EQ(page.find("<title>iteration 0 ("), std::string::npos);
}

} // namespace
} // namespace kloop::store
