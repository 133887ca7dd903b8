// `kloop export --torch`, the rollout file, the receipt's rollout rule and `kloop shadow` without
// a GPU, on stores written through the Store API with a real manifest and kernel source.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "agent/shadow.h"
#include "agent/torch_export.h"
#include "evaluator/subprocess.h"
#include "kernels/manifest.h"
#include "kernels/softmax/operator.h"
#include "store/error.h"
#include "store/receipt.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "tests/store/fixture.h"
#include "tests/support/test_files.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace kloop;

namespace {

using test_support::read_file;
using test_support::TempDir;

// Non-default predicate values, so the generated _config.py cannot match by accident.
const char* kManifest = R"({"contract":"weighted_rmsnorm/1",
 "entry_points":{"float16":"rms_f16","bfloat16":"rms_bf16"},
 "launch":{"block_threads":128,"rows_per_block":2,"grid":"per_rows",
           "dynamic_smem":{"fixed_bytes":64,"bytes_per_h":4}},
 "dispatch":{"h_min":256,"h_max":16384,"h_multiple_of":128,"x_rows":"contiguous",
             "alignment_bytes":16},
 "target":"sm_90","known_limits":"fp16/bf16, H multiple of 128"})";

// Cubin-like bytes with NULs and high bytes: the export must copy them byte for byte.
std::string fake_cubin() {
  std::string b("\x7f"
                "ELF\x02\x01\x01\x00",
                8);
  for (int i = 0; i < 300; ++i)
    b.push_back(static_cast<char>((i * 37) & 0xff));
  return b;
}

struct Session {
  std::int64_t id = 0, candidate_id = 0;
};

// The candidate a session records: its operator (the session's operator_name), kernel source and
// manifest. Default: weighted_rmsnorm with the good fixture kernel and kManifest.
struct Kernel {
  std::string operator_name = "weighted_rmsnorm";
  std::string source;
  std::string manifest = kManifest;
};

