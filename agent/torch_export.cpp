// `kloop export --torch`: the Python package for a session's promoted candidate (torch_export.h).
#include "agent/torch_export.h"

#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/core.h>

#include "evaluator/gate.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/operator.h"
#include "store/error.h"
#include "store/receipt.h"
#include "store/store.h"

namespace kloop::agent {
namespace {

using nlohmann::json;

constexpr const char* kRolloutKeys[] = {"feature_flag_and_scope",
                                        "healthy_worker_recovery_and_reference_target",
                                        "revalidation_policy"};

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw evaluator::InfraError(fmt::format("kloop export: cannot write {}; check the directory "
                                            "permissions and free space",
                                            path.string()));
}

// A Python literal of a JSON string/number/object without booleans or nulls.
std::string py(const json& v) {
  return v.dump();
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
  return text;
}

// The candidate to export, or nullptr: the promoted one; with allow_unpromoted the frozen one,
// else the best passing one, else the latest with a cubin.
const store::CandidateDetail* pick_candidate(const store::SessionDetail& d, bool promoted,
                                             bool allow_unpromoted) {
  if (promoted || (allow_unpromoted && d.promotion && d.promotion->candidate_id))
    return d.find_candidate(*d.promotion->candidate_id);
  if (!allow_unpromoted) return nullptr;
  if (const auto* best = d.best_candidate()) return best;
  const store::CandidateDetail* last = nullptr;
  for (const auto& it : d.iterations)
    for (const auto& c : it.candidates)
      if (c.artifact_of(store::ArtifactKind::kCubin) && !c.candidate.manifest_sha256.empty())
        last = &c;
  return last;
}

// What record_rollout did.
struct RolloutRecorded {
  bool recorded = false; // the rollout is in the latest promotion decision's evidence
  std::string refused;   // why it was not recorded although a decision exists, or ""
};

// Attaches `rollout` to session `session_id`'s latest promotion decision, in place: the
// decision, its candidate, reason and decided_at stay and no second decision row is written, so
// exporting again never moves the decision. A rollout it replaces is kept in the evidence's
// `rollouts_replaced` (with when it was recorded). Once a receipt is signed, another rollout is
// refused (the signature would no longer match the store). The check and the write are one step
// under the store's write lock (re-read there), so a receipt signed meanwhile is seen. Not
// recorded, and not refused, when there is no decision to attach it to.
RolloutRecorded record_rollout(store::Store& st, std::int64_t session_id, const Rollout& rollout) {
  auto step = st.begin_step();
  const store::SessionDetail d = st.load_session(session_id);
  if (!d.promotion) return {};
  json evidence = d.promotion->evidence.is_object() ? d.promotion->evidence : json::object();
  const json recorded = evidence.value("rollout", json());
  if (recorded == rollout.to_json()) return {true, ""};
  if (!d.receipts.empty())
    return {false,
            fmt::format(
                "session {} has a signed receipt over the rollout recorded in the store ({}); "
                "recording another rollout would make that signature no longer match: export "
                "without --rollout (the recorded rollout is used) or with the same rollout file",
                session_id, recorded.dump())};
  if (!recorded.is_null()) {
    json replaced = evidence.value("rollouts_replaced", json::array());
    if (!replaced.is_array()) replaced = json::array({replaced});
    replaced.push_back(
        {{"rollout", recorded}, {"recorded_at", evidence.value("rollout_recorded_at", json())}});
    evidence["rollouts_replaced"] = replaced;
  }
  evidence["rollout"] = rollout.to_json();
  evidence["rollout_recorded_by"] = "kloop export --rollout";
  evidence["rollout_recorded_at"] = store::now_iso8601();
  step.set_promotion_evidence(d.promotion->id, evidence);
  step.commit();
  return {true, ""};
}

// The newest signed receipt of `d` whose payload is `payload` but for approval_identity (the
// reviewer and key the signature names), as the store keeps it (the receipt blob, re-hashed);
// null when none matches. A receipt whose blob is missing or altered is skipped and named in
// `note`.
json signed_receipt(const store::Store& st, const store::SessionDetail& d, const json& payload,
                    std::string& note) {
  for (auto it = d.receipts.rbegin(); it != d.receipts.rend(); ++it) {
    json receipt;
    try {
      receipt = json::parse(st.blob(it->receipt_sha256), nullptr, false);
    } catch (const store::StoreError& e) {
      note = fmt::format("signed receipt {} skipped: {}", it->id, e.what());
      continue;
    }
    if (!receipt.is_object() || !receipt.contains("payload") || !receipt["payload"].is_object())
      continue;
    json signed_payload = receipt["payload"];
    signed_payload["approval_identity"] = payload.value("approval_identity", json());
    // Rows recorded after signing (the receipt's own row, the run's resources) extend the row
    // chain: the receipt still covers the store while the chain holds its signed head.
    const json head = signed_payload.value("row_chain", json());
    if (head.is_object() &&
        d.chain_holds(head.value("links", std::int64_t{0}), head.value("head_sha256", "")))
      signed_payload["row_chain"] = payload.value("row_chain", json());
    if (signed_payload == payload) return receipt;
  }
  if (!d.receipts.empty() && note.empty())
    note = fmt::format("session {} has {} signed receipt(s), none over the receipt as the store "
                       "now holds it (signed before the store changed?); receipt.json is unsigned",
                       d.session.id, d.receipts.size());
  return nullptr;
}

} // namespace

