// Receipts: payload filled from the store, null fields block signing, Ed25519 verification with
// precise failures.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <thread>

#include "store/error.h"
#include "store/hash.h"
#include "store/jcs.h"
#include "store/receipt.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

using testing::TempDir;

struct Signed {
  nlohmann::json receipt, registry;
};

Signed sign_fake(TempDir& t) {
  Store st = Store::open(t.path());
  const auto id = testing::write_fake_session(st, 2);
  const KeyPair kp = generate_keypair();
  return {sign_session_receipt(st, id, kp, "alice"), {{kp.key_id, kp.public_hex}}};
}

bool mentions(const std::string& msg, const std::string& what) {
  return msg.find(what) != std::string::npos;
}

// Edits the database of the store in `dir` behind the store's back with `sql`, then expects
// signing session `id` to throw StoreError mentioning every word of `words`, and nothing recorded.
void expect_signing_refused_after_edit(const std::string& dir, std::int64_t id, const KeyPair& kp,
                                       const std::string& sql,
                                       const std::vector<std::string>& words) {
  Db("file:" + dir + "/kloop.db", SQLITE_OPEN_READWRITE, "test edit").exec(sql);
  Store st = Store::open(dir);
  try {
    sign_session_receipt(st, id, kp, "alice");
    FAIL() << "signed after: " << sql;
  } catch (const StoreError& e) {
    for (const auto& w : words)
      EXPECT_TRUE(mentions(e.what(), w)) << e.what();
  }
  EXPECT_TRUE(st.load_session(id).receipts.empty());
}

TEST(ReceiptTest, CompleteSessionSignsAndVerifies) {
  TempDir t;
  const Signed s = sign_fake(t);
  const auto& p = s.receipt["payload"];
  EXPECT_EQ(p["operator"], "weighted_rmsnorm");
  EXPECT_EQ(p["status"], "promoted");
  EXPECT_EQ(p["approval_identity"]["reviewer"], "alice");
  EXPECT_EQ(p["target"]["gpu_uuid"], "GPU-1234");
  EXPECT_EQ(p["correctness"]["status"], "pass");
  // Filled from the layout the loop writes: the sanitizer gate's own tool_version, one memory
  // entry per GPU worker process ("device_memory" rows), the case-results artifact.
  EXPECT_EQ(p["sanitizers"]["tool_version"], "2025.3.1.0");
  const auto& mem = p["memory"]["live_reserved_workspace_and_cache_report"];
  ASSERT_TRUE(mem.contains("gpu_worker_processes")) << mem.dump();
  ASSERT_EQ(mem["gpu_worker_processes"].size(), 2u);
  EXPECT_EQ(mem["gpu_worker_processes"][0]["mode"], "correctness");
  EXPECT_EQ(mem["gpu_worker_processes"][1]["peak_allocated_bytes"], 8423936);
  EXPECT_TRUE(p["correctness"]["case_results_uri_and_sha256"].contains("uri"));
  // The sealed holdout: the promoted candidate's run against the recorded commitment.
  const auto& h = p["holdout"];
  EXPECT_EQ(h["commitment_sha256"], std::string(64, 'e'));
  EXPECT_EQ(h["suite_version"], "h1");
  EXPECT_EQ(h["status"], "pass");
  EXPECT_EQ(h["commitment_verified"], true);
  EXPECT_EQ(h["retired"], true);
  const std::string report_sha = h["report_uri_and_sha256"]["sha256"];
  EXPECT_EQ(h["report_uri_and_sha256"]["uri"],
            "kloop-store:blobs/" + report_sha.substr(0, 2) + "/" + report_sha.substr(2));
  EXPECT_TRUE(null_fields(p).empty()) << p.dump();
  const ReceiptCheck c = verify_receipt(s.receipt, s.registry);
  EXPECT_TRUE(c.ok) << c.message;
  Store st = Store::open(t.path());
  EXPECT_EQ(st.load_session(1).receipts.size(), 1u);
}

TEST(ReceiptTest, OneChangedPayloadByteFailsWithHashMismatch) {
  TempDir t;
  Signed s = sign_fake(t);
  std::string op = s.receipt["payload"]["operator"];
  op[0] = 'W';
  s.receipt["payload"]["operator"] = op;
  const ReceiptCheck c = verify_receipt(s.receipt, s.registry);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c.message, "payload hash mismatch")) << c.message;
}

