// `kloop export --torch`: the Python package for a session's promoted candidate (torch_export.h).
#include "agent/torch_export.h"

#include <cctype>
#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/core.h>

#include "evaluator/gate.h"
#include "kernels/manifest.h"
#include "kernels/registry.h"
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

std::string upper(std::string_view name) {
  std::string out(name);
  for (char& ch : out)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return out;
}

// A Python literal of a JSON value (true/false/null as True/False/None).
std::string py_literal(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i)
      out += (i ? ", " : "") + py_literal(v[i]);
    return out + "]";
  }
  return v.dump();
}

// Why the package's Python wrapper (export_templates/_dispatch.py, _launch.py) cannot serve
// operator `op`, or "": it mirrors declarations whose tensors all have the call's dtype and one
// dim, the one variable axis (the row axis), whose first tensor is a batched input and whose one
// output is batched and fresh (no input-output tensor), and that have templates of their own.
std::string python_wrapper_refusal(const op::Operator& op) {
  const op::Declaration& d = op.declaration();
  const std::string prefix = std::string(op.cli_name()) + "/";
  bool templates = false;
  for (const auto& t : export_templates())
    templates |= std::string_view(t.name).starts_with(prefix);
  if (!templates)
    return fmt::format("the torch export has no templates for {} (agent/export_templates/{}/)",
                       op.contract_id(), op.cli_name());
  int outputs = 0;
  for (const op::Tensor& t : d.tensors) {
    if (t.dims.size() != 1 || t.dtype != op::DTypeRule::kCall)
      return fmt::format("{}'s tensor {} is not a one-dimensional row of the call's dtype; the "
                         "torch export's Python wrapper mirrors only those",
                         op.contract_id(), t.name);
    if (t.role == op::Role::kInputOutput)
      return fmt::format("{}'s tensor {} is written in place; the torch export's custom ops "
                         "return fresh outputs only",
                         op.contract_id(), t.name);
    outputs += t.role == op::Role::kOutput ? 1 : 0;
  }
  const bool one_output_last =
      !d.tensors.empty() && d.tensors.back().role == op::Role::kOutput && d.tensors.back().batched;
  if (d.axes.size() != 1 || !d.axes[0].variable || outputs != 1 || !one_output_last ||
      d.tensors.front().role != op::Role::kInput || !d.tensors.front().batched)
    return fmt::format("{} is not batched inputs and one batched output over one variable axis; "
                       "the torch export's Python wrapper mirrors only that shape",
                       op.contract_id());
  return {};
}

// The candidate's manifest read against `op`'s declaration (op::parse_manifest). The package's
// Python dispatch (export_templates/_dispatch.py) mirrors a format-1 predicate without max_rows /
// max_elements; any other manifest is refused here rather than exported with a predicate that
// would route calls the C++ wrapper sends to the reference.
op::Manifest exportable_manifest(const op::Operator& op, const std::string& manifest_text) {
  auto parsed = op::parse_manifest(op.declaration(), manifest_text);
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

// The operator a manifest names in its "contract" field, or throws std::invalid_argument.
const op::Operator& manifest_operator(const std::string& manifest_text) {
  const std::string id = op::manifest_contract(manifest_text);
  const op::Operator* op = op::find_operator(id);
  if (!op)
    throw std::invalid_argument(fmt::format("manifest.json's contract `{}` names no operator "
                                            "kloop knows ({})",
                                            id, op::operator_names()));
  return *op;
}

// _config.py's description of the declaration, read by the shared _dispatch.py and _launch.py.
std::string declaration_py(const op::Operator& op) {
  const op::Declaration& d = op.declaration();
  json tensors = json::array();
  for (const op::Tensor& t : d.tensors)
    tensors.push_back({t.name, op::role_name(t.role), t.batched});
  json abi = json::array();
  for (const op::AbiParam& p : op::abi(d)) {
    const char* kind = p.kind == op::AbiKind::kTensor      ? "tensor"
                       : p.kind == op::AbiKind::kRows      ? "rows"
                       : p.kind == op::AbiKind::kAxis      ? "axis"
                       : p.kind == op::AbiKind::kRowStride ? "row_stride"
                                                           : "scalar";
    abi.push_back({p.name, kind, p.index, p.c_type});
  }
  return fmt::format("# The declaration ({}/operator.cpp): tensors as (name, role, batched) in\n"
                     "# declaration order; the kernel ABI (op::abi) as (name, class, declaration\n"
                     "# index, C type) in parameter order, packed by _launch.py.\n"
                     "ROW_AXIS = {}\nTENSORS = {}\nABI = {}\nKERNEL_SIGNATURE = {}\n",
                     op.folder(), py(d.axes.at(0).name), py_literal(tensors), py_literal(abi),
                     py(op::kernel_signature(d)));
}

} // namespace

std::string package_name(const op::Operator& op) {
  return "kloop_" + std::string(op.cli_name());
}

std::string kill_switch_env(const op::Operator& op) {
  return "KLOOP_" + upper(op.cli_name()) + "_DISABLE";
}

std::string render_config_py(const std::string& manifest_text, const json& meta) {
  return render_config_py(manifest_operator(manifest_text), manifest_text, meta);
}