json Rollout::to_json() const {
  return {{"feature_flag_and_scope", feature_flag_and_scope},
          {"healthy_worker_recovery_and_reference_target",
           healthy_worker_recovery_and_reference_target},
          {"revalidation_policy", revalidation_policy}};
}

RolloutParse parse_rollout(std::string_view text) {
  // A key given twice would be read last-wins by the parser while a reviewer reads the first:
  // refuse it (RFC 8259 leaves duplicate names undefined).
  std::set<std::string> seen;
  std::string duplicate;
  const json::parser_callback_t on_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  const json j = json::parse(text, on_key, false);
  auto fail = [](std::string m) { return RolloutParse{std::nullopt, "rollout file: " + m}; };
  if (j.is_discarded()) return fail("not valid JSON; write one object with the three fields");
  if (!duplicate.empty())
    return fail(fmt::format("field `{}` appears more than once; give each field once", duplicate));
  if (!j.is_object())
    return fail(fmt::format("expected a JSON object with {}, {} and {}; got {}", kRolloutKeys[0],
                            kRolloutKeys[1], kRolloutKeys[2], j.type_name()));
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kRolloutKeys)
      known |= it.key() == k;
    if (!known)
      return fail(fmt::format("unknown field `{}`; allowed: {}, {}, {}", it.key(), kRolloutKeys[0],
                              kRolloutKeys[1], kRolloutKeys[2]));
  }
  std::string values[3];
  for (int i = 0; i < 3; ++i) {
    const char* k = kRolloutKeys[i];
    if (!j.contains(k)) return fail(fmt::format("missing field `{}`; every field is required", k));
    if (!j[k].is_string())
      return fail(fmt::format("field `{}` must be a string, got {}", k, j[k].type_name()));
    values[i] = j[k].get<std::string>();
    if (values[i].find_first_not_of(" \t\r\n") == std::string::npos)
      return fail(fmt::format("field `{}` is empty; describe it (the seed's rollout policy)", k));
  }
  return {Rollout{values[0], values[1], values[2]}, {}};
}

namespace {

// The candidate's manifest read against weighted_rmsnorm/1's declaration (op::parse_manifest).
// The package's Python dispatch (export_templates/_dispatch.py) mirrors a format-1 predicate
// without max_rows / max_elements; any other manifest is refused here rather than exported with a
// predicate that would route calls the C++ wrapper sends to the reference.
op::Manifest exportable_manifest(const std::string& manifest_text) {
  auto parsed = op::parse_manifest(rmsnorm::declaration(), manifest_text);
  if (!parsed.manifest)
    throw std::invalid_argument("manifest.json does not parse: " + parsed.errors.at(0).message);
  const op::Manifest& m = *parsed.manifest;
  if (m.format != 1 || m.variants.size() != 1)
    throw std::invalid_argument(fmt::format(
        "manifest.json is format {} with {} variants; the torch export's Python dispatch "
        "(_dispatch.py) mirrors format 1 only (one entry point per dtype, one dispatch predicate)",
        m.format, m.variants.size()));
  const op::When& w = m.variants[0].when;
  if (w.max_rows || w.max_elements)
    throw std::invalid_argument("manifest.json's dispatch sets max_rows or max_elements; the torch "
                                "export's Python dispatch (_dispatch.py) does not check them");
  return std::move(*parsed.manifest);
}

} // namespace