TEST(ReceiptTest, ChangedPayloadWithRecomputedHashFailsSignature) {
  TempDir t;
  Signed s = sign_fake(t);
  s.receipt["payload"]["status"] = "promotec";
  // Updating the recorded hash too does not help: the signature covers the payload bytes.
  s.receipt["approval"]["canonical_payload_sha256"] =
      sha256_hex(jcs_canonicalize(s.receipt["payload"]));
  const ReceiptCheck c = verify_receipt(s.receipt, s.registry);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c.message, "signature does not verify")) << c.message;
}

TEST(ReceiptTest, OneChangedSignatureByteFailsSignatureCheck) {
  TempDir t;
  Signed s = sign_fake(t);
  std::string sig = s.receipt["approval"]["signature"];
  sig[10] = sig[10] == '0' ? '1' : '0';
  s.receipt["approval"]["signature"] = sig;
  const ReceiptCheck c = verify_receipt(s.receipt, s.registry);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c.message, "signature does not verify")) << c.message;
}

TEST(ReceiptTest, ChangedRegistryKeyFails) {
  TempDir t;
  Signed s = sign_fake(t);
  const std::string id = s.receipt["approval"]["signing_key_id"];
  std::string pub = s.registry[id];
  pub[0] = pub[0] == 'a' ? 'b' : 'a';
  s.registry[id] = pub;
  const ReceiptCheck c = verify_receipt(s.receipt, s.registry);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c.message, "hashes to key id")) << c.message;
  // Another valid key registered under the same id also fails.
  s.registry[id] = generate_keypair().public_hex;
  EXPECT_FALSE(verify_receipt(s.receipt, s.registry).ok);
}

TEST(ReceiptTest, UnknownKeyIdFails) {
  TempDir t;
  Signed s = sign_fake(t);
  const KeyPair other = generate_keypair();
  const ReceiptCheck c = verify_receipt(s.receipt, {{other.key_id, other.public_hex}});
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c.message, "not in the key registry")) << c.message;
}

TEST(ReceiptTest, NullFieldRefusesToSignAndListsTheFields) {
  TempDir t;
  Store st = Store::open(t.path());
  const auto id =
      testing::write_fake_session(st, 1, "offline", "builtin-v1", /*with_device=*/false);
  const KeyPair kp = generate_keypair();
  try {
    sign_session_receipt(st, id, kp, "alice");
    FAIL() << "signed a receipt with null fields";
  } catch (const StoreError& e) {
    EXPECT_TRUE(mentions(e.what(), "target.gpu_uuid")) << e.what();
    EXPECT_TRUE(mentions(e.what(), "target.driver")) << e.what();
    EXPECT_TRUE(mentions(e.what(), "block signing")) << e.what();
  }
  EXPECT_TRUE(st.load_session(id).receipts.empty());
}

// A store edited (or damaged) so that a promoted session's candidate shows a failed gate: signing
// refuses and records nothing, and a payload that says promoted next to a failed gate is never
// signed whatever its source.
TEST(ReceiptTest, PromotedSessionWithAFailedGateIsNotSigned) {
  TempDir t;
  std::int64_t id = 0;
  {
    Store st = Store::open(t.path());
    id = testing::write_fake_session(st, 2);
  }
  const KeyPair kp = generate_keypair();
  // Signing refuses with `message` after the edit, and the edit kept candidate 2 the best.
  const auto edited_refuses = [&](const std::string& sql, const std::string& message) {
    expect_signing_refused_after_edit(t.path(), id, kp, sql, {message});
    EXPECT_EQ(Store::open(t.path()).load_session(id).best_candidate()->candidate.id, 2);
  };
  edited_refuses("UPDATE gate_results SET status = 1 WHERE name = 'roofline' AND candidate_id = "
                 "(SELECT MAX(id) FROM candidates)",
                 "gate `roofline` of candidate 2 is fail");
  // The same with the gate intact but the candidate's own verdict edited to reject.
  edited_refuses("UPDATE gate_results SET status = 0 WHERE name = 'roofline'; "
                 "UPDATE candidates SET verdict = 1 WHERE id = 2",
                 "is not recorded as passing");

  Store st = Store::open(t.path());
  const SessionDetail d = st.load_session(id);
  nlohmann::json p = build_receipt_payload(d, receipt_manifest(st, d), "alice", kp.key_id);
  ASSERT_EQ(p["status"], "promoted");
  p["correctness"]["status"] = "fail";
  try {
    sign_payload(p, kp);
    FAIL() << "signed a payload that says promoted next to a failed correctness gate";
  } catch (const StoreError& e) {
    EXPECT_TRUE(mentions(e.what(), "`correctness.status` is \"fail\"")) << e.what();
  }
}

