// Receipt payload from the store, signing and verification.
#include "store/receipt.h"

#include <sodium.h>

#include <fmt/core.h>

#include "store/error.h"
#include "store/hash.h"
#include "store/jcs.h"
#include "store/store.h"
#include "store/text_view.h"

namespace kloop::store {

bool unhex(const std::string& s, unsigned char* out, std::size_t n); // keys.cpp

namespace {

using nlohmann::json;

json str_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json field_or_null(const json& obj, const char* key) {
  if (obj.is_object() && obj.contains(key) && !obj[key].is_null()) return obj[key];
  return nullptr;
}

json blob_ref(const std::string& sha) {
  if (sha.empty()) return nullptr;
  return {{"uri", fmt::format("kloop-store:blobs/{}/{}", sha.substr(0, 2), sha.substr(2))},
          {"sha256", sha}};
}

json gate_status(const CandidateDetail* c, const char* gate) {
  const GateRecord* g = c ? c->gate(gate) : nullptr;
  return g ? json(name(g->status)) : json("not_run");
}

json gate_evidence(const CandidateDetail* c, const char* gate, const char* key) {
  const GateRecord* g = c ? c->gate(gate) : nullptr;
  return g ? field_or_null(g->evidence, key) : json(nullptr);
}

// The memory section: a "memory" telemetry row when one was written, else one entry per GPU
// worker process of the candidate ("device_memory" rows: mode, tool, peak device bytes allocated
// and in use, host peak RSS), or null when neither exists.
json memory_report(const CandidateDetail* c) {
  if (c == nullptr) return nullptr;
  if (const auto* m = c->telemetry_of("memory")) return m->data;
  json workers = json::array();
  for (const auto& t : c->telemetry) {
    if (t.kind != "device_memory" || !t.data.is_object()) continue;
    const json dm = t.data.value("device_memory", json());
    if (!dm.is_object()) continue; // a worker that left no result (e.g. an ncu run that failed)
    json w = {{"mode", field_or_null(t.data, "mode")},
              {"tool", field_or_null(t.data, "tool")},
              {"peak_allocated_bytes", field_or_null(dm, "peak_allocated_bytes")},
              {"peak_used_bytes", field_or_null(dm, "peak_used_bytes")},
              {"total_bytes", field_or_null(dm, "total_bytes")},
              {"max_rss_kib", field_or_null(t.data, "max_rss_kib")}};
    if (t.data.contains("sanitizer_tool")) w["sanitizer_tool"] = t.data["sanitizer_tool"];
    workers.push_back(std::move(w));
  }
  if (workers.empty()) return nullptr;
  return {{"gpu_worker_processes", workers},
          {"scope", "per worker process: cudaMalloc peak of the worker's own allocations and "
                    "peak device memory in use (cudaMemGetInfo), host peak RSS"}};
}

// The holdout section: the sealed-holdout run of candidate `c` (the latest when several) and its
// commitment, else the session's latest commitment with status not_run. Fields without evidence
// (no run: no report, no retirement, no commitment check) stay null and block signing.
json holdout_section(const SessionDetail& d, const CandidateDetail* c) {
  const HoldoutRunRecord* run = nullptr;
  for (const auto& r : d.holdout_runs)
    if (c && r.candidate_id == c->candidate.id) run = &r;
  const HoldoutCommitmentRecord* commitment =
      run ? d.find_commitment(run->commitment_id)
          : (d.holdout_commitments.empty() ? nullptr : &d.holdout_commitments.back());
  return {{"commitment_sha256", commitment ? str_or_null(commitment->commitment_sha256) : json()},
          {"suite_version", commitment ? str_or_null(commitment->suite_version) : json()},
          {"status", run ? json(name(run->status)) : json("not_run")},
          {"commitment_verified", run ? field_or_null(run->result, "commitment_verified") : json()},
          {"report_uri_and_sha256", run ? blob_ref(run->report_sha256) : json()},
          {"retired", run ? json(run->retired) : json()}};
}

// Throws DamagedStore unless blob `sha`, named by payload field `field` of session `id`, is in the
// store and re-hashes to its name (BlobStore::check, the check `kloop store verify` makes). A null
// `sha` is no evidence, not damage: sign_payload lists it among the null fields.
void require_intact_blob(const Store& store, std::int64_t id, const std::string& field,
                         const json& sha) {
  if (sha.is_null()) return;
  const std::string text = sha.is_string() ? sha.get<std::string>() : sha.dump();
  std::string state;
  if (!sha.is_string() || !is_sha256_hex(text)) {
    state = "not a SHA-256 hex digest (an edited or damaged row)";
  } else {
    switch (store.blobs().check(text)) {
    case BlobState::kOk:
      return;
    case BlobState::kMissing:
      state = "missing from the store";
      break;
    case BlobState::kAltered:
      state = "altered (its bytes no longer hash to its name)";
      break;
    }
  }
  throw DamagedStore(fmt::format(
      "receipt: session {}: `{}` names blob {}, which is {}; the evidence is damaged, so nothing "
      "is signed or recorded; run `{}` and restore the store from a backup",
      id, field, text, state, kloop_command("store verify", store.dir())));
}

// Checks every blob the payload names (require_intact_blob): the candidate source, the loaded
// cubin, the case results, the sanitizer reports, the raw benchmark samples and the holdout report.
void require_payload_blobs(const Store& store, std::int64_t id, const json& p) {
  const auto at = [&](const char* pointer) {
    const json::json_pointer ptr(pointer);
    return p.contains(ptr) ? p.at(ptr) : json();
  };
  require_intact_blob(store, id, "candidate_source_sha256", at("/candidate_source_sha256"));
  require_intact_blob(store, id, "loaded_artifact_sha256", at("/loaded_artifact_sha256"));
  require_intact_blob(store, id, "correctness.case_results_uri_and_sha256.sha256",
                      at("/correctness/case_results_uri_and_sha256/sha256"));
  const auto each = [&](const char* list, const char* key, const char* dotted) {
    const json items = at(list);
    if (!items.is_array()) return;
    for (std::size_t i = 0; i < items.size(); ++i)
      require_intact_blob(store, id, fmt::format("{}[{}].{}", dotted, i, key),
                          field_or_null(items[i], key));
  };
  each("/sanitizers/commands_and_report_hashes", "report_sha256",
       "sanitizers.commands_and_report_hashes");
  each("/benchmark/raw_samples_uri_and_sha256", "sha256", "benchmark.raw_samples_uri_and_sha256");
  require_intact_blob(store, id, "holdout.report_uri_and_sha256.sha256",
                      at("/holdout/report_uri_and_sha256/sha256"));
}

// Throws DamagedStore when a status, verdict or decision code that the receipt reads (session
// row, promotion, the receipt's candidate and its gates, holdout runs) is one this binary does
// not know (an edited or damaged row): its name would be "unknown" in a signed payload.
void require_known_codes(const SessionDetail& d, std::int64_t id, const std::string& dir) {
  struct Code {
    std::string field;
    std::string_view name;
    int value;
  };
  std::vector<Code> codes{
      {"session status", name(d.session.status), static_cast<int>(d.session.status)}};
  if (d.session.verdict)
    codes.push_back(
        {"session verdict", name(*d.session.verdict), static_cast<int>(*d.session.verdict)});
  if (d.promotion)
    codes.push_back({"promotion decision", name(d.promotion->decision),
                     static_cast<int>(d.promotion->decision)});
  if (const CandidateDetail* c = d.best_candidate()) {
    codes.push_back({fmt::format("verdict of candidate {}", c->candidate.id),
                     name(c->candidate.verdict), static_cast<int>(c->candidate.verdict)});
    for (const auto& g : c->gates)
      codes.push_back({fmt::format("status of gate `{}` of candidate {}", g.name, c->candidate.id),
                       name(g.status), static_cast<int>(g.status)});
  }
  for (const auto& r : d.holdout_runs)
    codes.push_back({fmt::format("status of holdout run {}", r.id), name(r.status),
                     static_cast<int>(r.status)});
  for (const auto& code : codes)
    if (code.name == "unknown")
      throw DamagedStore(fmt::format(
          "receipt: session {}: the {} holds code {}, which this kloop does not know (an edited "
          "or damaged row, or a newer kloop wrote it); nothing is signed or recorded; check it "
          "with `{}` and run `{}`",
          id, code.field, code.value, kloop_command(fmt::format("show {}", id), dir),
          kloop_command("store verify", dir)));
}

void collect_nulls(const json& v, const std::string& path, std::vector<std::string>& out) {
  if (v.is_null()) {
    out.push_back(path);
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      collect_nulls(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (v.is_array()) { // e.g. a sanitizer run without an exit code, a worker without a peak
    for (std::size_t i = 0; i < v.size(); ++i)
      collect_nulls(v[i], fmt::format("{}[{}]", path, i), out);
  }
}

} // namespace

json build_receipt_payload(const SessionDetail& d, const json& manifest,
                           const std::optional<std::string>& reviewer,
                           const std::optional<std::string>& key_id) {
  const CandidateDetail* c = d.best_candidate();
  const json prom_ev = d.promotion ? d.promotion->evidence : json::object();
  std::string status = "pending_device_validation";
  if (d.promotion)
    status = std::string(name(d.promotion->decision));
  else if (d.session.verdict == VerdictCode::kReject)
    status = "rejected";

  json dispatch = field_or_null(prom_ev, "dispatch");
  if (dispatch.is_null()) dispatch = field_or_null(manifest, "dispatch");

  json arch = nullptr;
  const json target = field_or_null(manifest, "target");
  if (target.is_string() && !d.session.device_arch.empty())
    arch = fmt::format("{} kernel on {} device", target.get<std::string>(), d.session.device_arch);

  json flags = gate_evidence(c, "build", "flags");
  json sanitizer_version = nullptr;
  json sanitizer_runs = json::array();
  json loaded = nullptr, case_results = nullptr;
  if (c) {
    for (const auto& t : c->tool_calls) {
      if (flags.is_null() && t.tool == "nvrtc") flags = t.argv;
      if (t.tool != "compute-sanitizer") continue;
      if (!t.tool_version.empty()) sanitizer_version = t.tool_version;
      sanitizer_runs.push_back({{"argv", t.argv},
                                {"exit_code", t.exit_code ? json(*t.exit_code) : json(nullptr)},
                                {"report_sha256", str_or_null(t.stdout_sha256)}});
    }
    if (const auto* a = c->artifact_of(ArtifactKind::kCubin)) loaded = a->sha256;
    if (const auto* a = c->artifact_of(ArtifactKind::kCaseResults))
      case_results = blob_ref(a->sha256);
    // The gate's own record of the version (`compute-sanitizer --version`), when the tool-call
    // rows carry none.
    if (sanitizer_version.is_null()) {
      const json v = gate_evidence(c, "sanitizer", "tool_version");
      if (v.is_string() && !v.get<std::string>().empty()) sanitizer_version = v; // "" = unparsed
    }
  }
  json raw_samples = json::array();
  if (c)
    for (const auto& b : c->benchmarks)
      raw_samples.push_back({{"series", b.series},
                             {"uri", blob_ref(b.samples_sha256)["uri"]},
                             {"sha256", b.samples_sha256}});
  const json memory = memory_report(c);
  const json rollout = field_or_null(prom_ev, "rollout");
  // The session's row chain head when the payload was built (store/chain.h): `store verify`
  // finds a chain rewritten after signing because it no longer holds this link.
  const json row_chain =
      d.chain_head ? json{{"links", d.chain_head->links}, {"head_sha256", d.chain_head->sha256}}
                   : json("not_chained: the session was recorded before kloop chained its rows, "
                          "so its rows carry no hash");

  return {
      {"operator", str_or_null(d.session.operator_name)},
      {"contract_version", str_or_null(d.session.contract_version)},
      {"status", status},
      {"candidate_source_sha256", c ? str_or_null(c->candidate.source_sha256) : json(nullptr)},
      {"loaded_artifact_sha256", loaded},
      {"dispatch", dispatch},
      {"approval_identity",
       {{"reviewer", reviewer ? json(*reviewer) : json(nullptr)},
        {"signing_key_id", key_id ? json(*key_id) : json(nullptr)}}},
      {"target",
       {{"gpu_uuid", str_or_null(d.session.device_uuid)},
        {"architecture_and_features", arch},
        {"driver", str_or_null(d.session.driver_version)},
        {"compiler_toolkit", str_or_null(d.session.toolkit_version)},
        {"pytorch_cuda_build", "not_applicable: kloop's trusted wrapper is C++/CUDA, no PyTorch"},
        {"pytorch_version", "not_applicable: kloop's trusted wrapper is C++/CUDA, no PyTorch"},
        {"compiler_flags", flags}}},
      {"correctness",
       {{"suite_and_policy_sha256", gate_evidence(c, "correctness", "suite_sha256")},
        {"reference_sha256", gate_evidence(c, "correctness", "reference_sha256")},
        {"status", gate_status(c, "correctness")},
        {"case_results_uri_and_sha256", case_results}}},
      {"sanitizers",
       {{"tool_version", sanitizer_version},
        {"commands_and_report_hashes", sanitizer_runs.empty() ? json(nullptr) : sanitizer_runs},
        {"status", gate_status(c, "sanitizer")}}},
      {"benchmark",
       {{"protocol_and_workload_sha256", gate_evidence(c, "benchmark", "protocol_sha256")},
        {"baseline_revision_and_precision", gate_evidence(c, "benchmark", "baseline")},
        {"timing_and_cache_scope", gate_evidence(c, "benchmark", "timing_scope")},
        {"raw_samples_uri_and_sha256", raw_samples.empty() ? json(nullptr) : raw_samples},
        {"status", gate_status(c, "benchmark")}}},
      {"holdout", holdout_section(d, c)},
      {"row_chain", row_chain},
      {"memory",
       {{"live_reserved_workspace_and_cache_report", memory.is_null() ? json(nullptr) : memory}}},
      {"rollout",
       {{"feature_flag_and_scope", field_or_null(rollout, "feature_flag_and_scope")},
        {"healthy_worker_recovery_and_reference_target",
         field_or_null(rollout, "healthy_worker_recovery_and_reference_target")},
        {"revalidation_policy", field_or_null(rollout, "revalidation_policy")}}}};
}

json receipt_manifest(const Store& store, const SessionDetail& d) {
  const CandidateDetail* c = d.best_candidate();
  if (!c || c->candidate.manifest_sha256.empty()) return nullptr;
  auto j = json::parse(store.blob(c->candidate.manifest_sha256), nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

std::vector<std::string> null_fields(const json& payload) {
  std::vector<std::string> out;
  collect_nulls(payload, "", out);
  return out;
}

std::vector<std::string> empty_rollout_fields(const json& payload) {
  std::vector<std::string> out;
  const json rollout = payload.is_object() ? payload.value("rollout", json()) : json();
  for (const char* f : {"feature_flag_and_scope", "healthy_worker_recovery_and_reference_target",
                        "revalidation_policy"}) {
    const json v = rollout.is_object() ? rollout.value(f, json()) : json();
    if (!v.is_string() || v.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos)
      out.push_back(std::string("rollout.") + f);
  }
  return out;
}

json sign_payload(const json& payload, const KeyPair& key) {
  if (const auto empty = empty_rollout_fields(payload); !empty.empty()) {
    std::string list;
    for (const auto& f : empty)
      list += (list.empty() ? "" : ", ") + f;
    throw Refused(fmt::format(
        "receipt: the rollout section is empty ({}): a receipt without a feature flag and scope, "
        "a healthy-worker recovery and reference target and a revalidation policy is not "
        "signable for deployment; record them with `kloop export ID --torch DIR --rollout FILE`",
        list));
  }
  const auto nulls = null_fields(payload);
  if (!nulls.empty()) {
    std::string list;
    for (const auto& f : nulls)
      list += (list.empty() ? "" : ", ") + f;
    throw DamagedStore(fmt::format("receipt: {} field(s) are null (missing evidence) and block "
                                   "signing: {}; record that evidence in the store first",
                                   nulls.size(), list));
  }
  // A promotion needs every gate passed (seed, "promotion ladder"): a payload that says promoted
  // next to a gate that did not pass contradicts itself (an edited or damaged record) and is
  // never signed.
  // The same for the sealed holdout: a promotion needs it passed against a verified commitment,
  // and the suite retired after its one use.
  if (payload.is_object() && payload.value("status", json()) == "promoted") {
    const auto field = [&](const char* section, const char* key) {
      return payload.contains(section) && payload[section].is_object()
                 ? payload[section].value(key, json())
                 : json();
    };
    const std::pair<const char*, json> needed[] = {
        {"correctness.status", "pass"},        {"sanitizers.status", "pass"},
        {"benchmark.status", "pass"},          {"holdout.status", "pass"},
        {"holdout.commitment_verified", true}, {"holdout.retired", true}};
    for (const auto& [path, want] : needed) {
      const std::string p = path, section = p.substr(0, p.find('.'));
      const json got = field(section.c_str(), p.substr(p.find('.') + 1).c_str());
      if (got != want)
        throw DamagedStore(fmt::format(
            "receipt: the payload says promoted but `{}` is {}: a promotion needs every gate and "
            "the sealed holdout passed (commitment verified, suite retired), so the record "
            "contradicts itself (edited or damaged?); check the session with kloop show and kloop "
            "store verify before signing",
            path, got.dump()));
    }
  }
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  if (!unhex(key.secret_hex, sk, sizeof sk))
    throw StoreError("receipt: the secret key is not valid hex; regenerate it");
  const std::string canonical = jcs_canonicalize(payload);
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(canonical.data()),
                       canonical.size(), sk);
  sodium_memzero(sk, sizeof sk);
  std::string sig_hex(sizeof sig * 2 + 1, '\0');
  sodium_bin2hex(sig_hex.data(), sig_hex.size(), sig, sizeof sig);
  sig_hex.pop_back();
  return {{"payload", payload},
          {"approval",
           {{"canonical_payload_sha256", sha256_hex(canonical)},
            {"signature", sig_hex},
            {"signing_key_id", key.key_id}}}};
}

json sign_session_receipt(Store& store, std::int64_t id, const KeyPair& key,
                          const std::string& reviewer) {
  // The step (BEGIN IMMEDIATE) holds the write lock from the read to the receipts row, so no
  // other kloop (`export --rollout`) changes what is signed in between: the receipt covers the
  // store as it is when the row is recorded. Nothing is recorded when any check below throws.
  auto step = store.begin_step();
  const SessionDetail d = store.load_session(id);
  require_known_codes(d, id, store.dir());
  if (!d.promotion || d.promotion->decision != Decision::kPromoted) {
    const std::string status = d.promotion
                                   ? std::string(name(d.promotion->decision))
                                   : (d.session.verdict ? std::string(name(*d.session.verdict))
                                                        : std::string(name(d.session.status)));
    throw NotPromoted(fmt::format("session {} was not promoted (status {}); only promoted "
                                  "sessions are signed (`{}` says why)",
                                  id, status,
                                  kloop_command(fmt::format("show {}", id), store.dir())));
  }
  // Every recorded gate of a promoted candidate must have passed, not only the three the payload
  // carries (format, contract, build, static and roofline too).
  if (d.promotion && d.promotion->decision == Decision::kPromoted) {
    const CandidateDetail* c = d.best_candidate();
    if (!c || c->candidate.verdict != VerdictCode::kPass)
      throw DamagedStore(fmt::format(
          "receipt: session {} is recorded as promoted but its promoted candidate {} passing; the "
          "record contradicts itself (edited or damaged?); check it with `{}`",
          id, c ? "is not recorded as" : "is missing, not",
          kloop_command(fmt::format("show {}", id), store.dir())));
    for (const auto& g : c->gates)
      if (g.status != GateCode::kPass)
        throw DamagedStore(fmt::format(
            "receipt: session {} is recorded as promoted but gate `{}` of candidate {} is {}: a "
            "promotion needs every gate passed, so the record contradicts itself (edited or "
            "damaged?); check it with `{}`",
            id, g.name, c->candidate.id, name(g.status),
            kloop_command(fmt::format("show {}", id), store.dir())));
  }
  if (const CandidateDetail* c = d.best_candidate(); c && !c->candidate.manifest_sha256.empty())
    require_intact_blob(store, id, fmt::format("manifest of candidate {}", c->candidate.id),
                        c->candidate.manifest_sha256);
  const json payload = build_receipt_payload(d, receipt_manifest(store, d), reviewer, key.key_id);
  require_payload_blobs(store, id, payload);
  json receipt = sign_payload(payload, key);
  ReceiptRecord r;
  r.session_id = id;
  r.payload_sha256 = receipt["approval"]["canonical_payload_sha256"];
  r.receipt_sha256 = step.put_blob(receipt.dump(2));
  r.signing_key_id = key.key_id;
  r.reviewer = reviewer;
  step.add_receipt(r);
  step.commit();
  return receipt;
}

ReceiptCheck verify_receipt(const json& receipt, const json& registry) {
  auto fail = [](std::string m) { return ReceiptCheck{false, "receipt verify: " + std::move(m)}; };
  if (!receipt.is_object() || !receipt.contains("payload") || !receipt["payload"].is_object())
    return fail("no `payload` object; is this a kloop receipt?");
  if (!receipt.contains("approval") || !receipt["approval"].is_object())
    return fail("no `approval` object; the receipt is unsigned");
  const json& ap = receipt["approval"];
  for (const char* f : {"canonical_payload_sha256", "signature", "signing_key_id"})
    if (!ap.contains(f) || !ap[f].is_string())
      return fail(fmt::format("`approval.{}` is missing or not a string", f));
  const std::string key_id = ap["signing_key_id"];
  if (!registry.is_object() || !registry.contains(key_id) || !registry[key_id].is_string())
    return fail(fmt::format("signing key `{}` is not in the key registry; the receipt was signed "
                            "by an unknown key",
                            key_id));
  const std::string pub_hex = registry[key_id];
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  if (!unhex(pub_hex, pk, sizeof pk))
    return fail(
        fmt::format("registry entry for `{}` is not a {}-byte hex public key", key_id, sizeof pk));
  if (key_id_of(pub_hex) != key_id)
    return fail(fmt::format("registry public key for `{}` hashes to key id `{}`: the registry "
                            "entry was changed or belongs to another key",
                            key_id, key_id_of(pub_hex)));
  if (const auto payload_key =
          receipt["payload"].value("/approval_identity/signing_key_id"_json_pointer, json());
      payload_key.is_string() && payload_key.get<std::string>() != key_id)
    return fail(fmt::format("payload names signing key `{}` but the approval names `{}`",
                            payload_key.get<std::string>(), key_id));
  std::string canonical;
  try {
    canonical = jcs_canonicalize(receipt["payload"]);
  } catch (const std::exception& e) {
    return fail(std::string("payload cannot be canonicalised: ") + e.what());
  }
  const std::string sha = sha256_hex(canonical);
  if (sha != ap["canonical_payload_sha256"])
    return fail(fmt::format("payload hash mismatch: canonical payload hashes to {} but the "
                            "approval records {}; the payload was altered after signing",
                            sha, ap["canonical_payload_sha256"].get<std::string>()));
  unsigned char sig[crypto_sign_BYTES];
  if (!unhex(ap["signature"], sig, sizeof sig))
    return fail(fmt::format("`approval.signature` is not {} bytes of hex", sizeof sig));
  if (crypto_sign_verify_detached(sig, reinterpret_cast<const unsigned char*>(canonical.data()),
                                  canonical.size(), pk) != 0)
    return fail(fmt::format("Ed25519 signature does not verify with key `{}`: the signature or "
                            "the payload was altered, or another key signed it",
                            key_id));
  return {true, fmt::format("receipt verifies: key {}, payload sha256 {}", key_id, sha)};
}

} // namespace kloop::store
