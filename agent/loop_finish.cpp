// Steps 3-5 of the refinement loop: freeze, holdout, promotion, receipt, export.
#include <algorithm>
#include <fstream>

#include <fmt/core.h>

#include "agent/loop_record.h"
#include "kernels/manifest.h"
#include "kernels/registry.h"
#include "store/error.h"
#include "store/receipt.h"
#include "store/text_view.h"

namespace kloop::agent {
namespace {

using evaluator::GateStatus;
using evaluator::PublicReport;
using evaluator::Verdict;

struct Frozen {
  const store::CandidateDetail* detail = nullptr;
  int iteration = 0;
  PublicReport report;
  const op::Operator* op = nullptr; // the session's operator
  op::Manifest manifest;
  evaluator::Candidate candidate;
  std::string cubin;
};

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!(out << bytes)) throw evaluator::InfraError("cannot write " + path.string());
}

// "1", "1-3", "1, 3, 5-6": 1-based iteration numbers in increasing order.
std::string iteration_list(const std::vector<int>& its) {
  std::string out;
  for (std::size_t i = 0; i < its.size();) {
    std::size_t j = i;
    while (j + 1 < its.size() && its[j + 1] == its[j] + 1)
      ++j;
    out += (out.empty() ? "" : ", ") +
           (j > i ? fmt::format("{}-{}", its[i], its[j]) : std::to_string(its[i]));
    i = j + 1;
  }
  return out;
}

// Why nothing passed: the not-run device gates (pending) or the failed gates (rejected). Iterations
// that share a gate and a reason share one entry ("iterations 1-5: correctness not run (...)"), so
// a CPU-only run states its one reason once; reasons are clipped at a word boundary.
std::string summarise_failures(const store::SessionDetail& d, bool pending) {
  struct Entry {
    std::string what, reason;
    std::vector<int> iterations;
  };
  std::vector<Entry> entries;
  const auto add = [&](int iteration, std::string what, std::string reason) {
    for (auto& e : entries) {
      if (e.what == what && e.reason == reason) {
        if (e.iterations.back() != iteration) e.iterations.push_back(iteration);
        return;
      }
    }
    entries.push_back({std::move(what), std::move(reason), {iteration}});
  };
  for (const auto& it : d.iterations) {
    const int n = static_cast<int>(it.iteration.index) + 1;
    for (const auto& c : it.candidates) {
      for (const auto& g : c.gates) {
        const bool relevant = pending ? g.status == store::GateCode::kNotRun &&
                                            g.reason.find("earlier gate") == std::string::npos
                                      : g.status == store::GateCode::kFail ||
                                            g.status == store::GateCode::kCrashed ||
                                            g.status == store::GateCode::kTimeout;
        if (!relevant) continue;
        add(n, fmt::format("{} {}", g.name, pending ? "not run" : "failed"), g.reason);
        if (pending) break; // one gate per iteration is enough
      }
    }
    if (it.candidates.empty())
      add(n, "provider error", it.iteration.notes.value("error", std::string()));
  }
  if (entries.empty()) return "no iteration produced a candidate";
  std::string out;
  for (std::size_t i = 0; i < entries.size() && i < 8; ++i) {
    const Entry& e = entries[i];
    out += fmt::format("{}iteration{} {}: {}", i ? "; " : "", e.iterations.size() > 1 ? "s" : "",
                       iteration_list(e.iterations), e.what);
    if (!e.reason.empty()) out += " (" + store::clip_text(e.reason, 200) + ")";
  }
  if (entries.size() > 8) out += fmt::format("; and {} more", entries.size() - 8);
  return out;
}