Session write_session(store::Store& st, std::optional<store::Decision> decision,
                      const Kernel& kernel = {}) {
  store::SessionRecord s{.operator_name = kernel.operator_name,
                         .contract_version = "1",
                         .contract_sha256 = std::string(64, 'd'),
                         .provider = "offline",
                         .model = "builtin-v1",
                         .budget = 1,
                         .seed = 1,
                         .kloop_version = "0.1.0",
                         .kloop_commit = "test",
                         .toolkit_version = "13.0",
                         .device_arch = "sm_90"};
  st.create_session(s);
  auto step = st.begin_step();
  store::IterationRecord it{.session_id = s.id, .index = 0, .wall_ms = 1};
  step.add_iteration(it);
  const std::string source =
      !kernel.source.empty()
          ? kernel.source
          : read_file(fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good/kernel.cu");
  store::CandidateRecord c{.iteration_id = it.id,
                           .source_sha256 = step.put_blob(source),
                           .manifest_sha256 = step.put_blob(kernel.manifest),
                           .verdict = decision == store::Decision::kPromoted
                                          ? store::VerdictCode::kPass
                                          : store::VerdictCode::kPendingDeviceValidation,
                           .speedup = 1.5};
  step.add_candidate(c);
  store::ArtifactRecord a{.iteration_id = it.id,
                          .candidate_id = c.id,
                          .kind = store::ArtifactKind::kCubin,
                          .name = "kernel.cubin"};
  step.add_artifact(a, fake_cubin());
  if (decision) {
    store::PromotionRecord p{.session_id = s.id,
                             .candidate_id = c.id,
                             .decision = *decision,
                             .reason = "test decision",
                             .evidence = {{"dispatch", "test predicate"}, {"rollout", nullptr}}};
    step.add_promotion(p);
  }
  step.commit();
  st.finish_session(s.id, store::SessionStatus::kCompleted,
                    decision == store::Decision::kPromoted ? store::VerdictCode::kPass
                                                           : store::VerdictCode::kReject);
  return {s.id, c.id};
}

agent::Rollout rollout() {
  return {"KLOOP_RMSNORM_DISABLE; 1% canary", "replace the worker; torch reference",
          "on driver change"};
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

evaluator::ToolCall run(std::vector<std::string> argv) {
  evaluator::SubprocessOptions o;
  o.deadline = std::chrono::seconds(60);
  o.env = {{"PATH", std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"}, {"HOME", "/tmp"}};
  return evaluator::run_subprocess(argv, o);
}

const std::string kKloop = std::string(KLOOP_BINARY_DIR) + "/bin/kloop";

// The promotion decision rows of session `id` in the store at `dir`: how many, and the latest's
// decided_at.
std::pair<std::int64_t, std::string> promotion_rows(const fs::path& dir, std::int64_t id) {
  store::Db db("file:" + (dir / "kloop.db").string(), SQLITE_OPEN_READONLY, "test read");
  auto q = db.prepare("SELECT COUNT(*), MAX(decided_at) FROM promotion_decisions WHERE "
                      "session_id = ?");
  q.bind(1, id);
  EXPECT_TRUE(q.step());
  return {q.int64(0), q.text(1)};
}

// A session the store fixture writes (every receipt field filled, its rollout recorded, so it
// signs), with this test's kernel source and manifest in place of the fixture's placeholders
// (so it exports). Returns the session id.
std::int64_t signable_session(store::Store& st, const fs::path& dir) {
  const auto id = store::testing::write_fake_session(st, 2);
  auto step = st.begin_step();
  const std::string source = step.put_blob(
      read_file(fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good/kernel.cu"));
  const std::string manifest = step.put_blob(kManifest);
  step.commit();
  store::Db("file:" + (dir / "kloop.db").string(), SQLITE_OPEN_READWRITE, "test edit")
      .exec(fmt::format("UPDATE candidates SET source_sha256 = '{}', manifest_sha256 = '{}'",
                        source, manifest));
  return id;
}

} // namespace

TEST(RolloutFile, ValidFileParses) {
  const auto r = agent::parse_rollout(rollout().to_json().dump());
  ASSERT_TRUE(r.rollout) << r.error;
  EXPECT_EQ(r.rollout->revalidation_policy, "on driver change");
}

TEST(RolloutFile, ErrorsNameTheField) {
  json j = rollout().to_json();
  j["canary_percent"] = "5";
  auto r = agent::parse_rollout(j.dump());
  EXPECT_FALSE(r.rollout);
  EXPECT_TRUE(has(r.error, "unknown field `canary_percent`")) << r.error;

  j = rollout().to_json();
  j.erase("revalidation_policy");
  r = agent::parse_rollout(j.dump());
  EXPECT_TRUE(has(r.error, "missing field `revalidation_policy`")) << r.error;

  j = rollout().to_json();
  j["feature_flag_and_scope"] = "  ";
  r = agent::parse_rollout(j.dump());
  EXPECT_TRUE(has(r.error, "`feature_flag_and_scope` is empty")) << r.error;

  j = rollout().to_json();
  j["healthy_worker_recovery_and_reference_target"] = 3;
  r = agent::parse_rollout(j.dump());
  EXPECT_TRUE(has(r.error, "`healthy_worker_recovery_and_reference_target` must be a string"))
      << r.error;

  // A field given twice would be read last-wins; a reviewer reading the file sees the first.
  const std::string twice = R"({"feature_flag_and_scope": "canary 1%",
    "healthy_worker_recovery_and_reference_target": "drain and replace",
    "revalidation_policy": "monthly", "feature_flag_and_scope": "everything"})";
  r = agent::parse_rollout(twice);
  EXPECT_FALSE(r.rollout);
  EXPECT_TRUE(has(r.error, "`feature_flag_and_scope` appears more than once")) << r.error;

  EXPECT_TRUE(has(agent::parse_rollout("[1]").error, "JSON object"));
  EXPECT_TRUE(has(agent::parse_rollout("{").error, "not valid JSON"));
}

TEST(TorchExport, PromotedSessionWritesPackageWithManifestValuesAndIdenticalCubin) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPromoted);
  agent::TorchExportOptions o;
  o.rollout = rollout();
  const auto r = agent::export_torch_package(st, s.id, t.dir() / "out", o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.promoted);
  EXPECT_EQ(r.candidate_id, s.candidate_id);
  const fs::path pkg = t.dir() / "out" / "kloop_rmsnorm";
  for (const char* f :
       {"__init__.py", "_config.py", "_dispatch.py", "_launch.py", "_reference.py", "shadow.py",
        "kernel.cubin", "manifest.json", "receipt.json", "export.json", "README.md"})
    EXPECT_TRUE(fs::exists(pkg / f)) << f;
  EXPECT_EQ(read_file(pkg / "kernel.cubin"), fake_cubin());
  EXPECT_EQ(read_file(pkg / "manifest.json"), kManifest);

  const std::string config = read_file(pkg / "_config.py");
  for (const char* line :
       {"PROMOTED = True", "H_MIN = 256", "H_MAX = 16384", "H_MULTIPLE_OF = 128",
        "X_ROWS = \"contiguous\"", "ALIGNMENT_BYTES = 16", "BLOCK_THREADS = 128",
        "ROWS_PER_BLOCK = 2", "SMEM_FIXED_BYTES = 64", "SMEM_BYTES_PER_H = 4", "TARGET = \"sm_90\"",
        "ENTRY_POINTS = {\"bfloat16\":\"rms_bf16\",\"float16\":\"rms_f16\"}",
        "GRID = \"per_rows\""})
    EXPECT_TRUE(has(config, line)) << line << "\n" << config;
  EXPECT_FALSE(has(config, "float32\":\"rms_f32")) << "float32 has no entry point";
  EXPECT_TRUE(has(config, "\"float16\":{\"atol\":1e-05,\"row_floor\":0.01,\"row_rtol\":0.002,"
                          "\"rtol\":0.002}"))
      << config;
  EXPECT_TRUE(
      has(read_file(pkg / "__init__.py"), "torch.library.custom_op(\"kloop::weighted_rmsnorm\""));
  EXPECT_TRUE(has(read_file(pkg / "__init__.py"), "KLOOP_RMSNORM_DISABLE"));
  EXPECT_TRUE(has(read_file(pkg / "_launch.py"), "cuLaunchKernel"));
  EXPECT_FALSE(has(read_file(pkg / "_launch.py"), "import ctypes"));

  const json receipt = json::parse(read_file(pkg / "receipt.json"));
  EXPECT_EQ(receipt["payload"]["rollout"], rollout().to_json());
  EXPECT_EQ(receipt["payload"]["status"], "promoted");
  EXPECT_TRUE(receipt["approval"]["signature"].is_null());
  const json exp = json::parse(read_file(pkg / "export.json"));
  EXPECT_EQ(exp["cubin_sha256"], receipt["payload"]["loaded_artifact_sha256"]);
  EXPECT_TRUE(exp["promoted"].get<bool>());
  EXPECT_FALSE(exp.contains("warning"));

  // The rollout is in the store: the receipt rebuilt from the store carries it.
  ASSERT_TRUE(r.rollout_recorded);
  const auto d = st.load_session(s.id);
  ASSERT_TRUE(d.promotion);
  EXPECT_EQ(d.promotion->decision, store::Decision::kPromoted);
  EXPECT_EQ(d.promotion->evidence["rollout"], rollout().to_json());
  EXPECT_EQ(store::build_receipt_payload(d, store::receipt_manifest(st, d), std::nullopt,
                                         std::nullopt)["rollout"],
            rollout().to_json());
}

// The package's Python dispatch mirrors one format-1 predicate: a format-2 manifest and a format-1
// dispatch with max_rows are refused with the reason, not exported with a predicate that would
// send calls to the kernel that the C++ wrapper sends to the reference.
TEST(TorchExport, ConfigRefusesManifestsThePythonDispatchCannotMirror) {
  json two = json::parse(kManifest);
  const json launch = two["launch"];
  const json entries = two["entry_points"];
  for (const char* k : {"launch", "entry_points", "dispatch"})
    two.erase(k);
  two["format"] = 2;
  two["variants"] = json::array({{{"name", "only"},
                                  {"when", {{"h_max", 16384}}},
                                  {"entry_points", entries},
                                  {"launch", launch}}});
  try {
    (void)agent::render_config_py(two.dump(), json::object());
    ADD_FAILURE() << "a format-2 manifest was rendered";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("format 2 with 1 variants"), std::string::npos)
        << e.what();
  }
  json capped = json::parse(kManifest);
  capped["dispatch"]["max_rows"] = 1024;
  try {
    (void)agent::render_config_py(capped.dump(), json::object());
    ADD_FAILURE() << "a dispatch with max_rows was rendered";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_rows"), std::string::npos) << e.what();
  }
  EXPECT_NE(agent::render_config_py(kManifest, json::object()).find("H_MIN = 256"),
            std::string::npos);
}

