#include "agent/loop.h"

#include <chrono>
#include <filesystem>
#include <tuple>

#include <fmt/core.h>

#include "agent/loop_record.h"
#include "agent/reply_parser.h"
#include "feedback/feedback.h"
#include "kernels/rmsnorm/contract.h"
#include "prompts/prompt_builder.h"
#include "store/error.h"
#include "store/text_view.h"

namespace kloop::agent {
namespace {

using evaluator::GateStatus;
using evaluator::PublicReport;
using evaluator::Verdict;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string gate_line(const evaluator::GateResult& g) {
  std::string line = fmt::format("    {:<12} {}", g.name, evaluator::gate_status_name(g.status));
  if (!g.reason.empty()) line += "  " + store::clip_text(g.reason, 160);
  return line;
}

// The session record for a fresh run.
store::SessionRecord new_session(const LoopOptions& o) {
  store::SessionRecord s;
  s.operator_name = o.operator_name;
  s.contract_version = std::to_string(rmsnorm::kContractVersion);
  s.contract_sha256 = rmsnorm::contract_sha256();
  s.provider = o.provider_name;
  s.model = o.model;
  s.budget = o.budget;
  s.seed = static_cast<std::int64_t>(o.seed);
  s.kloop_version = o.kloop_version;
  s.kloop_commit = o.kloop_commit;
  s.toolkit_version = o.toolkit_version;
  s.driver_version = o.driver_version;
  s.device_name = o.device_name;
  s.device_uuid = o.device_uuid;
  s.device_arch = o.device_arch;
  s.params = o.params;
  return s;
}

// State carried from one iteration to the next: only public data.
struct Carry {
  std::optional<PublicReport> report;
  std::string reply;  // the previous reply text (the assistant turn)
  std::string source; // the previous kernel.cu (quoted by feedback)
  int iteration = -1;
};

ProviderRequest make_request(const prompts::PromptBuilder& prompts, const LoopOptions& o,
                             const Carry& carry, int index) {
  ProviderRequest req;
  req.system = prompts.system_prompt();
  req.model = o.model;
  req.max_tokens = o.max_reply_tokens;
  req.iteration = index;
  req.messages.push_back({"user", prompts.contract_prompt()});
  if (carry.report) {
    feedback::FeedbackOptions fo;
    fo.kernel_source = carry.source;
    const auto payload = feedback::build_feedback(*carry.report, fo);
    req.messages.push_back({"assistant", carry.reply});
    req.messages.push_back(
        {"user", prompts.feedback_prompt(payload, carry.iteration, o.budget - index - 1)});
  }
  return req;
}

// One reply through the reply parser and, when it gave a candidate, the public gates (the format
// gate first). A reply that did not parse has the failed format gate alone.
struct Evaluated {
  ParsedReply parsed;
  evaluator::Candidate candidate;
  std::optional<evaluator::Evaluation> evaluation;
  PublicReport report;
};
Evaluated evaluate_reply(const ProviderResponse& response, CandidateEvaluator& evaluator) {
  Evaluated e;
  e.parsed = parse_reply(response.text,
                         ReplyContext{response.truncated, response.stop_reason, response.refusal});
  const auto format_gate = format_gate_result(e.parsed, response.text.size());
  if (!e.parsed.ok) {
    e.report.gates.push_back(format_gate);
    e.report.verdict = Verdict::kReject;
    return e;
  }
  e.candidate.source = e.parsed.kernel_source;
  e.candidate.manifest_text = e.parsed.manifest_text;
  e.candidate.source_file_bytes = e.candidate.source.size();
  e.candidate.manifest_file_bytes = e.candidate.manifest_text.size();
  e.evaluation = evaluator.evaluate(e.candidate);
  e.evaluation->report.gates.insert(e.evaluation->report.gates.begin(), format_gate);
  e.report = e.evaluation->report;
  return e;
}

// A failed provider call: recorded in its own step and reported.
IterationSummary record_provider_failure(Recorder& rec, ProgressSink& progress,
                                         const store::SessionRecord& session, int index,
                                         const ProviderRequest& request,
                                         const ProviderResponse& response, double wall_s) {
  IterationSummary summary;
  summary.index = index;
  summary.verdict = "provider_error";
  summary.note = std::string(provider_outcome_name(response.outcome)) + ": " + response.error;
  summary.wall_s = wall_s;
  rec.provider_failure(session.id, index, request, response, summary.wall_s);
  progress.line(fmt::format("[{}/{}] provider {} ({:.1f}s)", index + 1, session.budget,
                            summary.note, summary.wall_s));
  return summary;
}

} // namespace

bool freezes_before(const FreezeKey& a, const FreezeKey& b) {
  return std::make_tuple(!a.clears_noise_floor, -a.speedup, a.restriction_rank, a.iteration) <
         std::make_tuple(!b.clears_noise_floor, -b.speedup, b.restriction_rank, b.iteration);
}

int dispatch_restriction_rank(const rmsnorm::Manifest& m) {
  int rank = 0;
  rank += m.dispatch.x_rows == rmsnorm::RowLayout::kContiguous ? 4 : 0;
  rank += m.dispatch.h_multiple_of > 1 ? 2 : 0;
  rank += m.dispatch.alignment_bytes > 4 ? 1 : 0;
  rank += m.dispatch.h_min > 1 ? 1 : 0;
  rank += m.dispatch.h_max < 65536 ? 1 : 0;
  rank += static_cast<int>(3 - m.entry_points.size());
  rank += m.target == "sm_90a" ? 1 : 0;
  return rank;
}

namespace {

// Where the iterations start: a new session (index 0, nothing carried) or a resumed one (after
// its last committed iteration, with that iteration's public report, reply and source).
struct SessionStart {
  store::SessionRecord session;
  int first_index = 0;
  Carry carry;
  // The holdout commitment the store recorded when the session began (SHA-256 hex); empty only
  // for a start killed before recording it.
  std::string commitment;
};

// `running` is set as soon as this process owns the session (created, or resumed: set `running`).
SessionStart start_session(const LoopOptions& options, Recorder& rec, store::Store& store,
                           ProgressSink& progress, std::optional<std::int64_t>& running) {
  SessionStart start;
  if (!options.resume_session) {
    start.session = new_session(options);
    running = store.create_session(start.session);
    return start;
  }
  const auto info = store.resume_session(*options.resume_session); // refusals change nothing
  running = info.session.id;
  start.session = info.session;
  if (const auto c = store.load_session(info.session.id).holdout_commitments; !c.empty())
    start.commitment = c.back().commitment_sha256;
  start.first_index = info.last_committed_iteration ? *info.last_committed_iteration + 1 : 0;
  progress.line(fmt::format("resuming session {} at iteration {} of {}", start.session.id,
                            start.first_index + 1, start.session.budget));
  if (auto last = rec.last_public_state(start.session.id))
    start.carry = Carry{last->report, last->reply, last->source, last->iteration};
  return start;
}

// How an iteration loop ended before its budget: cancelled, or stopped by a spent budget.
struct IterationsEnd {
  bool interrupted = false;
  bool provider_stopped = false; // a provider failure that the next iteration would repeat
  std::string stop_note;
};

// Step 2: the iterations from `start`, each committed as one store step.
IterationsEnd run_iterations(const LoopOptions& options, const prompts::PromptBuilder& prompts,
                             Provider& provider, CandidateEvaluator& evaluator, Recorder& rec,
                             ProgressSink& progress, const std::atomic<bool>& cancel,
                             SessionStart& start, LoopResult& result) {
  const store::SessionRecord& session = start.session;
  Carry& carry = start.carry;
  for (int index = start.first_index; index < session.budget; ++index) {
    if (cancel.load()) return {true, false, ""};
    const auto t_iter = Clock::now();
    if (carry.report) provider.observe_public_report(carry.report->to_json());
    const ProviderRequest request = make_request(prompts, options, carry, index);
    ProviderResponse response = provider.complete(request);
    if (response.outcome == ProviderOutcome::kCancelled || cancel.load()) return {true, false, ""};
    if (!response.ok()) {
      result.iterations.push_back(record_provider_failure(rec, progress, session, index, request,
                                                          response, seconds_since(t_iter)));
      if (response.outcome == ProviderOutcome::kBudgetExceeded)
        return {false, false, response.error};
      if (response.stop_session) // asking again would fail the same way (issue 22 item 9)
        return {false, true,
                fmt::format("the provider call of iteration {} would fail the same way if asked "
                            "again ({}: {}); fix the cause",
                            index + 1, provider_outcome_name(response.outcome), response.error)};
      continue;
    }
    IterationSummary summary;
    summary.index = index;
    const Evaluated e = evaluate_reply(response, evaluator);
    const ParsedReply& parsed = e.parsed;
    const PublicReport& report = e.report;
    summary.verdict = std::string(evaluator::verdict_name(report.verdict));
    summary.speedup = speedup_of(report);
    summary.wall_s = seconds_since(t_iter);
    for (const auto& g : report.gates)
      summary.gates.emplace_back(g.name, std::string(evaluator::gate_status_name(g.status)));
    rec.iteration(session.id, index, request, response, e.candidate, parsed.ok, e.evaluation,
                  report, summary.wall_s);
    progress.line(fmt::format(
        "[{}/{}] {} ({:.1f}s){}", index + 1, session.budget, summary.verdict, summary.wall_s,
        summary.speedup ? fmt::format(", speed-up {:.3f}x", *summary.speedup) : std::string()));
    for (const auto& g : report.gates)
      progress.line(gate_line(g));
    result.iterations.push_back(summary);
    carry = Carry{report, response.text, parsed.ok ? parsed.kernel_source : std::string(), index};
  }
  return {};
}

// The session's sealed holdout, committed in the store before the first prompt. A new session
// seals a fresh suite; a resumed one opens its suite and checks it against the commitment the store
// recorded when the session began (HoldoutError when it does not match or the file is gone). A
// resumed session whose start was killed before the commitment was recorded (no iteration ran, no
// prompt was sent) seals a fresh suite: a file left there is one the store never vouched for, so
// it is discarded, never adopted. Throws DamagedStore for committed iterations without a
// commitment.
holdout::SealedSuite seal_holdout(const LoopOptions& options, const SessionStart& start,
                                  Recorder& rec) {
  const std::string label = "session-" + std::to_string(start.session.id);
  if (options.resume_session && !start.commitment.empty())
    return holdout::SealedSuite::open(options.holdout_dir, label, start.commitment);
  if (options.resume_session && start.first_index > 0)
    throw store::DamagedStore(fmt::format(
        "store: session {} has committed iterations but no holdout commitment (an edited or "
        "damaged record); its holdout cannot be trusted: start a new session",
        start.session.id));
  if (options.resume_session) {
    std::error_code ec; // the unrecorded suite of this session's own killed start
    std::filesystem::remove(options.holdout_dir / (label + ".sealed"), ec);
  }
  holdout::SealedSuite sealed = holdout::SealedSuite::create(
      options.holdout_dir, label, holdout::draw_secret_seed(), options.holdout_options);
  rec.holdout_commitment(start.session.id, sealed.commitment());
  return sealed;
}

// The command that continues session `id`, as it can be run: the operator and the store this
// session lives in (the generator, budget and seed come from the session's record).
std::string resume_command(const LoopOptions& options, const store::Store& store, std::int64_t id) {
  return fmt::format("kloop optimize {} --resume {} --store {}",
                     store::shell_word(options.cli_operator), id, store::shell_word(store.dir()));
}

// A session that an exception ends (a store, holdout or infrastructure failure, or a kloop bug)
// ends `failed`, with the error in its params ("failure"), instead of staying `running` with a
// dead owner; it stays resumable. Best effort: when the store itself fails, the next kloop that
// opens it marks the session `interrupted` (Store::mark_interrupted).
void record_failure(const LoopOptions& options, store::Store& store, std::int64_t id,
                    const std::exception& e, ProgressSink& progress) {
  try {
    store.set_session_param(id, "failure", {{"error", e.what()}, {"at", store::now_iso8601()}});
    store.finish_session(id, store::SessionStatus::kFailed, std::nullopt);
    progress.line(fmt::format("session {} failed: {}; committed iterations are kept; continue "
                              "with {}",
                              id, e.what(), resume_command(options, store, id)));
  } catch (const std::exception&) {
  }
}

} // namespace

LoopResult run_loop(const LoopOptions& options, Provider& provider, CandidateEvaluator& evaluator,
                    HoldoutRunner& holdout_runner, store::Store& store, ProgressSink& progress,
                    const std::atomic<bool>& cancel) {
  const auto t_session = Clock::now();
  const prompts::PromptBuilder prompts(rmsnorm::contract_json()); // validates templates
  LoopResult result;
  Recorder rec(store);
  // 1. Session and the sealed holdout, committed before the first prompt.
  std::optional<std::int64_t> running; // the session this process set `running`
  try {
    SessionStart start = start_session(options, rec, store, progress, running);
    const store::SessionRecord& session = start.session;
    result.session_id = session.id;
    std::optional<holdout::SealedSuite> opened;
    try {
      opened.emplace(seal_holdout(options, start, rec));
    } catch (const holdout::HoldoutError& e) { // no holdout that the store vouches for: no verdict
      end_session_failed(store, session.id, e.what(), result);
      progress.line(result.reason);
      return result;
    }
    holdout::SealedSuite& sealed = *opened;
    result.holdout_commitment = sealed.commitment();
    progress.line(fmt::format("session {}: {} via {}{}, budget {}, holdout committed {}",
                              session.id, session.operator_name, session.provider,
                              session.model.empty() ? "" : "/" + session.model, session.budget,
                              sealed.commitment().substr(0, 16)));

    // 2. Iterations.
    const IterationsEnd end =
        run_iterations(options, prompts, provider, evaluator, rec, progress, cancel, start, result);
    if (end.provider_stopped) { // not a verdict: the holdout is not spent, the session resumable
      store.finish_session(session.id, store::SessionStatus::kFailed, std::nullopt);
      result.decision = "failed";
      result.reason = fmt::format("stopped: {}, then continue with {}", end.stop_note,
                                  resume_command(options, store, session.id));
      result.exit_code = 3;
      progress.line(result.reason);
      return result;
    }
    if (end.interrupted) {
      store.finish_session(session.id, store::SessionStatus::kInterrupted, std::nullopt);
      result.decision = "interrupted";
      result.reason =
          fmt::format("cancelled ({}); committed iterations are kept; continue with {}",
                      options.cancel_cause ? options.cancel_cause() : std::string("Ctrl-C"),
                      resume_command(options, store, session.id));
      result.exit_code = 3;
      progress.line(result.reason);
      return result;
    }
    // 3-5. Freeze, holdout, promotion, receipt.
    finish_session(options, session, sealed, holdout_runner, rec, store, progress, end.stop_note,
                   result);
    progress.line(fmt::format("session {} {} in {:.1f}s: {}", session.id, result.decision,
                              seconds_since(t_session), result.reason));
    return result;
  } catch (const std::exception& e) {
    if (running) record_failure(options, store, *running, e, progress);
    throw;
  }
}

nlohmann::json LoopResult::to_json() const {
  nlohmann::json its = nlohmann::json::array();
  for (const auto& it : iterations) {
    nlohmann::json gates = nlohmann::json::object();
    for (const auto& [name, status] : it.gates)
      gates[name] = status;
    its.push_back({{"iteration", it.index + 1}, // 1-based, as the progress lines and `kloop show`
                   {"verdict", it.verdict},
                   {"wall_s", it.wall_s},
                   {"gates", gates},
                   {"speedup", it.speedup ? nlohmann::json(*it.speedup) : nlohmann::json()},
                   {"note", it.note}});
  }
  return {{"session_id", session_id},
          {"decision", decision},
          {"reason", reason},
          {"iterations", its},
          {"frozen_iteration",
           frozen_iteration ? nlohmann::json(*frozen_iteration + 1) : nlohmann::json()},
          {"holdout", holdout ? holdout->to_json() : nlohmann::json()},
          {"holdout_commitment", holdout_commitment},
          {"receipt_file", receipt_file},
          {"export_dir", export_dir},
          {"exit_code", exit_code}};
}

} // namespace kloop::agent