std::optional<Frozen> freeze_best(store::Store& store, const store::SessionDetail& d) {
  std::optional<Frozen> best;
  for (const auto& it : d.iterations) {
    for (const auto& c : it.candidates) {
      if (c.candidate.verdict != store::VerdictCode::kPass) continue;
      Frozen f;
      f.detail = &c;
      f.iteration = it.iteration.index;
      f.report = PublicReport::from_json(c.candidate.report);
      f.candidate.source = store.blob(c.candidate.source_sha256);
      f.candidate.manifest_text = store.blob(c.candidate.manifest_sha256);
      f.op = op::find_operator(d.session.operator_name);
      if (!f.op) continue; // a session of an operator this kloop does not have
      auto parsed = op::parse_manifest(f.op->declaration(), f.candidate.manifest_text);
      if (!parsed.manifest) continue; // cannot happen for a passed candidate
      f.manifest = *parsed.manifest;
      if (const auto* a = c.artifact_of(store::ArtifactKind::kCubin))
        f.cubin = store.blob(a->sha256);
      auto key = [](const Frozen& x) {
        return FreezeKey{clears_noise_floor(x.report), x.detail->candidate.speedup.value_or(0.0),
                         dispatch_restriction_rank(x.op->declaration(), x.manifest), x.iteration};
      };
      if (!best || freezes_before(key(f), key(*best))) best = std::move(f);
    }
  }
  return best;
}

void record_promotion(store::Store& store, std::int64_t session_id,
                      std::optional<std::int64_t> candidate_id, store::Decision decision,
                      const std::string& reason, const nlohmann::json& evidence) {
  auto step = store.begin_step();
  store::PromotionRecord p;
  p.session_id = session_id;
  p.candidate_id = candidate_id;
  p.decision = decision;
  p.reason = reason;
  p.evidence = evidence;
  step.add_promotion(p);
  step.commit();
}

// No candidate passed every public gate: pending (device gates could not run), rejected, or
// failed (only provider errors).
void finish_without_candidate(const store::SessionDetail& detail, store::Store& store,
                              const std::string& stop_note, LoopResult& result) {
  bool any_candidate = false;
  for (const auto& it : detail.iterations)
    any_candidate |= !it.candidates.empty();
  if (!any_candidate && !detail.iterations.empty()) { // only provider failures: not a verdict
    result.decision = "failed";
    result.reason = "could not finish: no iteration got a reply from the provider: " +
                    summarise_failures(detail, false);
    result.exit_code = 3;
    // No promotion decision: none was taken (no candidate was evaluated, and the store's
    // decisions are promoted, rejected and pending_device_validation). The session ends
    // `failed` without a verdict; the provider errors stay on its iterations.
    store.finish_session(detail.session.id, store::SessionStatus::kFailed, std::nullopt);
    return;
  }
  bool pending = false;
  for (const auto& it : detail.iterations)
    for (const auto& c : it.candidates)
      pending |= c.candidate.verdict == store::VerdictCode::kPendingDeviceValidation;
  result.decision = pending ? "pending_device_validation" : "rejected";
  result.reason = (pending ? "no candidate could finish the device gates: "
                           : "no candidate passed every public gate: ") +
                  summarise_failures(detail, pending);
  if (!stop_note.empty()) result.reason += "; stopped early: " + stop_note;
  result.exit_code = pending ? 3 : 1;
  record_promotion(store, detail.session.id, std::nullopt,
                   pending ? store::Decision::kPendingDeviceValidation : store::Decision::kRejected,
                   result.reason, nlohmann::json::object());
  store.finish_session(detail.session.id, store::SessionStatus::kCompleted,
                       pending ? store::VerdictCode::kPendingDeviceValidation
                               : store::VerdictCode::kReject);
}

// The holdout answer for the frozen candidate and whether it verified against the commitment the
// store recorded when the session began.
struct HoldoutAnswer {
  holdout::HoldoutResult result;
  bool commitment_ok = false;
};