TEST(TorchExport, RefusesUnpromotedSessionUnlessAllowedAndThenSaysSo) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPendingDeviceValidation);
  const auto refused = agent::export_torch_package(st, s.id, t.dir() / "out", {});
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.exit_code, 2) << "a request the session cannot meet: usage (README)";
  EXPECT_TRUE(has(refused.error, "not promoted")) << refused.error;
  EXPECT_TRUE(has(refused.error, "--allow-unpromoted")) << refused.error;
  EXPECT_FALSE(fs::exists(t.dir() / "out" / "kloop_rmsnorm"));

  agent::TorchExportOptions o;
  o.allow_unpromoted = true;
  const auto r = agent::export_torch_package(st, s.id, t.dir() / "out", o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.promoted);
  const fs::path pkg = t.dir() / "out" / "kloop_rmsnorm";
  EXPECT_TRUE(has(read_file(pkg / "_config.py"), "PROMOTED = False"));
  EXPECT_TRUE(has(read_file(pkg / "__init__.py"), "was NOT promoted"));
  EXPECT_TRUE(has(read_file(pkg / "README.md"), "NOT PROMOTED"));
  const json exp = json::parse(read_file(pkg / "export.json"));
  EXPECT_FALSE(exp["promoted"].get<bool>());
  EXPECT_TRUE(has(exp["warning"].get<std::string>(), "NOT PROMOTED")) << exp.dump();
}

TEST(ReceiptRollout, SigningRefusesEmptyRolloutAndNotOnceExportRecordedIt) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPromoted);
  const auto key = store::generate_keypair();
  try {
    store::sign_session_receipt(st, s.id, key, "alice");
    FAIL() << "signed a receipt with an empty rollout section";
  } catch (const store::StoreError& e) {
    EXPECT_TRUE(has(e.what(), "rollout section is empty")) << e.what();
    EXPECT_TRUE(has(e.what(), "rollout.revalidation_policy")) << e.what();
  }
  agent::TorchExportOptions o;
  o.rollout = rollout();
  ASSERT_TRUE(agent::export_torch_package(st, s.id, t.dir() / "out", o).ok);
  // This fake session lacks device evidence, so signing still fails, but on the null fields.
  try {
    store::sign_session_receipt(st, s.id, key, "alice");
    FAIL() << "signed a receipt with null fields";
  } catch (const store::StoreError& e) {
    EXPECT_FALSE(has(e.what(), "rollout")) << e.what();
    EXPECT_TRUE(has(e.what(), "block signing")) << e.what();
  }
  json payload = json::parse(read_file(t.dir() / "out/kloop_rmsnorm/receipt.json"))["payload"];
  payload["rollout"]["feature_flag_and_scope"] = "";
  EXPECT_EQ(store::empty_rollout_fields(payload),
            std::vector<std::string>{"rollout.feature_flag_and_scope"});
}

// Exporting again, with the same or (before any signature) another rollout, never writes a
// second promotion decision: the rollout goes into the existing decision's evidence and
// decided_at does not move.
TEST(TorchExport, RolloutExportsReuseThePromotionDecision) {
  TempDir t;
  const fs::path dir = t.dir() / "store";
  auto st = store::Store::open(dir.string());
  const auto s = write_session(st, store::Decision::kPromoted);
  const auto before = promotion_rows(dir, s.id);
  ASSERT_EQ(before.first, 1);
  agent::TorchExportOptions o;
  o.rollout = rollout();
  for (const char* out : {"o1", "o2"}) {
    const auto r = agent::export_torch_package(st, s.id, t.dir() / out, o);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_TRUE(r.rollout_recorded);
    EXPECT_EQ(promotion_rows(dir, s.id), before) << out;
  }
  const auto d = st.load_session(s.id);
  EXPECT_EQ(d.promotion->evidence["rollout"], rollout().to_json());
  EXPECT_EQ(d.promotion->evidence["dispatch"], "test predicate"); // the rest of it kept
  EXPECT_EQ(d.promotion->reason, "test decision");
  // Another rollout before anything is signed replaces it, still in the same decision.
  o.rollout->revalidation_policy = "weekly";
  ASSERT_TRUE(agent::export_torch_package(st, s.id, t.dir() / "o3", o).ok);
  EXPECT_EQ(promotion_rows(dir, s.id), before);
  const auto replaced = st.load_session(s.id).promotion->evidence;
  EXPECT_EQ(replaced["rollout"]["revalidation_policy"], "weekly");
  // The rollout it replaced is kept, with when it was recorded.
  ASSERT_TRUE(replaced["rollouts_replaced"].is_array()) << replaced.dump();
  ASSERT_EQ(replaced["rollouts_replaced"].size(), 1u) << replaced.dump();
  EXPECT_EQ(replaced["rollouts_replaced"][0]["rollout"], rollout().to_json());
  EXPECT_TRUE(replaced["rollouts_replaced"][0]["recorded_at"].is_string()) << replaced.dump();
  // Without --rollout the export reads the recorded one and writes nothing to the store.
  const auto plain = agent::export_torch_package(st, s.id, t.dir() / "o4", {});
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_EQ(plain.receipt["payload"]["rollout"]["revalidation_policy"], "weekly");
  EXPECT_EQ(promotion_rows(dir, s.id), before);
}