// The holdout is part of the signed evidence: a promoted session whose holdout run is recorded as
// failed, or whose commitment was not verified, is refused like a failed gate; one without a
// holdout run has no holdout evidence (null fields) and is refused too; so is a session that was
// not promoted and never reached the holdout (pending: nulls everywhere the device would fill).
TEST(ReceiptTest, HoldoutThatDidNotPassOrDidNotRunIsNotSigned) {
  TempDir t;
  std::int64_t id = 0;
  {
    Store st = Store::open(t.path());
    id = testing::write_fake_session(st, 2);
  }
  const KeyPair kp = generate_keypair();
  const auto refuses_after = [&](const std::string& sql, const std::vector<std::string>& words) {
    expect_signing_refused_after_edit(t.path(), id, kp, sql, words);
  };
  refuses_after("UPDATE holdout_runs SET status = 1", {"`holdout.status` is \"fail\""});
  refuses_after("UPDATE holdout_runs SET status = 0, result_json = json_set(result_json, "
                "'$.commitment_verified', json('false'))",
                {"`holdout.commitment_verified` is false"});
  refuses_after("UPDATE holdout_runs SET result_json = json_set(result_json, "
                "'$.commitment_verified', json('true')), retired = 0",
                {"`holdout.retired` is false"});
  refuses_after("DELETE FROM holdout_runs",
                {"holdout.report_uri_and_sha256", "holdout.retired", "block signing"});
  {
    Store st = Store::open(t.path());
    const SessionDetail d = st.load_session(id);
    const nlohmann::json p = build_receipt_payload(d, receipt_manifest(st, d), "alice", "k1");
    EXPECT_EQ(p["holdout"]["status"], "not_run");
    EXPECT_EQ(p["holdout"]["commitment_sha256"], std::string(64, 'e')); // still committed
  }

  // A session that ended pending_device_validation on a CPU-only machine: no holdout run, no
  // promotion; its receipt lists the missing evidence and is not signed.
  TempDir t2;
  Store st = Store::open(t2.path());
  SessionRecord rec{.operator_name = "weighted_rmsnorm", .provider = "offline", .budget = 1};
  st.create_session(rec);
  {
    auto step = st.begin_step();
    HoldoutCommitmentRecord hc{
        .session_id = rec.id, .commitment_sha256 = std::string(64, 'f'), .suite_version = "h1"};
    step.add_holdout_commitment(hc);
    PromotionRecord pr{.session_id = rec.id,
                       .decision = Decision::kPendingDeviceValidation,
                       .reason = "no candidate could finish the device gates"};
    step.add_promotion(pr);
    step.commit();
  }
  st.finish_session(rec.id, SessionStatus::kCompleted, VerdictCode::kPendingDeviceValidation);
  const SessionDetail d = st.load_session(rec.id);
  const nlohmann::json p = build_receipt_payload(d, receipt_manifest(st, d), "alice", kp.key_id);
  EXPECT_EQ(p["status"], "pending_device_validation");
  EXPECT_EQ(p["holdout"]["status"], "not_run");
  const auto nulls = null_fields(p);
  EXPECT_NE(std::find(nulls.begin(), nulls.end(), "holdout.retired"), nulls.end());
  EXPECT_THROW(sign_session_receipt(st, rec.id, kp, "alice"), StoreError);
  EXPECT_TRUE(st.load_session(rec.id).receipts.empty());
}