std::string render_config_py(const op::Operator& op, const std::string& manifest_text,
                             const json& meta) {
  if (const std::string why = python_wrapper_refusal(op); !why.empty())
    throw std::invalid_argument(why);
  const op::Declaration& decl = op.declaration();
  const op::Manifest m = exportable_manifest(op, manifest_text);
  const op::Variant& v = m.variants[0];
  const std::string axis = upper(decl.axes.at(0).name);
  const op::AxisRange& range = v.when.axes.at(0);
  json entry = json::object();
  for (const auto& [dtype, name] : v.entry_points)
    entry[std::string(dtype_name(dtype))] = name;
  json tol = json::object();
  for (DType d : kAllDTypes)
    tol[std::string(dtype_name(d))] =
        op.tolerance(d, static_cast<int>(decl.tensors.size()) - 1).to_json();
  const bool promoted = meta.value("promoted", false);
  std::string out;
  out += fmt::format("# Generated by `kloop export --torch` from the candidate's manifest.json and "
                     "the\n# {} contract ({}/contract.cpp). Do not edit: re-export.\n",
                     op.contract_id(), op.folder());
  out += fmt::format("OPERATOR = {}\nCONTRACT_ID = {}\nPACKAGE = {}\nKILL_SWITCH_ENV = {}\n",
                     py(std::string(op.name())), py(op.contract_id()), py(package_name(op)),
                     py(kill_switch_env(op)));
  out += fmt::format("SESSION_ID = {}\nCANDIDATE_ID = {}\nPROMOTED = {}\nSTATUS = {}\n",
                     meta.value("session_id", 0), meta.value("candidate_id", 0),
                     promoted ? "True" : "False", py(meta.value("status", "")));
  out += fmt::format("CUBIN_SHA256 = {}\nSOURCE_SHA256 = {}\n", py(meta.value("cubin_sha256", "")),
                     py(meta.value("source_sha256", "")));
  out += fmt::format("TARGET = {}\nENTRY_POINTS = {}\n", py(m.target), py(entry));
  out += fmt::format("BLOCK_THREADS = {}\nROWS_PER_BLOCK = {}\nGRID = {}\n", v.launch.block_threads,
                     v.launch.rows_per_block,
                     py(v.launch.grid == op::GridKind::kPersistent ? "persistent" : "per_rows"));
  out += fmt::format("SMEM_FIXED_BYTES = {}\nSMEM_BYTES_PER_{} = {}\n", v.launch.smem_fixed_bytes,
                     axis, v.launch.smem_bytes_per_unit);
  out += fmt::format("{0}_MIN = {1}\n{0}_MAX = {2}\n{0}_MULTIPLE_OF = {3}\n", axis, range.min,
                     range.max, range.multiple_of);
  for (std::size_t t = 0; t < decl.tensors.size(); ++t) {
    if (!decl.tensors[t].batched || decl.tensors[t].role != op::Role::kInput) continue;
    const auto rows = v.when.rows.find(static_cast<int>(t));
    const bool contiguous = rows != v.when.rows.end() && rows->second == op::RowLayout::kContiguous;
    out += fmt::format("{}_ROWS = {}\n", upper(decl.tensors[t].name),
                       py(contiguous ? "contiguous" : "any_stride"));
  }
  out += fmt::format("ALIGNMENT_BYTES = {}\n", v.when.alignment_bytes);
  out += fmt::format("DISPATCH_TEXT = {}\n", py(op::dispatch_predicate_text(decl, m)));
  out += fmt::format("# Per-dtype tolerance: |a-e| <= atol + rtol*|e| per element; per row\n"
                     "# ||a-e||_2 <= row_rtol * max(||e||_2, row_floor).\nTOLERANCE = {}\n",
                     py(tol));
  out += declaration_py(op);
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
  const op::Operator* op = op::find_operator(d.session.operator_name);
  if (!op) {
    r.exit_code = 2;
    r.error = fmt::format("session {} is of operator `{}`, which this kloop does not know ({}); "
                          "export it with the kloop that recorded it",
                          session_id, d.session.operator_name, op::operator_names());
    return r;
  }
  r.operator_name = std::string(op->cli_name());
  std::string config;
  try {
    config = render_config_py(*op, manifest_text, meta);
  } catch (const std::invalid_argument& e) {
    r.exit_code = 2;
    r.error = fmt::format("session {} candidate {}: {}", session_id, c->candidate.id, e.what());
    return r;
  }

  // The output folder is checked before anything is recorded in the store.
  r.package_dir = dir / package_name(*op);
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

  const op::Manifest manifest = exportable_manifest(*op, manifest_text);
  json exp = meta;
  exp["kloop_export"] = 1;
  exp["contract"] = op->contract_id();
  exp["package"] = package_name(*op);
  exp["custom_op"] = "kloop::" + std::string(op->name());
  exp["kill_switch"] = kill_switch_env(*op);
  exp["manifest_sha256"] = c->candidate.manifest_sha256;
  exp["dispatch"] = op::dispatch_predicate_text(op->declaration(), manifest);
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
  // The shared templates, then the operator's own (export_templates/<cli name>/, the folder
  // dropped); the operator's README.md is the shared README's @OPERATOR_README@ section.
  const std::string own = r.operator_name + "/";
  std::string operator_readme;
  for (const auto& t : export_templates())
    if (std::string_view(t.name) == own + "README.md") operator_readme = t.text;
  for (const auto& t : export_templates()) {
    std::string name = t.name;
    if (name.starts_with(own))
      name.erase(0, own.size());
    else if (name.find('/') != std::string::npos)
      continue; // another operator's
    if (name == "README.md" && std::string_view(t.name) != name) continue;
    std::string text = t.text;
    if (name == "README.md") {
      text = replace_all(text, "@OPERATOR_README@", operator_readme);
      text = replace_all(text, "@PACKAGE@", package_name(*op));
      text = replace_all(text, "@KILL_SWITCH@", kill_switch_env(*op));
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
    put(name, text);
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