// Once the session's receipt is signed, the export's receipt.json is that signed receipt (as the
// store keeps it) and verifies against the registry; exporting again (same rollout) keeps it
// valid; another rollout is refused (2) instead of voiding the signature.
TEST(TorchExport, SignedReceiptIsExportedAndKeepsVerifying) {
  TempDir t;
  const fs::path dir = t.dir() / "store";
  std::int64_t id = 0;
  const auto key = store::generate_keypair();
  const json registry = {{key.key_id, key.public_hex}};
  json signed_receipt;
  {
    auto st = store::Store::open(dir.string());
    id = signable_session(st, dir);
    const auto unsigned_export = agent::export_torch_package(st, id, t.dir() / "o0", {});
    ASSERT_TRUE(unsigned_export.ok) << unsigned_export.error;
    EXPECT_FALSE(unsigned_export.receipt_signed);
    EXPECT_TRUE(unsigned_export.receipt["approval"]["signature"].is_null());
    signed_receipt = store::sign_session_receipt(st, id, key, "alice");
  }
  const auto before = promotion_rows(dir, id);
  const json recorded_rollout =
      store::Store::open(dir.string()).load_session(id).promotion->evidence["rollout"];
  std::ofstream(t.dir() / "same.json") << recorded_rollout.dump();
  const std::string store_dir = dir.string();
  for (const std::string out : {"o1", "o2"}) {
    std::vector<std::string> argv{
        kKloop,    "export", std::to_string(id), "--torch", (t.dir() / out).string(),
        "--store", store_dir};
    if (out == "o2") argv.insert(argv.end(), {"--rollout", (t.dir() / "same.json").string()});
    const auto r = run(argv);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_TRUE(has(r.stdout_text, "receipt.json is the signed receipt")) << r.stdout_text;
    const fs::path receipt = t.dir() / out / "kloop_rmsnorm/receipt.json";
    const json exported = json::parse(read_file(receipt));
    EXPECT_EQ(exported, signed_receipt) << out;
    const auto check = store::verify_receipt(exported, registry);
    EXPECT_TRUE(check.ok) << out << ": " << check.message;
    std::ofstream(t.dir() / "reg.json") << registry.dump();
    const auto cli = run(
        {kKloop, "receipt", "verify", receipt.string(), "--keys", (t.dir() / "reg.json").string()});
    EXPECT_EQ(cli.exit_code, 0) << cli.stderr_text;
    EXPECT_EQ(promotion_rows(dir, id), before) << out;
  }
  std::ofstream(t.dir() / "other.json") << rollout().to_json().dump();
  const auto other =
      run({kKloop, "export", std::to_string(id), "--torch", (t.dir() / "o3").string(), "--store",
           store_dir, "--rollout", (t.dir() / "other.json").string()});
  EXPECT_EQ(other.exit_code, 2) << other.stderr_text;
  EXPECT_TRUE(has(other.stderr_text, "has a signed receipt")) << other.stderr_text;
  EXPECT_FALSE(fs::exists(t.dir() / "o3" / "kloop_rmsnorm"));
  EXPECT_EQ(promotion_rows(dir, id), before);
  EXPECT_EQ(store::Store::open(dir.string()).load_session(id).promotion->evidence["rollout"],
            recorded_rollout);
}

// An export that fails on its output folder (a package already there, or --torch naming a file)
// records nothing in the store: the rollout is not attached to the decision.
TEST(TorchExport, ExportRefusedForItsOutputFolderRecordsNoRollout) {
  TempDir t;
  const fs::path dir = t.dir() / "store";
  auto st = store::Store::open(dir.string());
  const auto s = write_session(st, store::Decision::kPromoted);
  const json before = st.load_session(s.id).promotion->evidence;
  fs::create_directories(t.dir() / "full/kloop_rmsnorm");
  std::ofstream(t.dir() / "full/kloop_rmsnorm/stale.py") << "x = 1\n";
  std::ofstream(t.dir() / "file") << "x";
  agent::TorchExportOptions o;
  o.rollout = rollout();
  for (const char* out : {"full", "file"}) {
    const auto r = agent::export_torch_package(st, s.id, t.dir() / out, o);
    EXPECT_FALSE(r.ok) << out;
    EXPECT_EQ(r.exit_code, 2) << out << ": " << r.error;
    EXPECT_FALSE(r.rollout_recorded) << out;
    EXPECT_EQ(st.load_session(s.id).promotion->evidence, before) << out;
  }
}

// A session whose signed receipt no longer matches the store (here: its recorded rollout edited
// after signing) exports an unsigned receipt.json and says why, instead of passing the signed
// one off as covering the store.
TEST(TorchExport, SignedReceiptThatNoLongerMatchesIsNotExportedAndSaysSo) {
  TempDir t;
  const fs::path dir = t.dir() / "store";
  auto st = store::Store::open(dir.string());
  const auto id = signable_session(st, dir);
  (void)store::sign_session_receipt(st, id, store::generate_keypair(), "alice");
  const auto matching = agent::export_torch_package(st, id, t.dir() / "o1", {});
  ASSERT_TRUE(matching.ok) << matching.error;
  EXPECT_TRUE(matching.receipt_signed);
  EXPECT_EQ(matching.receipt_note, "");
  store::Db("file:" + (dir / "kloop.db").string(), SQLITE_OPEN_READWRITE, "test edit")
      .exec("UPDATE promotion_decisions SET evidence_json = json_set(evidence_json, "
            "'$.rollout.revalidation_policy', 'never')");
  const auto r = agent::export_torch_package(st, id, t.dir() / "o2", {});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.receipt_signed);
  EXPECT_TRUE(r.receipt["approval"]["signature"].is_null());
  EXPECT_EQ(r.receipt["payload"]["rollout"]["revalidation_policy"], "never");
  EXPECT_TRUE(has(r.receipt_note, "1 signed receipt(s), none over the receipt as the store now "
                                  "holds it"))
      << r.receipt_note;
}

