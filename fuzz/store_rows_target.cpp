// Fuzz target `store_rows`: the store's reading of rows and blobs. Rows carry no hash, so an edited
// or damaged store can hold anything in any column; a blob can be altered on disk. Each input
// edits a store that holds complete sessions (written by tests/store/fixture.h through the Store
// API, as the loop writes them), then runs the reading commands of app/cmd_store.cpp on it, as a
// user would: sessions, show, compare, replay (text and --json), report --html and store verify.
// They must answer with the record or a clear error (store::StoreError, app::UsageError), never
// another exception. Input: edits, each one byte choosing the column (kColumns), one byte choosing
// the rows (even: all, odd: the first), then the value up to a NUL byte. A value that reads as a
// decimal integer is bound as one (codes, counts), anything else as text (SQLite keeps whatever
// type it is given).
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/commands.h"
#include "fuzz/fuzz_target.h"
#include "tests/store/fixture.h"

namespace {

namespace fs = std::filesystem;

struct Column {
  const char* table;
  const char* column;
};
// The columns a reader interprets (JSON, codes, counts, names, blob references).
constexpr Column kColumns[] = {{"sessions", "params_json"},
                               {"sessions", "status"},
                               {"sessions", "verdict"},
                               {"sessions", "model"},
                               {"sessions", "budget"},
                               {"sessions", "provider"},
                               {"iterations", "notes_json"},
                               {"iterations", "idx"},
                               {"iterations", "wall_ms"},
                               {"candidates", "report_json"},
                               {"candidates", "verdict"},
                               {"candidates", "speedup"},
                               {"candidates", "source_sha256"},
                               {"candidates", "manifest_sha256"},
                               {"gate_results", "evidence_json"},
                               {"gate_results", "status"},
                               {"gate_results", "name"},
                               {"gate_results", "reason"},
                               {"telemetry", "data_json"},
                               {"telemetry", "kind"},
                               {"test_cases", "detail_json"},
                               {"test_cases", "status"},
                               {"holdout_runs", "result_json"},
                               {"holdout_runs", "status"},
                               {"holdout_runs", "report_sha256"},
                               {"holdout_commitments", "commitment_sha256"},
                               {"promotion_decisions", "decision"},
                               {"promotion_decisions", "evidence_json"},
                               {"promotion_decisions", "candidate_id"},
                               {"artifacts", "kind"},
                               {"artifacts", "sha256"},
                               {"responses", "prompt_tokens"},
                               {"tool_calls", "argv_json"},
                               {"benchmark_samples", "count"},
                               {"receipts", "payload_sha256"},
                               {"prompts", "tokens"}};
constexpr std::size_t kColumnCount = sizeof kColumns / sizeof kColumns[0];

struct Fixture {
  std::string dir, db, pristine, html;
  std::string blob_path, blob_bytes; // one blob an input may overwrite (kColumnCount)
};

// A store with two complete sessions, made once per process; stdout goes to /dev/null.
const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    x.dir =
        (fs::temp_directory_path() / ("kloop-fuzz-store-" + std::to_string(::getpid()))).string();
    fs::remove_all(x.dir);
    {
      auto st = kloop::store::Store::open(x.dir);
      kloop::store::testing::write_fake_session(st, 3);
      kloop::store::testing::write_fake_session(st, 1, "openai", "gpt-x", /*with_device=*/false);
    } // closed: the WAL is checkpointed into kloop.db
    x.db = x.dir + "/kloop.db";
    x.pristine = x.dir + "/pristine.db";
    fs::copy_file(x.db, x.pristine, fs::copy_options::overwrite_existing);
    x.html = x.dir + "/report.html";
    for (const auto& e : fs::recursive_directory_iterator(x.dir + "/blobs"))
      if (e.is_regular_file()) {
        x.blob_path = e.path().string();
        break;
      }
    std::ifstream in(x.blob_path, std::ios::binary);
    x.blob_bytes.assign(std::istreambuf_iterator<char>(in), {});
    std::fflush(stdout);
    std::freopen("/dev/null", "w", stdout);
    return x;
  }();
  return f;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Applies the input's edits to the database (and the chosen blob) with plain SQL.
void apply_edits(const Fixture& f, std::string_view input) {
  sqlite3* db = nullptr;
  if (sqlite3_open(f.db.c_str(), &db) != SQLITE_OK) __builtin_trap();
  while (input.size() >= 2) {
    const std::size_t which = static_cast<unsigned char>(input[0]) % (kColumnCount + 1);
    const bool first_row_only = input[1] & 1;
    input.remove_prefix(2);
    const auto nul = input.find('\0');
    const std::string value(input.substr(0, nul));
    input = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
    if (which == kColumnCount) { // the blob's bytes on disk
      write_bytes(f.blob_path, value);
      continue;
    }
    const Column& c = kColumns[which];
    const std::string sql =
        std::string("UPDATE ") + c.table + " SET " + c.column + " = ?1" +
        (first_row_only ? std::string(" WHERE rowid = (SELECT min(rowid) FROM ") + c.table + ")"
                        : std::string());
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) __builtin_trap();
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (!value.empty() && end == value.c_str() + value.size())
      sqlite3_bind_int64(st, 1, number);
    else
      sqlite3_bind_text(st, 1, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    sqlite3_step(st); // a constraint (NOT NULL, a foreign key) may refuse it: fine
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
}

// One kloop command on the store, as app/main.cpp runs it: refusals and store errors are answers.
void run_command(std::vector<std::string> args) {
  CLI::App app{"kloop"};
  app.require_subcommand(1);
  int exit_code = 0;
  kloop::app::register_store_commands(app, exit_code);
  std::vector<const char*> argv{"kloop"};
  for (const auto& a : args)
    argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  } catch (const kloop::store::StoreError&) {
  } catch (const kloop::app::UsageError&) {
  } catch (const std::exception& e) { // anything else is not an answer a user can act on
    std::fprintf(stderr, "kloop %s: uncaught %s\n", args.front().c_str(), e.what());
    __builtin_trap();
  }
}

} // namespace

KLOOP_FUZZ_TARGET(store_rows) {
  const Fixture& f = fixture();
  fs::copy_file(f.pristine, f.db, fs::copy_options::overwrite_existing);
  for (const char* side : {"-wal", "-shm"})
    fs::remove(f.db + side);
  write_bytes(f.blob_path, f.blob_bytes);
  apply_edits(f, kloop::fuzz::text_of(data, size));
  for (const std::string id : {"1", "2"}) {
    run_command({"show", id, "--store", f.dir});
    run_command({"show", id, "--json", "--store", f.dir});
    run_command({"replay", id, "--store", f.dir});
    run_command({"replay", id, "--json", "--store", f.dir});
    run_command({"report", id, "--html", f.html, "--store", f.dir});
  }
  run_command({"sessions", "--store", f.dir});
  run_command({"sessions", "--json", "--store", f.dir});
  run_command({"compare", "1", "2", "--store", f.dir});
  run_command({"compare", "1", "2", "--json", "--store", f.dir});
  run_command({"store", "verify", "--store", f.dir});
  return 0;
}