// A session whose latest decision is not `promoted` (rejected, pending, or none recorded) is
// refused with NotPromoted saying so plainly, before any evidence check, and nothing is recorded.
TEST(ReceiptTest, SessionThatWasNotPromotedIsRefusedPlainly) {
  TempDir t;
  std::int64_t id = 0;
  {
    Store st = Store::open(t.path());
    id = testing::write_fake_session(st, 2);
  }
  const KeyPair kp = generate_keypair();
  const auto refused = [&](const std::string& status) {
    Store st = Store::open(t.path());
    try {
      sign_session_receipt(st, id, kp, "alice");
      FAIL() << "signed a session that was not promoted (" << status << ")";
    } catch (const NotPromoted& e) {
      EXPECT_EQ(std::string(e.what()).rfind("session 1 was not promoted (status " + status +
                                                "); only promoted sessions are signed",
                                            0),
                0u)
          << e.what();
      EXPECT_FALSE(mentions(e.what(), "null")) << e.what();
    }
    EXPECT_TRUE(st.load_session(id).receipts.empty());
  };
  const auto edit = [&](const std::string& sql) {
    Db("file:" + t.path() + "/kloop.db", SQLITE_OPEN_READWRITE, "test edit").exec(sql);
  };
  edit("UPDATE promotion_decisions SET decision = 1");
  refused("rejected");
  edit("UPDATE promotion_decisions SET decision = 2");
  refused("pending_device_validation");
  edit("DELETE FROM promotion_decisions; UPDATE sessions SET verdict = NULL, status = 2");
  refused(std::string(name(SessionStatus::kInterrupted)));
}