// The signed-receipt check of `export --rollout` is made under the store's write lock: a
// receipt recorded by a writer the export had to wait for (it loaded the session before the
// receipt existed) still refuses another rollout, and the recorded rollout stays.
TEST(TorchExport, RolloutIsRefusedWhenAReceiptIsRecordedWhileTheExportWaits) {
  TempDir t;
  const fs::path dir = t.dir() / "store";
  auto st = store::Store::open(dir.string());
  const auto id = signable_session(st, dir);
  const json before = st.load_session(id).promotion->evidence;
  ASSERT_NE(before["rollout"], rollout().to_json());
  auto writer = store::Store::open(dir.string());
  agent::TorchExportOptions o;
  o.rollout = rollout();
  agent::TorchExportResult r;
  std::string error;
  std::thread th;
  {
    auto step = writer.begin_step();
    store::ReceiptRecord rec;
    rec.session_id = id;
    rec.payload_sha256 = std::string(64, 'a');
    rec.receipt_sha256 = step.put_blob("{}");
    rec.signing_key_id = "k";
    rec.reviewer = "bob";
    step.add_receipt(rec);
    th = std::thread([&] {
      try {
        r = agent::export_torch_package(st, id, t.dir() / "o", o);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    step.commit();
  }
  th.join();
  ASSERT_EQ(error, "");
  EXPECT_EQ(r.exit_code, 2) << r.error;
  EXPECT_TRUE(has(r.error, "has a signed receipt")) << r.error;
  EXPECT_EQ(st.load_session(id).promotion->evidence, before);
}

TEST(TorchExport, EveryGeneratedPythonFileCompiles) {
  const std::string python = agent::find_on_path("python3");
  if (python.empty()) GTEST_SKIP() << "python3 is not installed (scripts/bootstrap.sh adds it)";
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPromoted);
  const auto r = agent::export_torch_package(st, s.id, t.dir() / "out", {});
  ASSERT_TRUE(r.ok) << r.error;
  int compiled = 0;
  for (const auto& f : r.files) {
    if (!f.ends_with(".py")) continue;
    const auto call = run({python, "-m", "py_compile", (r.package_dir / f).string()});
    EXPECT_EQ(call.exit_code, 0) << f << ": " << call.stderr_text;
    ++compiled;
  }
  EXPECT_EQ(compiled, 6);
  // The device scripts too, with the bytecode written to the temp dir, not the source tree.
  for (const char* script : {"make_activations.py", "test_export.py"}) {
    const auto call = run({python, "-c",
                           "import py_compile, sys; py_compile.compile(sys.argv[1], "
                           "cfile=sys.argv[2], doraise=True)",
                           std::string(KLOOP_SOURCE_DIR) + "/tests/torch/" + script,
                           (t.dir() / (std::string(script) + "c")).string()});
    EXPECT_EQ(call.exit_code, 0) << script << ": " << call.stderr_text;
  }
}

TEST(Shadow, WithoutTorchOrGpuEndsNotRunAndRecordsTheReason) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPromoted);
  fs::create_directories(t.dir() / "inputs");
  agent::ShadowOptions o;
  o.inputs = t.dir() / "inputs";
  o.python = "/bin/false"; // a python3 that cannot run anything: no report
  const auto r = agent::run_shadow(st, s.id, o);
  EXPECT_EQ(r.status, "not_run");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(has(r.reason, "without a report")) << r.reason;
  const auto d = st.load_session(s.id);
  const auto* c = d.find_candidate(s.candidate_id);
  ASSERT_NE(c, nullptr);
  const auto* tel = c->telemetry_of("shadow");
  ASSERT_NE(tel, nullptr) << "the not_run shadow is recorded on the candidate";
  EXPECT_EQ(tel->data["status"], "not_run");
  EXPECT_EQ(tel->data["reason"], r.reason);

  // A python3 without torch/numpy (this CPU machine's, when it has none) names the missing module.
  const std::string python = agent::find_on_path("python3");
  if (!python.empty() && run({python, "-c", "import numpy, torch"}).exit_code != 0) {
    o.python = python;
    const auto no_torch = agent::run_shadow(st, s.id, o);
    EXPECT_EQ(no_torch.status, "not_run");
    EXPECT_EQ(no_torch.exit_code, 3);
    EXPECT_TRUE(has(no_torch.reason, "lacks the Python module")) << no_torch.reason;
  }

  o.inputs = t.dir() / "missing";
  const auto bad = agent::run_shadow(st, s.id, o);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(has(bad.reason, "not a directory")) << bad.reason;
}