std::string render_config_py(const std::string& manifest_text, const json& meta) {
  const op::Declaration& decl = rmsnorm::declaration();
  const op::Manifest m = exportable_manifest(manifest_text);
  const op::Variant& v = m.variants[0];
  const op::AxisRange& h = v.when.axes.at(static_cast<std::size_t>(decl.axis_index("H")));
  const auto x_rows = v.when.rows.find(decl.tensor_index("x"));
  const bool x_contiguous =
      x_rows != v.when.rows.end() && x_rows->second == op::RowLayout::kContiguous;
  json entry = json::object();
  for (const auto& [dtype, name] : v.entry_points)
    entry[std::string(dtype_name(dtype))] = name;
  json tol = json::object();
  for (DType d : kAllDTypes)
    tol[std::string(dtype_name(d))] = rmsnorm::tolerance_for(d).to_json();
  const bool promoted = meta.value("promoted", false);
  std::string out;
  out += "# Generated by `kloop export --torch` from the candidate's manifest.json and the\n"
         "# weighted_rmsnorm/1 contract (kernels/rmsnorm/contract.cpp). Do not edit: re-export.\n";
  out += fmt::format("SESSION_ID = {}\nCANDIDATE_ID = {}\nPROMOTED = {}\nSTATUS = {}\n",
                     meta.value("session_id", 0), meta.value("candidate_id", 0),
                     promoted ? "True" : "False", py(meta.value("status", "")));
  out += fmt::format("CUBIN_SHA256 = {}\nSOURCE_SHA256 = {}\n", py(meta.value("cubin_sha256", "")),
                     py(meta.value("source_sha256", "")));
  out += fmt::format("TARGET = {}\nENTRY_POINTS = {}\n", py(m.target), py(entry));
  out += fmt::format("BLOCK_THREADS = {}\nROWS_PER_BLOCK = {}\nGRID = {}\n", v.launch.block_threads,
                     v.launch.rows_per_block,
                     py(v.launch.grid == op::GridKind::kPersistent ? "persistent" : "per_rows"));
  out += fmt::format("SMEM_FIXED_BYTES = {}\nSMEM_BYTES_PER_H = {}\n", v.launch.smem_fixed_bytes,
                     v.launch.smem_bytes_per_unit);
  out += fmt::format("H_MIN = {}\nH_MAX = {}\nH_MULTIPLE_OF = {}\nX_ROWS = {}\n"
                     "ALIGNMENT_BYTES = {}\n",
                     h.min, h.max, h.multiple_of, py(x_contiguous ? "contiguous" : "any_stride"),
                     v.when.alignment_bytes);
  out += fmt::format("DISPATCH_TEXT = {}\n", py(op::dispatch_predicate_text(decl, m)));
  out += fmt::format("# Per-dtype tolerance: |a-e| <= atol + rtol*|e| per element; per row\n"
                     "# ||a-e||_2 <= row_rtol * max(||e||_2, row_floor).\nTOLERANCE = {}\n",
                     py(tol));
  return out;
}