// Signing reads the session under the store's write lock: a writer holding the lock (here,
// another connection changing the recorded rollout, as `export --rollout` does) is waited for,
// and the receipt covers what it committed, never the state before it.
TEST(ReceiptTest, SigningWaitsForAWriterAndCoversWhatItCommitted) {
  TempDir t;
  std::int64_t id = 0;
  {
    Store st = Store::open(t.path());
    id = testing::write_fake_session(st, 2);
  }
  Store writer = Store::open(t.path());
  Store signer = Store::open(t.path());
  const KeyPair kp = generate_keypair();
  nlohmann::json receipt;
  std::string error;
  std::thread th;
  {
    auto step = writer.begin_step();
    const auto d = writer.load_session(id);
    nlohmann::json evidence = d.promotion->evidence;
    evidence["rollout"]["revalidation_policy"] = "changed while signing";
    step.set_promotion_evidence(d.promotion->id, evidence);
    th = std::thread([&] {
      try {
        receipt = sign_session_receipt(signer, id, kp, "alice");
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    step.commit();
  }
  th.join();
  ASSERT_EQ(error, "");
  EXPECT_EQ(receipt["payload"]["rollout"]["revalidation_policy"], "changed while signing");
  EXPECT_EQ(signer.load_session(id).receipts.size(), 1u);
}

// Signing re-hashes every blob the payload names (and the manifest it reads): one missing or
// altered blob, or a status/verdict code this binary does not know, is a damaged store
// (DamagedStore, the CLI exits 3); the message names the field and the blob, and nothing is
// recorded.
TEST(ReceiptTest, DamagedEvidenceOrUnknownCodesAreNotSigned) {
  const KeyPair kp = generate_keypair();
  // Fresh signable session; `damage` breaks it given the unsigned payload; signing must throw
  // DamagedStore mentioning every word of `words` and record nothing.
  const auto refuses =
      [&](const std::string& what,
          const std::function<std::vector<std::string>(TempDir&, Store&, const nlohmann::json&)>&
              damage) {
        SCOPED_TRACE(what);
        TempDir t;
        std::int64_t id = 0;
        nlohmann::json p;
        std::vector<std::string> words;
        {
          Store st = Store::open(t.path());
          id = testing::write_fake_session(st, 2);
          const SessionDetail d = st.load_session(id);
          p = build_receipt_payload(d, receipt_manifest(st, d), "alice", kp.key_id);
          ASSERT_TRUE(null_fields(p).empty()) << p.dump();
          words = damage(t, st, p);
        }
        Store st = Store::open(t.path());
        try {
          sign_session_receipt(st, id, kp, "alice");
          FAIL() << "signed after damage: " << what;
        } catch (const DamagedStore& e) {
          for (const auto& w : words)
            EXPECT_TRUE(mentions(e.what(), w)) << e.what();
          EXPECT_TRUE(mentions(e.what(), "kloop store verify")) << e.what();
        }
        EXPECT_TRUE(st.load_session(id).receipts.empty());
      };
  const auto blob_file = [](TempDir& t, const std::string& sha) {
    return t.path() + "/blobs/" + sha.substr(0, 2) + "/" + sha.substr(2);
  };
  const auto remove_blob = [&](const nlohmann::json::json_pointer& ptr, const std::string& field) {
    return [=](TempDir& t, Store&, const nlohmann::json& p) -> std::vector<std::string> {
      const std::string sha = p.at(ptr);
      EXPECT_EQ(std::remove(blob_file(t, sha).c_str()), 0) << sha;
      return {"`" + field + "`", sha, "missing"};
    };
  };
  const auto alter_blob = [&](const nlohmann::json::json_pointer& ptr, const std::string& field) {
    return [=](TempDir& t, Store&, const nlohmann::json& p) -> std::vector<std::string> {
      const std::string sha = p.at(ptr);
      const std::string f = blob_file(t, sha);
      ::chmod(f.c_str(), 0644);
      std::ofstream(f, std::ios::binary | std::ios::trunc) << "altered bytes";
      return {"`" + field + "`", sha, "altered"};
    };
  };
  using ptr = nlohmann::json::json_pointer;
  refuses("source missing",
          remove_blob(ptr("/candidate_source_sha256"), "candidate_source_sha256"));
  refuses("cubin altered", alter_blob(ptr("/loaded_artifact_sha256"), "loaded_artifact_sha256"));
  refuses("case results missing",
          remove_blob(ptr("/correctness/case_results_uri_and_sha256/sha256"),
                      "correctness.case_results_uri_and_sha256.sha256"));
  refuses("raw samples altered", alter_blob(ptr("/benchmark/raw_samples_uri_and_sha256/0/sha256"),
                                            "benchmark.raw_samples_uri_and_sha256[0].sha256"));
  refuses("sanitizer report missing",
          remove_blob(ptr("/sanitizers/commands_and_report_hashes/0/report_sha256"),
                      "sanitizers.commands_and_report_hashes[0].report_sha256"));
  refuses("holdout report altered", alter_blob(ptr("/holdout/report_uri_and_sha256/sha256"),
                                               "holdout.report_uri_and_sha256.sha256"));
  refuses("manifest missing",
          [&](TempDir& t, Store& st, const nlohmann::json&) -> std::vector<std::string> {
            const auto d = st.load_session(1);
            const std::string sha = d.best_candidate()->candidate.manifest_sha256;
            EXPECT_EQ(std::remove(blob_file(t, sha).c_str()), 0) << sha;
            return {"manifest of candidate 2", sha};
          });
  const auto edit = [](const std::string& sql, std::vector<std::string> words) {
    return [=](TempDir& t, Store&, const nlohmann::json&) {
      Db("file:" + t.path() + "/kloop.db", SQLITE_OPEN_READWRITE, "test edit").exec(sql);
      return words;
    };
  };
  refuses("unknown session status",
          edit("UPDATE sessions SET status = 9", {"session status holds code 9"}));
  refuses("unknown session verdict",
          edit("UPDATE sessions SET verdict = 7", {"session verdict holds code 7"}));
  refuses("unknown promotion decision",
          edit("UPDATE promotion_decisions SET decision = 5", {"promotion decision holds code 5"}));
}

TEST(ReceiptTest, NullsInsideListsAlsoBlockSigning) {
  TempDir t;
  Store st = Store::open(t.path());
  const auto id = testing::write_fake_session(st, 1);
  const SessionDetail d = st.load_session(id);
  nlohmann::json p = build_receipt_payload(d, receipt_manifest(st, d), "alice", "k1");
  ASSERT_TRUE(null_fields(p).empty()) << p.dump();
  p["sanitizers"]["commands_and_report_hashes"][0]["exit_code"] = nullptr; // killed by a signal
  const auto nulls = null_fields(p);
  ASSERT_EQ(nulls.size(), 1u);
  EXPECT_EQ(nulls[0], "sanitizers.commands_and_report_hashes[0].exit_code");
}

TEST(ReceiptTest, KeyFileIsPrivateAndRoundTrips) {
  TempDir t;
  const KeyPair kp = generate_keypair();
  const std::string path = t.path() + "/k.json";
  write_secret_key(path, kp);
  struct stat sb {};
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  const KeyPair back = read_secret_key(path);
  EXPECT_EQ(back.public_hex, kp.public_hex);
  EXPECT_EQ(back.key_id.size(), 16u);
  EXPECT_EQ(back.key_id, key_id_of(kp.public_hex));
  EXPECT_THROW(write_secret_key(path, kp), StoreError); // never overwrites
}

// A secret key file that group or others may read or write is refused before it is read, naming
// the file and the fix, as ssh does. Mode bits decide: the tests run as root, whom open() never
// stops.
TEST(ReceiptTest, KeyFileOpenToGroupOrOthersIsRefusedNamingTheFix) {
  TempDir t;
  const std::string path = t.path() + "/k.json";
  write_secret_key(path, generate_keypair());
  for (const mode_t mode : {0644, 0640, 0604, 0620, 0602, 0660}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    try {
      read_secret_key(path);
      FAIL() << "read a key file of mode " << std::oct << mode;
    } catch (const StoreError& e) {
      EXPECT_TRUE(mentions(e.what(), "chmod 600 " + path)) << e.what();
      EXPECT_TRUE(mentions(e.what(), "too open")) << e.what();
    }
  }
  for (const mode_t mode : {0600, 0400}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    EXPECT_NO_THROW(read_secret_key(path)) << std::oct << mode;
  }
}

// A key path that is not a regular file (a FIFO, a folder) is refused naming the path, and a
// FIFO with no writer never blocks the read.
TEST(ReceiptTest, KeyPathThatIsNoRegularFileIsRefusedWithoutBlocking) {
  TempDir t;
  const std::string fifo = t.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, t.path()}) {
    try {
      read_secret_key(path);
      FAIL() << "read a key from " << path;
    } catch (const StoreError& e) {
      EXPECT_TRUE(mentions(e.what(), path + " is not a regular file")) << e.what();
    }
  }
}

// A `key_id` field that is not a plain identifier ([A-Za-z0-9._-]+), or not the id of the file's
// public key, is refused naming the field; a file without one reads (the id is derived).
TEST(ReceiptTest, KeyIdFieldMustBePlainAndMatchThePublicKey) {
  TempDir t;
  const KeyPair kp = generate_keypair();
  const std::string path = t.path() + "/k.json";
  const auto write_with = [&](const nlohmann::json& key_id) {
    std::remove(path.c_str());
    nlohmann::json j = {{"public_key", kp.public_hex}, {"secret_key", kp.secret_hex}};
    if (!key_id.is_discarded()) j["key_id"] = key_id;
    std::ofstream(path) << j.dump();
    ::chmod(path.c_str(), 0600);
  };
  for (const nlohmann::json& bad :
       {nlohmann::json("ab cd"), nlohmann::json("../etc"), nlohmann::json("id\nX"),
        nlohmann::json(""), nlohmann::json(42), nlohmann::json("k\xC3\xA9y")}) {
    write_with(bad);
    try {
      read_secret_key(path);
      FAIL() << "read a key file with key_id " << bad.dump();
    } catch (const StoreError& e) {
      EXPECT_TRUE(mentions(e.what(), "`key_id`")) << e.what();
      EXPECT_TRUE(mentions(e.what(), "[A-Za-z0-9._-]")) << e.what();
      EXPECT_TRUE(mentions(e.what(), path)) << e.what();
    }
  }
  write_with("other-key_1.0");
  try {
    read_secret_key(path);
    FAIL() << "read a key file whose key_id is not its public key's";
  } catch (const StoreError& e) {
    EXPECT_TRUE(mentions(e.what(), "`key_id` other-key_1.0 is not the id of its `public_key`"))
        << e.what();
  }
  write_with(nlohmann::json(nlohmann::json::value_t::discarded));
  EXPECT_EQ(read_secret_key(path).key_id, kp.key_id);
  write_with(kp.key_id);
  EXPECT_EQ(read_secret_key(path).key_id, kp.key_id);
}

} // namespace
} // namespace kloop::store
