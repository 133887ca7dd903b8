#include "agent/loop.h"

#include <chrono>
#include <tuple>

#include <fmt/core.h>

#include "agent/loop_record.h"
#include "agent/reply_parser.h"
#include "feedback/feedback.h"
#include "kernels/rmsnorm/contract.h"
#include "prompts/prompt_builder.h"
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

// `text` as one shell word: unchanged when it is only safe characters, else single-quoted.
std::string shell_word(const std::string& text) {
  const bool safe = !text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl"
                                                            "mnopqrstuvwxyz0123456789_./:=@%+-") ==
                                         std::string::npos;
  if (safe) return text;
  std::string out = "'";
  for (const char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command that continues session `id` as it can be run: the operator and the store it lives
// in (the generator, budget and seed come from the session's record).
std::string resume_command(const LoopOptions& o, std::int64_t id, const store::Store& store) {
  return fmt::format("kloop optimize {} --resume {} --store {}", shell_word(o.cli_operator), id,
                     shell_word(store.dir()));
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

// Where the iterations start: a new session (created in the store), or the resumed one with the
// public state of its last committed iteration.
struct SessionStart {
  store::SessionRecord session;
  int first_index = 0;
  Carry carry;
};
SessionStart start_session(const LoopOptions& options, store::Store& store, Recorder& rec,
                           ProgressSink& progress) {
  SessionStart start;
  if (!options.resume_session) {
    start.session = new_session(options);
    store.create_session(start.session);
    return start;
  }
  const auto info = store.resume_session(*options.resume_session);
  start.session = info.session;
  start.first_index = info.last_committed_iteration ? *info.last_committed_iteration + 1 : 0;
  if (auto last = rec.last_public_state(start.session.id)) {
    start.carry.report = last->report;
    start.carry.reply = last->reply;
    start.carry.source = last->source;
    start.carry.iteration = last->iteration;
  }
  progress.line(fmt::format("resuming session {} at iteration {} of {}", start.session.id,
                            start.first_index + 1, start.session.budget));
  return start;
}

// The session's sealed holdout: a new session seals a fresh suite (its commitment is recorded by
// the caller before the first prompt); a resumed one opens its suite and checks it against the
// commitment the store recorded when the session began. Throws HoldoutError when there is none.
holdout::SealedSuite seal_or_open(const LoopOptions& o, store::Store& store,
                                  std::int64_t session_id) {
  const std::string label = "session-" + std::to_string(session_id);
  if (!o.resume_session)
    return holdout::SealedSuite::create(o.holdout_dir, label, holdout::draw_secret_seed(),
                                        o.holdout_options);
  const auto commitments = store.load_session(session_id).holdout_commitments;
  if (commitments.empty())
    throw holdout::HoldoutError(fmt::format(
        "holdout: session {} has no holdout commitment in the store (it stopped before sealing "
        "finished), so no holdout result of it could be trusted; start a new session",
        session_id));
  return holdout::SealedSuite::open(o.holdout_dir, label, commitments.back().commitment_sha256);
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

LoopResult run_loop(const LoopOptions& options, Provider& provider, CandidateEvaluator& evaluator,
                    HoldoutRunner& holdout_runner, store::Store& store, ProgressSink& progress,
                    const std::atomic<bool>& cancel) {
  const auto t_session = Clock::now();
  const prompts::PromptBuilder prompts(rmsnorm::contract_json()); // validates templates
  LoopResult result;
  Recorder rec(store);

  // 1. Session and the sealed holdout, committed before the first prompt.
  SessionStart start = start_session(options, store, rec, progress);
  const store::SessionRecord& session = start.session;
  const int first_index = start.first_index;
  Carry& carry = start.carry;
  result.session_id = session.id;
  std::optional<holdout::SealedSuite> sealed;
  try {
    sealed = seal_or_open(options, store, session.id);
  } catch (const holdout::HoldoutError& e) { // no holdout that the store vouches for: no verdict
    end_session_failed(store, session.id, e.what(), result);
    progress.line(result.reason);
    return result;
  }
  result.holdout_commitment = sealed->commitment();
  if (!options.resume_session) rec.holdout_commitment(session.id, sealed->commitment());
  progress.line(fmt::format("session {}: {} via {}{}, budget {}, holdout committed {}", session.id,
                            session.operator_name, session.provider,
                            session.model.empty() ? "" : "/" + session.model, session.budget,
                            sealed->commitment().substr(0, 16)));

  // 2. Iterations.
  bool interrupted = false;
  bool provider_stopped = false; // a provider failure that the next iteration would repeat
  std::string stop_note;
  for (int index = first_index; index < session.budget; ++index) {
    if (cancel.load()) {
      interrupted = true;
      break;
    }
    const auto t_iter = Clock::now();
    if (carry.report) provider.observe_public_report(carry.report->to_json());
    const ProviderRequest request = make_request(prompts, options, carry, index);
    ProviderResponse response = provider.complete(request);
    if (response.outcome == ProviderOutcome::kCancelled || cancel.load()) {
      interrupted = true;
      break;
    }
    if (!response.ok()) {
      result.iterations.push_back(record_provider_failure(rec, progress, session, index, request,
                                                          response, seconds_since(t_iter)));
      if (response.outcome == ProviderOutcome::kBudgetExceeded) {
        stop_note = response.error;
        break;
      }
      if (response.stop_session) { // asking again would fail the same way (issue 22 item 9)
        stop_note = fmt::format("the provider call of iteration {} would fail the same way if "
                                "asked again ({}: {}); fix the cause, then continue with {}",
                                index + 1, provider_outcome_name(response.outcome), response.error,
                                resume_command(options, session.id, store));
        provider_stopped = true;
        break;
      }
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

  if (interrupted || provider_stopped) {
    // Neither is a verdict: the holdout is not spent, what was committed stays, and the session
    // can be resumed.
    store.finish_session(session.id,
                         interrupted ? store::SessionStatus::kInterrupted
                                     : store::SessionStatus::kFailed,
                         std::nullopt);
    result.decision = interrupted ? "interrupted" : "failed";
    result.reason = interrupted ? "cancelled (Ctrl-C); committed iterations are kept; continue "
                                  "with " +
                                      resume_command(options, session.id, store)
                                : "stopped: " + stop_note;
    result.exit_code = 3;
    progress.line(result.reason);
    return result;
  }

  // 3-5. Freeze, holdout, promotion, receipt.
  finish_session(options, session, *sealed, holdout_runner, rec, store, progress, stop_note,
                 result);
  progress.line(fmt::format("session {} {} in {:.1f}s: {}", session.id, result.decision,
                            seconds_since(t_session), result.reason));
  return result;
}

nlohmann::json LoopResult::to_json() const {
  nlohmann::json its = nlohmann::json::array();
  for (const auto& it : iterations) {
    nlohmann::json gates = nlohmann::json::object();
    for (const auto& [name, status] : it.gates)
      gates[name] = status;
    its.push_back({{"index", it.index},
                   {"verdict", it.verdict},
                   {"wall_s", it.wall_s},
                   {"gates", gates},
                   {"speedup", it.speedup ? nlohmann::json(*it.speedup) : nlohmann::json()},
                   {"note", it.note}});
  }
  return {
      {"session_id", session_id},
      {"decision", decision},
      {"reason", reason},
      {"iterations", its},
      {"frozen_iteration", frozen_iteration ? nlohmann::json(*frozen_iteration) : nlohmann::json()},
      {"holdout", holdout ? holdout->to_json() : nlohmann::json()},
      {"holdout_commitment", holdout_commitment},
      {"receipt_file", receipt_file},
      {"export_dir", export_dir},
      {"exit_code", exit_code}};
}

} // namespace kloop::agent