TorchExportResult export_torch_package(store::Store& st, std::int64_t session_id,
                                       const std::filesystem::path& dir,
                                       const TorchExportOptions& options) {
  TorchExportResult r;
  const auto d = st.load_session(session_id);
  r.promoted = d.promotion && d.promotion->decision == store::Decision::kPromoted &&
               d.promotion->candidate_id;
  const std::string status =
      d.promotion ? std::string(store::name(d.promotion->decision)) : "no promotion decision";
  const store::CandidateDetail* c = pick_candidate(d, r.promoted, options.allow_unpromoted);
  if (!c) {
    r.exit_code = r.promoted ? 3 : 2; // a promoted session names its candidate: damaged if absent
    r.error = r.promoted || options.allow_unpromoted
                  ? fmt::format("session {} has no candidate with a cubin to export", session_id)
                  : fmt::format("session {} is not promoted ({}); only promoted candidates "
                                "are exported or shadowed; pass --allow-unpromoted to use its "
                                "frozen candidate for review (the package then says it is "
                                "unpromoted)",
                                session_id, status);
    return r;
  }
  const auto* cubin_art = c->artifact_of(store::ArtifactKind::kCubin);
  if (!cubin_art || c->candidate.manifest_sha256.empty() || c->candidate.source_sha256.empty()) {
    r.exit_code = r.promoted ? 3 : 2;
    r.error = fmt::format("session {} candidate {} has no cubin, manifest or source in the store; "
                          "nothing to export",
                          session_id, c->candidate.id);
    return r;
  }
  r.candidate_id = c->candidate.id;
  const std::string cubin = st.blob(cubin_art->sha256);
  const std::string manifest_text = st.blob(c->candidate.manifest_sha256);
  const json meta = {{"session_id", session_id},
                     {"candidate_id", c->candidate.id},
                     {"promoted", r.promoted},
                     {"status", r.promoted ? "promoted" : status},
                     {"cubin_sha256", cubin_art->sha256},
                     {"source_sha256", c->candidate.source_sha256}};
  std::string config;
  try {
    config = render_config_py(manifest_text, meta);
  } catch (const std::invalid_argument& e) {
    r.exit_code = 2;
    r.error = fmt::format("session {} candidate {}: {}", session_id, c->candidate.id, e.what());
    return r;
  }

  // The output folder is checked before anything is recorded in the store.
  r.package_dir = dir / "kloop_rmsnorm";
  std::error_code fec;
  if (!std::filesystem::exists(dir, fec) &&
      !std::filesystem::is_directory(std::filesystem::absolute(dir, fec).parent_path(), fec)) {
    r.error = fmt::format("cannot write --torch {}: its parent folder does not exist; give a "
                          "folder path in an existing folder",
                          dir.string());
    r.exit_code = 2;
    return r;
  }
  if (std::filesystem::exists(dir, fec) && !std::filesystem::is_directory(dir, fec)) {
    r.error = fmt::format("--torch {} is not a folder; give a folder to write the package into",
                          dir.string());
    r.exit_code = 2;
    return r;
  }
  if (std::filesystem::exists(r.package_dir, fec) &&
      !std::filesystem::is_empty(r.package_dir, fec)) {
    r.error = fmt::format("{} already holds files (an earlier export?); remove it or choose "
                          "another --torch folder, so no stale file mixes into the package",
                          r.package_dir.string());
    r.exit_code = 2;
    return r;
  }
  if (options.rollout) {
    const RolloutRecorded rec = record_rollout(st, session_id, *options.rollout);
    if (!rec.refused.empty()) {
      r.exit_code = 2;
      r.error = rec.refused;
      return r;
    }
    r.rollout_recorded = rec.recorded;
  }
  // Reloaded into a new detail: `c` and `cubin_art` point into `d`.
  const store::SessionDetail now = r.rollout_recorded ? st.load_session(session_id) : d;
  json payload = store::build_receipt_payload(now, store::receipt_manifest(st, now), std::nullopt,
                                              std::nullopt);
  if (options.rollout && !r.rollout_recorded) payload["rollout"] = options.rollout->to_json();
  r.receipt = signed_receipt(st, now, payload, r.receipt_note);
  r.receipt_signed = !r.receipt.is_null();
  if (!r.receipt_signed)
    r.receipt = {{"payload", payload},
                 {"approval",
                  {{"canonical_payload_sha256", nullptr},
                   {"signature", nullptr},
                   {"signing_key_id", nullptr}}}};

  const op::Manifest manifest = exportable_manifest(manifest_text);
  json exp = meta;
  exp["kloop_export"] = 1;
  exp["manifest_sha256"] = c->candidate.manifest_sha256;
  exp["dispatch"] = op::dispatch_predicate_text(rmsnorm::declaration(), manifest);
  exp["target"] = manifest.target;
  exp["rollout"] = options.rollout ? options.rollout->to_json() : json(nullptr);
  exp["rollout_recorded_in_store"] = r.rollout_recorded;
  exp["exported_at"] = store::now_iso8601();
  if (!r.promoted)
    exp["warning"] = fmt::format("NOT PROMOTED: session {} ended {}; this package is for review "
                                 "and testing only, not for deployment",
                                 session_id, status);

  std::filesystem::create_directories(r.package_dir);
  auto put = [&](const std::string& name, std::string_view bytes) {
    write_file(r.package_dir / name, bytes);
    r.files.push_back(name);
  };
  for (const auto& t : export_templates()) {
    std::string text = t.text;
    if (std::string_view(t.name) == "README.md") {
      text = replace_all(text, "@SESSION_ID@", std::to_string(session_id));
      text = replace_all(text, "@CANDIDATE_ID@", std::to_string(c->candidate.id));
      text = replace_all(text, "@STATUS@", r.promoted ? "promoted" : "NOT PROMOTED");
      text = replace_all(text, "@PROMOTION_NOTE@",
                         r.promoted ? "Promoted by kloop: every hard gate and the holdout passed."
                                    : "**" + exp["warning"].get<std::string>() + "**");
      text = replace_all(text, "@TARGET@", manifest.target);
      text = replace_all(text, "@DISPATCH@", exp["dispatch"].get<std::string>());
      text = replace_all(text, "@CUBIN_SHA256@", cubin_art->sha256);
    }
    put(t.name, text);
  }
  put("_config.py", config);
  put("kernel.cubin", cubin);
  put("manifest.json", manifest_text);
  put("receipt.json", r.receipt.dump(2) + "\n");
  put("export.json", exp.dump(2) + "\n");
  r.ok = true;
  return r;
}

} // namespace kloop::agent