// The one holdout run: unseal (the suite retires first and is checked against the store's
// commitment), run in a fresh worker, reveal the seed, verify, record. Throws HoldoutError when
// the suite cannot be unsealed (retired already, or altered).
HoldoutAnswer run_holdout_once(const store::SessionDetail& detail, const Frozen& frozen,
                               holdout::SealedSuite& sealed, HoldoutRunner& holdout_runner,
                               store::Store& store) {
  const std::string& recorded = detail.holdout_commitments.back().commitment_sha256;
  const auto suite = sealed.unseal_for_run();
  HoldoutAnswer a;
  a.result = holdout_runner.run(sealed.op(), frozen.candidate, frozen.cubin, suite);
  a.result.commitment = recorded;
  a.result.revealed_seed = sealed.reveal_seed();
  a.commitment_ok =
      holdout::verify_commitment(sealed.op(), recorded, a.result.revealed_seed, sealed.options());
  auto step = store.begin_step();
  store::HoldoutRunRecord r;
  r.commitment_id = detail.holdout_commitments.back().id;
  r.candidate_id = frozen.detail->candidate.id;
  r.status = static_cast<store::GateCode>(a.result.status);
  r.result = a.result.to_json();
  r.result["commitment_verified"] = a.commitment_ok;
  r.report_sha256 = step.put_blob(store::json_text(a.result.detail));
  r.retired = true;
  step.add_holdout_run(r);
  step.commit();
  return a;
}

// The holdout run an earlier process of this session recorded (it stopped after the run, before
// the decision): the holdout never runs twice, so a resume decides from this record.
std::optional<HoldoutAnswer> recorded_holdout(const store::SessionDetail& detail,
                                              const Frozen& frozen) {
  if (detail.holdout_runs.empty()) return std::nullopt;
  const store::HoldoutRunRecord& run = detail.holdout_runs.back();
  if (run.candidate_id != frozen.detail->candidate.id)
    throw holdout::HoldoutError(fmt::format(
        "the recorded holdout run answered candidate {}, but the freeze picks candidate {}",
        run.candidate_id, frozen.detail->candidate.id));
  HoldoutAnswer a;
  a.result = holdout::HoldoutResult::from_json(run.result);
  const auto verified = run.result.find("commitment_verified");
  a.commitment_ok = verified != run.result.end() && verified->is_boolean() && verified->get<bool>();
  return a;
}

// Promotion: every hard gate passed (public verdict pass), the holdout passed against the store's
// commitment, and the speed-up clears the A/A noise floor. nullopt: no decision (the evidence is
// void; the session fails).
std::optional<store::Decision> decide_promotion(const HoldoutAnswer& a, const PublicReport& report,
                                                std::string& why) {
  const holdout::HoldoutResult& hr = a.result;
  if (!a.commitment_ok) {
    why = "the revealed holdout suite does not match the commitment the store recorded when the "
          "session began; its result is void";
    return std::nullopt;
  }
  if (hr.status == GateStatus::kNotRun || hr.status == GateStatus::kInfraError) {
    why = "holdout could not run: " + hr.reason;
    return store::Decision::kPendingDeviceValidation;
  }
  if (hr.status != GateStatus::kPass) {
    why = "holdout failed: " + hr.reason;
    return store::Decision::kRejected;
  }
  if (!clears_noise_floor(report)) {
    why = "the speed-up over the baseline does not clear the A/A noise floor";
    return store::Decision::kRejected;
  }
  why = "every hard gate passed, the holdout passed and the speed-up clears the noise floor";
  return store::Decision::kPromoted;
}

// Receipt (signed when a key is configured) and export of the promoted artifact.
void write_receipt_and_export(const LoopOptions& options, std::int64_t session_id,
                              const Frozen& frozen, store::Store& store, ProgressSink& progress,
                              LoopResult& result) {
  const auto final_detail = store.load_session(session_id);
  nlohmann::json receipt;
  std::string receipt_note;
  if (options.signing_key_file) {
    try {
      const auto key = store::read_secret_key(*options.signing_key_file);
      receipt = store::sign_session_receipt(store, session_id, key, "kloop optimize");
    } catch (const store::StoreError& e) {
      receipt_note = std::string("receipt left unsigned: ") + e.what();
    }
  }
  if (receipt.is_null()) {
    receipt = {{"payload", store::build_receipt_payload(
                               final_detail, store::receipt_manifest(store, final_detail),
                               std::nullopt, std::nullopt)},
               {"approval", {{"canonical_payload_sha256", nullptr}, {"signature", nullptr}}}};
    if (receipt_note.empty()) receipt_note = "receipt unsigned (no signing key configured)";
  }
  const auto dir = options.export_dir / ("session-" + std::to_string(session_id));
  std::filesystem::create_directories(dir);
  write_file(dir / "kernel.cubin", frozen.cubin);
  write_file(dir / "kernel.cu", frozen.candidate.source);
  write_file(dir / "manifest.json", frozen.candidate.manifest_text);
  write_file(dir / "dispatch.txt",
             op::dispatch_predicate_text(frozen.op->declaration(), frozen.manifest) + "\n");
  write_file(dir / "receipt.json", store::json_text(receipt, 2) + "\n");
  result.export_dir = dir.string();
  result.receipt_file = (dir / "receipt.json").string();
  if (!receipt_note.empty()) progress.line(receipt_note);
}

} // namespace