TEST(Shadow, RecordsTheModuleReportAsBlobAndTelemetryAndFailsOnDivergence) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPromoted);
  fs::create_directories(t.dir() / "inputs");
  // Stands in for python3 on the GPU machine: checks how it is called, prints a report.
  const json report = {{"status", "fail"},
                       {"reason", "1 file(s) beyond the contract tolerance: [a.safetensors]"},
                       {"device", "NVIDIA H200"},
                       {"specialisations", 2},
                       {"specialisation_keys", {"float16/candidate", "float32/reference"}},
                       {"files",
                        {{{"file", "a.safetensors"},
                          {"dtype", "float16"},
                          {"shape", {4, 4096}},
                          {"route", "candidate"},
                          {"max_abs_error", 0.5},
                          {"max_rel_error", 0.1},
                          {"row_failures", 3},
                          {"non_finite_mismatches", 1},
                          {"pass", false},
                          {"device_memory", {{"peak_over_before", 1048576}}}}}}};
  const fs::path fake = t.dir() / "fake-python";
  std::ofstream(fake) << "#!/bin/sh\n"
                         "[ \"$1 $2 $3\" = \"-m kloop_rmsnorm.shadow --inputs\" ] || exit 9\n"
                         "[ -f \"$PYTHONPATH/kloop_rmsnorm/kernel.cubin\" ] || exit 8\n"
                         "echo 'warming up'\necho '"
                      << report.dump() << "'\nexit 1\n";
  fs::permissions(fake, fs::perms::owner_all);
  agent::ShadowOptions o;
  o.inputs = t.dir() / "inputs";
  o.python = fake.string();
  const auto r = agent::run_shadow(st, s.id, o);
  EXPECT_EQ(r.status, "fail") << r.reason;
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.report, report);
  ASSERT_FALSE(r.report_sha256.empty());
  EXPECT_EQ(json::parse(st.blob(r.report_sha256)), report);
  const auto d = st.load_session(s.id);
  const auto* tel = d.find_candidate(s.candidate_id)->telemetry_of("shadow");
  ASSERT_NE(tel, nullptr);
  EXPECT_EQ(tel->data["report_sha256"], r.report_sha256);
  EXPECT_EQ(tel->data["specialisations"], 2);
  const std::string table = agent::format_shadow_table(r);
  EXPECT_TRUE(has(table, "a.safetensors")) << table;
  EXPECT_TRUE(has(table, "FAIL")) << table;
  EXPECT_TRUE(has(table, "2 specialisation(s)")) << table;
}

TEST(Shadow, RefusesUnpromotedSessionUnlessAllowed) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kRejected);
  fs::create_directories(t.dir() / "inputs");
  agent::ShadowOptions o;
  o.inputs = t.dir() / "inputs";
  o.python = "/bin/false";
  const auto r = agent::run_shadow(st, s.id, o);
  EXPECT_EQ(r.exit_code, 2) << "a request the session cannot meet: usage (README)";
  EXPECT_TRUE(has(r.reason, "--allow-unpromoted")) << r.reason;
  o.allow_unpromoted = true;
  EXPECT_EQ(agent::run_shadow(st, s.id, o).status, "not_run");
}

TEST(ExportCli, BadRolloutFileAndUnpromotedSessionExitTwoNamingTheCause) {
  TempDir t;
  std::int64_t promoted = 0, pending = 0;
  {
    auto st = store::Store::open((t.dir() / "store").string());
    promoted = write_session(st, store::Decision::kPromoted).id;
    pending = write_session(st, store::Decision::kPendingDeviceValidation).id;
  }
  json bad = rollout().to_json();
  bad["owner"] = "x";
  std::ofstream(t.dir() / "bad.json") << bad.dump();
  std::ofstream(t.dir() / "good.json") << rollout().to_json().dump();
  const std::string store_dir = (t.dir() / "store").string();
  auto r = run({kKloop, "export", std::to_string(promoted), "--torch", (t.dir() / "o").string(),
                "--store", store_dir, "--rollout", (t.dir() / "bad.json").string()});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "unknown field `owner`")) << r.stderr_text;

  r = run({kKloop, "export", std::to_string(pending), "--torch", (t.dir() / "o").string(),
           "--store", store_dir});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "not promoted")) << r.stderr_text;

  r = run({kKloop, "export", std::to_string(promoted), "--torch", (t.dir() / "o").string(),
           "--store", store_dir, "--rollout", (t.dir() / "good.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(has(r.stdout_text, "rollout recorded in the store")) << r.stdout_text;
  EXPECT_EQ(json::parse(read_file(t.dir() / "o/kloop_rmsnorm/receipt.json"))["payload"]["rollout"],
            rollout().to_json());

  // A second export into the same folder would mix with the first: refused, files untouched.
  std::ofstream(t.dir() / "o/kloop_rmsnorm/mine.txt") << "user notes";
  r = run({kKloop, "export", std::to_string(promoted), "--torch", (t.dir() / "o").string(),
           "--store", store_dir});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "already holds files")) << r.stderr_text;
  EXPECT_EQ(read_file(t.dir() / "o/kloop_rmsnorm/mine.txt"), "user notes");
  // --torch naming a file, and a store that does not exist (not created).
  std::ofstream(t.dir() / "file.txt") << "x";
  r = run({kKloop, "export", std::to_string(promoted), "--torch", (t.dir() / "file.txt").string(),
           "--store", store_dir});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "is not a folder")) << r.stderr_text;
  r = run({kKloop, "export", std::to_string(promoted), "--torch", (t.dir() / "o2").string(),
           "--store", (t.dir() / "typo").string()});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "no store at")) << r.stderr_text;
  EXPECT_FALSE(fs::exists(t.dir() / "typo"));
}

// --- row_softmax/1 (kloop_softmax): the same export through the operator interface ---

namespace {

const op::Operator& softmax_op() {
  return softmax::operator_instance();
}

// The candidates a softmax session records, from kloop's own code: the offline generator's first
// member (the safe default: per_rows) and the in-tree baseline (persistent).
std::vector<Kernel> softmax_kernels() {
  const auto gen = softmax_op().offline_generator(1);
  const op::OfflineCandidate first = gen->next(nullptr);
  const fs::path baseline = fs::path(KLOOP_SOURCE_DIR) / softmax_op().baseline_folder();
  return {{std::string(softmax_op().name()), first.kernel_cu, first.manifest_json},
          {std::string(softmax_op().name()), read_file(baseline / "kernel.cu"),
           read_file(baseline / "manifest.json")}};
}

} // namespace

TEST(TorchExportSoftmax, PromotedSessionWritesKloopSoftmaxWithTheManifestValuesAndTheKernelAbi) {
  for (const Kernel& kernel : softmax_kernels()) {
    TempDir t;
    auto st = store::Store::open((t.dir() / "store").string());
    const auto s = write_session(st, store::Decision::kPromoted, kernel);
    agent::TorchExportOptions o;
    o.rollout = rollout();
    const auto r = agent::export_torch_package(st, s.id, t.dir() / "out", o);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.operator_name, "softmax");
    const fs::path pkg = t.dir() / "out" / "kloop_softmax";
    EXPECT_EQ(r.package_dir, pkg);
    EXPECT_FALSE(fs::exists(t.dir() / "out" / "kloop_rmsnorm"));
    std::vector<std::string> files = r.files;
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files,
              (std::vector<std::string>{"README.md", "__init__.py", "_config.py", "_dispatch.py",
                                        "_launch.py", "_reference.py", "export.json",
                                        "kernel.cubin", "manifest.json", "receipt.json"}))
        << "no shadow module and no file of another operator";
    EXPECT_EQ(read_file(pkg / "kernel.cubin"), fake_cubin());
    EXPECT_EQ(read_file(pkg / "manifest.json"), kernel.manifest);

    // _config.py holds the values kloop's manifest reader reads from the candidate's manifest.
    const auto parsed = op::parse_manifest(softmax_op().declaration(), kernel.manifest);
    ASSERT_TRUE(parsed.manifest);
    const op::Variant& v = parsed.manifest->variants.at(0);
    const std::string config = read_file(pkg / "_config.py");
    const bool persistent = v.launch.grid == op::GridKind::kPersistent;
    const bool contiguous =
        v.when.rows.contains(0) && v.when.rows.at(0) == op::RowLayout::kContiguous;
    for (const std::string& line :
         {fmt::format("N_MIN = {}\n", v.when.axes[0].min),
          fmt::format("N_MAX = {}\n", v.when.axes[0].max),
          fmt::format("N_MULTIPLE_OF = {}\n", v.when.axes[0].multiple_of),
          fmt::format("X_ROWS = \"{}\"\n", contiguous ? "contiguous" : "any_stride"),
          fmt::format("ALIGNMENT_BYTES = {}\n", v.when.alignment_bytes),
          fmt::format("BLOCK_THREADS = {}\n", v.launch.block_threads),
          fmt::format("ROWS_PER_BLOCK = {}\n", v.launch.rows_per_block),
          fmt::format("GRID = \"{}\"\n", persistent ? "persistent" : "per_rows"),
          fmt::format("SMEM_FIXED_BYTES = {}\n", v.launch.smem_fixed_bytes),
          fmt::format("SMEM_BYTES_PER_N = {}\n", v.launch.smem_bytes_per_unit),
          fmt::format(
              "ENTRY_POINTS = {{\"bfloat16\":\"{}\",\"float16\":\"{}\",\"float32\":\"{}\"}}",
              v.entry_points.at(DType::kBFloat16), v.entry_points.at(DType::kFloat16),
              v.entry_points.at(DType::kFloat32)),
          std::string("PROMOTED = True\n"), std::string("TARGET = \"sm_90\"\n"),
          std::string("OPERATOR = \"row_softmax\"\n"),
          std::string("CONTRACT_ID = \"row_softmax/1\"\n"),
          std::string("PACKAGE = \"kloop_softmax\"\n"),
          std::string("KILL_SWITCH_ENV = \"KLOOP_SOFTMAX_DISABLE\"\n"),
          std::string("ROW_AXIS = \"N\"\n"),
          // The declaration and the GPU worker's parameter order (kernels/abi_pack.cpp): written
          // out here, not derived, so a change of the ABI shows in this test.
          std::string("TENSORS = [[\"x\", \"input\", True], [\"y\", \"output\", True]]\n"),
          std::string(
              "ABI = [[\"x\", \"tensor\", 0, \"const T*\"], [\"y\", \"tensor\", 1, \"T*\"], "
              "[\"rows\", \"rows\", -1, \"long long\"], [\"N\", \"axis\", 0, \"int\"], "
              "[\"x_row_stride\", \"row_stride\", 0, \"long long\"], "
              "[\"y_row_stride\", \"row_stride\", 1, \"long long\"]]\n"),
          std::string("\"float32\":{\"atol\":1e-30,\"row_floor\":1e-30,\"row_rtol\":0.0001,"
                      "\"rtol\":0.0001}"),
          fmt::format("DISPATCH_TEXT = {}\n",
                      nlohmann::json(
                          op::dispatch_predicate_text(softmax_op().declaration(), *parsed.manifest))
                          .dump())})
      EXPECT_TRUE(has(config, line)) << line << "\n" << config;
    for (const char* absent : {"H_MIN", "SMEM_BYTES_PER_H", "weight"})
      EXPECT_FALSE(has(config, absent)) << absent;

    const std::string init = read_file(pkg / "__init__.py");
    EXPECT_TRUE(has(init, "torch.library.custom_op(\"kloop::row_softmax\", mutates_args=())"));
    EXPECT_TRUE(has(init, "@_row_softmax_op.register_fake"));
    EXPECT_TRUE(has(init, "register_autograd(_backward"));
    EXPECT_TRUE(has(init, "KLOOP_SOFTMAX_DISABLE"));
    // The declared errors in kernels/softmax/reference.cpp's order: non_strided_layout,
    // bad_rank, unsupported_dtype, unsupported_device.
    std::size_t at = 0;
    for (const char* check : {"x.layout != torch.strided", "x.dim() < 1",
                              "x.dtype not in DTYPE_NAMES", "x.device.type not in devices"}) {
      const std::size_t next = init.find(check);
      ASSERT_NE(next, std::string::npos) << check;
      EXPECT_GT(next, at) << check << " out of the contract's order";
      at = next;
    }
    EXPECT_TRUE(
        has(read_file(pkg / "_reference.py"), "torch.softmax(x.float(), dim=-1).to(x.dtype)"));
    EXPECT_TRUE(has(read_file(pkg / "_launch.py"), "cuLaunchKernel"));
    EXPECT_FALSE(has(read_file(pkg / "_dispatch.py"), "weight"));
    const std::string readme = read_file(pkg / "README.md");
    for (const char* text : {"# kloop_softmax (session", "kloop::row_softmax(Tensor x) -> Tensor",
                             "`KLOOP_SOFTMAX_DISABLE=1`", "kloop_softmax.stats()"})
      EXPECT_TRUE(has(readme, text)) << text << "\n" << readme;
    EXPECT_FALSE(has(readme, "@")) << "a placeholder left: " << readme;
    EXPECT_FALSE(has(readme, "kloop_rmsnorm")) << readme;

    const json exp = json::parse(read_file(pkg / "export.json"));
    EXPECT_EQ(exp["contract"], "row_softmax/1");
    EXPECT_EQ(exp["package"], "kloop_softmax");
    EXPECT_EQ(exp["custom_op"], "kloop::row_softmax");
    EXPECT_EQ(exp["kill_switch"], "KLOOP_SOFTMAX_DISABLE");
    const json receipt = json::parse(read_file(pkg / "receipt.json"));
    EXPECT_EQ(receipt["payload"]["rollout"], rollout().to_json());
    EXPECT_EQ(exp["cubin_sha256"], receipt["payload"]["loaded_artifact_sha256"]);
    ASSERT_TRUE(r.rollout_recorded);
    EXPECT_EQ(st.load_session(s.id).promotion->evidence["rollout"], rollout().to_json());
  }
}