void end_session_failed(store::Store& store, std::int64_t session_id, const std::string& why,
                        LoopResult& result) {
  store.set_session_param(session_id, "holdout_error", why);
  store.finish_session(session_id, store::SessionStatus::kFailed, std::nullopt);
  result.decision = "failed";
  result.reason = "could not finish: " + why;
  result.exit_code = 3;
}

void finish_session(const LoopOptions& options, const store::SessionRecord& session,
                    holdout::SealedSuite& sealed, HoldoutRunner& holdout_runner, Recorder& rec,
                    store::Store& store, ProgressSink& progress, const std::string& stop_note,
                    LoopResult& result) {
  (void)rec;
  const auto detail = store.load_session(session.id);
  auto frozen = freeze_best(store, detail);
  if (!frozen) return finish_without_candidate(detail, store, stop_note, result);

  // Freeze, then the one holdout run in a fresh worker; the suite retires before it runs. A
  // session resumed after that run decides from its record instead.
  result.frozen_iteration = frozen->iteration;
  progress.line(fmt::format(
      "frozen: iteration {} (speed-up {}), running the sealed holdout once", frozen->iteration + 1,
      frozen->detail->candidate.speedup ? fmt::format("{:.3f}x", *frozen->detail->candidate.speedup)
                                        : std::string("n/a")));
  std::optional<HoldoutAnswer> answer;
  try {
    if (detail.holdout_commitments.empty())
      throw holdout::HoldoutError(
          fmt::format("session {} has no holdout commitment in the store", session.id));
    answer = recorded_holdout(detail, *frozen);
    if (answer)
      progress.line("holdout: already run by an earlier process of this session; deciding from "
                    "its record (a holdout runs once)");
    else
      answer = run_holdout_once(detail, *frozen, sealed, holdout_runner, store);
  } catch (const holdout::HoldoutError& e) {
    end_session_failed(store, session.id, e.what(), result);
    return;
  }
  const holdout::HoldoutResult& hr = answer->result;
  result.holdout = hr;
  progress.line(fmt::format("holdout: {} ({} passed, {} failed){}; commitment {}",
                            evaluator::gate_status_name(hr.status), hr.passed, hr.failed,
                            hr.reason.empty() ? "" : " " + hr.reason,
                            answer->commitment_ok ? "verified" : "MISMATCH"));

  std::string why;
  const std::optional<store::Decision> decision = decide_promotion(*answer, frozen->report, why);
  if (!decision) return end_session_failed(store, session.id, why, result);
  nlohmann::json evidence = {
      {"dispatch", op::dispatch_predicate_text(frozen->op->declaration(), frozen->manifest)},
      {"rollout", nullptr}};
  record_promotion(store, session.id, frozen->detail->candidate.id, *decision, why, evidence);
  result.reason = why;
  result.decision = *decision == store::Decision::kPromoted   ? "promoted"
                    : *decision == store::Decision::kRejected ? "rejected"
                                                              : "pending_device_validation";
  result.exit_code = *decision == store::Decision::kPromoted   ? 0
                     : *decision == store::Decision::kRejected ? 1
                                                               : 3;
  store.finish_session(session.id, store::SessionStatus::kCompleted,
                       *decision == store::Decision::kPromoted ? store::VerdictCode::kPass
                       : *decision == store::Decision::kRejected
                           ? store::VerdictCode::kReject
                           : store::VerdictCode::kPendingDeviceValidation);
  if (*decision == store::Decision::kPromoted)
    write_receipt_and_export(options, session.id, *frozen, store, progress, result);
}

} // namespace kloop::agent