TEST(TorchExportSoftmax, RefusesUnpromotedDamagedAndFormatTwoSessions) {
  const Kernel kernel = softmax_kernels().front();
  TempDir t;
  const fs::path dir = t.dir() / "store";
  auto st = store::Store::open(dir.string());
  // Unpromoted: refused (2), then exported with --allow-unpromoted and marked.
  const auto pending = write_session(st, store::Decision::kPendingDeviceValidation, kernel);
  const auto refused = agent::export_torch_package(st, pending.id, t.dir() / "o1", {});
  EXPECT_EQ(refused.exit_code, 2) << refused.error;
  EXPECT_TRUE(has(refused.error, "not promoted")) << refused.error;
  EXPECT_FALSE(fs::exists(t.dir() / "o1" / "kloop_softmax"));
  agent::TorchExportOptions allow;
  allow.allow_unpromoted = true;
  const auto review = agent::export_torch_package(st, pending.id, t.dir() / "o1", allow);
  ASSERT_TRUE(review.ok) << review.error;
  EXPECT_TRUE(has(read_file(t.dir() / "o1/kloop_softmax/_config.py"), "PROMOTED = False"));
  EXPECT_TRUE(has(read_file(t.dir() / "o1/kloop_softmax/__init__.py"), "was NOT promoted"));
  EXPECT_TRUE(has(read_file(t.dir() / "o1/kloop_softmax/README.md"), "NOT PROMOTED"));

  // A format-2 manifest (the precision corpus's variants entry): refused with the reason (2).
  const fs::path variants =
      fs::path(KLOOP_SOURCE_DIR) / softmax_op().folder() / "precision/variants_int32_register_rows";
  const auto two = write_session(st, store::Decision::kPromoted,
                                 {kernel.operator_name, read_file(variants / "kernel.cu"),
                                  read_file(variants / "manifest.json")});
  const auto r2 = agent::export_torch_package(st, two.id, t.dir() / "o2", {});
  EXPECT_EQ(r2.exit_code, 2) << r2.error;
  EXPECT_TRUE(has(r2.error, "format 2")) << r2.error;
  EXPECT_FALSE(fs::exists(t.dir() / "o2" / "kloop_softmax"));

  // Damaged: the promoted candidate's cubin blob is gone from the store: a store error (the CLI
  // exits 3), and no package.
  const auto promoted = write_session(st, store::Decision::kPromoted, kernel);
  const auto d = st.load_session(promoted.id);
  const auto* art =
      d.find_candidate(promoted.candidate_id)->artifact_of(store::ArtifactKind::kCubin);
  ASSERT_NE(art, nullptr);
  fs::remove(st.blobs().path(art->sha256));
  EXPECT_THROW((void)agent::export_torch_package(st, promoted.id, t.dir() / "o3", {}),
               store::StoreError);
  EXPECT_FALSE(fs::exists(t.dir() / "o3" / "kloop_softmax"));
  const auto cli = run({kKloop, "export", std::to_string(promoted.id), "--torch",
                        (t.dir() / "o4").string(), "--store", dir.string()});
  EXPECT_EQ(cli.exit_code, 3) << cli.stderr_text;
  EXPECT_FALSE(fs::exists(t.dir() / "o4" / "kloop_softmax"));
}

TEST(TorchExportSoftmax, EveryPythonFileCompilesAndShadowIsRefused) {
  TempDir t;
  auto st = store::Store::open((t.dir() / "store").string());
  const auto s = write_session(st, store::Decision::kPromoted, softmax_kernels().back());
  const auto cli = run({kKloop, "export", std::to_string(s.id), "--torch", (t.dir() / "o").string(),
                        "--store", (t.dir() / "store").string()});
  ASSERT_EQ(cli.exit_code, 0) << cli.stderr_text;
  EXPECT_TRUE(has(cli.stdout_text, "kloop_softmax")) << cli.stdout_text;
  const std::string python = agent::find_on_path("python3");
  if (!python.empty()) {
    int compiled = 0;
    for (const auto& f : fs::directory_iterator(t.dir() / "o/kloop_softmax")) {
      if (f.path().extension() != ".py") continue;
      const auto call =
          run({python, "-c",
               "import py_compile, sys; py_compile.compile(sys.argv[1], "
               "cfile=sys.argv[2], doraise=True)",
               f.path().string(), (t.dir() / (f.path().filename().string() + "c")).string()});
      EXPECT_EQ(call.exit_code, 0) << f.path() << ": " << call.stderr_text;
      ++compiled;
    }
    EXPECT_EQ(compiled, 5);
  }
  fs::create_directories(t.dir() / "inputs");
  agent::ShadowOptions o;
  o.inputs = t.dir() / "inputs";
  o.python = "/bin/false";
  const auto shadow = agent::run_shadow(st, s.id, o);
  EXPECT_EQ(shadow.exit_code, 2) << shadow.reason;
  EXPECT_TRUE(has(shadow.reason, "no shadow module")) << shadow.reason;
}
