#include "agent/loop.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <tuple>

#include <fmt/core.h>

#include "agent/loop_record.h"
#include "agent/reply_parser.h"
#include "feedback/feedback.h"
#include "prompts/prompt_builder.h"
#include "store/error.h"
#include "store/phase_view.h"
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
  s.operator_name = std::string(o.op->name());
  s.contract_version = std::to_string(o.op->declaration().version);
  s.contract_sha256 = o.op->contract_sha256();
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

// State carried from one iteration to the next: only public data, one entry per candidate of
// the previous iteration that has a report, in its order.
struct CarryEntry {
  PublicReport report;
  std::string reply;  // the reply text (the assistant turn)
  std::string source; // its kernel.cu (quoted by feedback)
};
struct Carry {
  std::vector<CarryEntry> entries;
  int iteration = -1;
};

// The request of every candidate of iteration `index`: the contract, then (after a first
// iteration) the previous replies as the assistant turn and the feedback on them. One previous
// candidate: its reply and build_feedback; several: their replies under "### Candidate K of N"
// headers and build_batch_feedback over all of them.
ProviderRequest make_request(const prompts::PromptBuilder& prompts, const LoopOptions& o,
                             const Carry& carry, int index) {
  ProviderRequest req;
  req.system = prompts.system_prompt();
  req.model = o.model;
  req.max_tokens = o.max_reply_tokens;
  req.iteration = index;
  req.messages.push_back({"user", prompts.contract_prompt()});
  if (carry.entries.empty()) return req;
  feedback::FeedbackPayload payload;
  std::string assistant;
  if (carry.entries.size() == 1) {
    feedback::FeedbackOptions fo;
    fo.kernel_source = carry.entries.front().source;
    payload = feedback::build_feedback(carry.entries.front().report, fo);
    assistant = carry.entries.front().reply;
  } else {
    std::vector<feedback::BatchEntry> batch;
    for (std::size_t k = 0; k < carry.entries.size(); ++k) {
      const CarryEntry& e = carry.entries[k];
      batch.push_back({&e.report, e.source});
      assistant += fmt::format("{}### Candidate {} of {}\n\n{}", k ? "\n\n" : "", k + 1,
                               carry.entries.size(), e.reply);
    }
    payload = feedback::build_batch_feedback(batch);
  }
  req.messages.push_back({"assistant", assistant});
  req.messages.push_back(
      {"user", prompts.feedback_prompt(payload, carry.iteration, o.budget - index - 1)});
  return req;
}

// What one iteration left for the loop.
struct IterationOutcome {
  std::vector<IterationSummary> summaries; // one per candidate, in order
  std::optional<Carry> next_carry;         // the public state the next prompt is built from
  bool interrupted = false;                // Ctrl-C: nothing more starts
  bool provider_stopped = false;           // a provider failure the next iteration would repeat
  std::string stop_note;                   // a spent budget or provider_stopped: the loop stops
};

// Phase groups of an evaluation (store/phase_view.h's grouping): group -> seconds.
nlohmann::json phase_groups(const evaluator::Evaluation& ev) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& p : ev.phases) {
    if (p.nested) continue;
    const std::string group = store::phase_group(p.name);
    out[group] = out.value(group, 0.0) + p.wall_ms / 1000.0;
  }
  return out;
}

// The progress lines of one evaluated (or format-failed) candidate.
void print_candidate(ProgressSink& progress, const IterationSummary& summary, int budget, int k,
                     const PublicReport& report) {
  const std::string speed =
      summary.speedup ? fmt::format(", speed-up {:.3f}x", *summary.speedup) : std::string();
  if (k == 1)
    progress.line(fmt::format("[{}/{}] {} ({:.1f}s){}", summary.index + 1, budget, summary.verdict,
                              summary.wall_s, speed));
  else
    progress.line(fmt::format("[{}/{}] candidate {}/{}: {} (evaluation {:.1f}s){}",
                              summary.index + 1, budget, summary.candidate + 1, k, summary.verdict,
                              summary.evaluation_s, speed));
  for (const auto& g : report.gates)
    progress.line(gate_line(g));
}

// The replies of one iteration parsed: every run with its exchange (a format failure already has
// its report), and the candidates that parsed, to be evaluated as one batch.
struct ParsedBatch {
  std::vector<CandidateRun> runs;                  // one per request, in order
  std::vector<evaluator::Candidate> batch;         // the candidates that parsed
  std::vector<std::size_t> batch_of;               // run index of each batch entry
  std::vector<evaluator::GateResult> format_gates; // per run (empty for a provider error)
};

ParsedBatch parse_replies(const std::vector<ProviderRequest>& requests,
                          std::vector<ProviderResponse> responses) {
  ParsedBatch out;
  out.runs.resize(requests.size());
  out.format_gates.resize(requests.size());
  for (std::size_t c = 0; c < out.runs.size(); ++c) {
    CandidateRun& run = out.runs[c];
    run.request = requests[c];
    run.response = std::move(responses[c]);
    if (!run.response.ok()) continue;
    const ParsedReply parsed = parse_reply(
        run.response.text,
        ReplyContext{run.response.truncated, run.response.stop_reason, run.response.refusal});
    out.format_gates[c] = format_gate_result(parsed, run.response.text.size());
    run.parsed = parsed.ok;
    if (!parsed.ok) { // the failed format gate alone; nothing else runs
      run.report.emplace();
      run.report->gates.push_back(out.format_gates[c]);
      run.report->verdict = Verdict::kReject;
      continue;
    }
    run.candidate.source = parsed.kernel_source;
    run.candidate.manifest_text = parsed.manifest_text;
    run.candidate.source_file_bytes = run.candidate.source.size();
    run.candidate.manifest_file_bytes = run.candidate.manifest_text.size();
    out.batch.push_back(run.candidate);
    out.batch_of.push_back(c);
  }
  return out;
}

// The provider's answers to one iteration's requests, one per request: a provider that answers
// fewer (its own defect) gets a bad_response for each missing one, extra answers are dropped.
std::vector<ProviderResponse> complete_all(Provider& provider,
                                           const std::vector<ProviderRequest>& requests) {
  std::vector<ProviderResponse> responses = provider.complete_batch(requests);
  const std::size_t answered = responses.size();
  for (std::size_t c = answered; c < requests.size(); ++c) {
    ProviderResponse missing;
    missing.outcome = ProviderOutcome::kBadResponse;
    missing.error = fmt::format("the provider answered {} of the iteration's {} requests", answered,
                                requests.size());
    missing.exchange.provider = provider.name();
    missing.exchange.error = missing.error;
    responses.push_back(std::move(missing));
  }
  responses.resize(requests.size());
  return responses;
}

// Iteration `index`: K requests, their replies parsed, the candidates evaluated as one batch
// (in parallel where the evaluator can), everything recorded in one store step, in order.
IterationOutcome run_iteration(const LoopOptions& options, const store::SessionRecord& session,
                               int index, const prompts::PromptBuilder& prompts, const Carry& carry,
                               Provider& provider, CandidateEvaluator& evaluator, Recorder& rec,
                               ProgressSink& progress, const std::atomic<bool>& cancel) {
  IterationOutcome out;
  const auto t_iter = Clock::now();
  const int k = std::clamp(options.candidates_per_iteration, 1, 16);
  for (const auto& e : carry.entries)
    provider.observe_public_report(e.report.to_json());
  std::vector<ProviderRequest> requests(static_cast<std::size_t>(k),
                                        make_request(prompts, options, carry, index));
  for (int c = 0; c < k; ++c) {
    requests[static_cast<std::size_t>(c)].candidate = c;
    requests[static_cast<std::size_t>(c)].candidates = k;
  }
  std::vector<ProviderResponse> responses = complete_all(provider, requests);
  bool any_ok = false;
  for (const auto& r : responses) {
    if (r.outcome == ProviderOutcome::kCancelled) out.interrupted = true;
    if (r.outcome == ProviderOutcome::kBudgetExceeded && out.stop_note.empty())
      out.stop_note = r.error;
    any_ok = any_ok || r.ok();
  }
  // A failure that asking again would repeat (issue 22 item 9) stops the session after this
  // iteration is recorded; a spent budget (a verdict on what ran) takes precedence.
  for (std::size_t c = 0; c < responses.size() && out.stop_note.empty(); ++c) {
    const ProviderResponse& r = responses[c];
    if (r.ok() || !r.stop_session) continue;
    out.provider_stopped = true;
    out.stop_note =
        fmt::format("the provider call of iteration {}{} would fail the same way if "
                    "asked again ({}: {}); fix the cause",
                    index + 1, k > 1 ? fmt::format(" (candidate {})", c + 1) : std::string(),
                    provider_outcome_name(r.outcome), r.error);
  }
  if (out.interrupted || cancel.load()) { // nothing of this iteration is recorded
    out.interrupted = true;
    return out;
  }
  const auto provider_error = [&](int c, const ProviderResponse& r) {
    IterationSummary summary;
    summary.index = index;
    summary.candidate = c;
    summary.verdict = "provider_error";
    summary.note = std::string(provider_outcome_name(r.outcome)) + ": " + r.error;
    summary.wall_s = seconds_since(t_iter);
    return summary;
  };
  if (!any_ok) { // no reply to evaluate; the carry stays
    std::vector<CandidateRun> runs;
    for (int c = 0; c < k; ++c) {
      const auto& r = responses[static_cast<std::size_t>(c)];
      out.summaries.push_back(provider_error(c, r));
      runs.push_back(
          {requests[static_cast<std::size_t>(c)], r, {}, false, std::nullopt, std::nullopt});
    }
    const double wall_s = out.summaries.front().wall_s;
    if (k == 1)
      rec.provider_failure(session.id, index, requests.front(), responses.front(), wall_s);
    else
      rec.iteration(session.id, index, runs, wall_s,
                    {{"provider_outcome", provider_outcome_name(responses.front().outcome)},
                     {"error", responses.front().error}});
    for (const auto& summary : out.summaries)
      progress.line(fmt::format("[{}/{}] {}provider {} ({:.1f}s)", index + 1, session.budget,
                                k > 1 ? fmt::format("candidate {}/{}: ", summary.candidate + 1, k)
                                      : std::string(),
                                summary.note, summary.wall_s));
    return out;
  }
  // Parse every reply; evaluate the candidates that parsed, as one batch.
  ParsedBatch parsed = parse_replies(requests, std::move(responses));
  std::vector<CandidateRun>& runs = parsed.runs;
  const std::vector<evaluator::Candidate>& batch = parsed.batch;
  const std::vector<std::size_t>& batch_of = parsed.batch_of;
  const std::vector<evaluator::GateResult>& format_gates = parsed.format_gates;
  // CUPTI stall sampling feeds the next prompt's feedback: none is built after the last iteration.
  evaluator.want_profile(index + 1 < session.budget);
  auto evaluations = evaluator.evaluate_batch(batch, &cancel);
  for (std::size_t b = 0; b < batch.size(); ++b) {
    CandidateRun& run = runs[batch_of[b]];
    if (!evaluations[b]) { // Ctrl-C before its evaluation started: the exchange alone is kept
      out.interrupted = true;
      continue;
    }
    run.evaluation = std::move(evaluations[b]);
    run.evaluation->report.gates.insert(run.evaluation->report.gates.begin(),
                                        format_gates[batch_of[b]]);
    run.report = run.evaluation->report;
  }
  const double wall_s = seconds_since(t_iter);
  nlohmann::json notes = nlohmann::json::object();
  if (out.interrupted) notes["interrupted_before_evaluation"] = true;
  rec.iteration(session.id, index, runs, wall_s, notes);
  Carry next;
  next.iteration = index;
  for (std::size_t c = 0; c < runs.size(); ++c) {
    const CandidateRun& run = runs[c];
    if (!run.response.ok()) {
      out.summaries.push_back(provider_error(static_cast<int>(c), run.response));
      out.summaries.back().wall_s = wall_s;
      continue;
    }
    if (!run.report) continue; // not evaluated (interrupted)
    IterationSummary summary;
    summary.index = index;
    summary.candidate = static_cast<int>(c);
    summary.verdict = std::string(evaluator::verdict_name(run.report->verdict));
    summary.speedup = speedup_of(*run.report);
    summary.wall_s = wall_s;
    if (run.evaluation) {
      summary.evaluation_s = run.evaluation->wall_ms / 1000.0;
      summary.phases = phase_groups(*run.evaluation);
    }
    for (const auto& g : run.report->gates)
      summary.gates.emplace_back(g.name, std::string(evaluator::gate_status_name(g.status)));
    print_candidate(progress, summary, session.budget, k, *run.report);
    out.summaries.push_back(std::move(summary));
    next.entries.push_back(
        {*run.report, run.response.text, run.parsed ? run.candidate.source : std::string()});
  }
  if (!next.entries.empty()) out.next_carry = std::move(next);
  return out;
}

} // namespace

std::vector<std::optional<evaluator::Evaluation>>
CandidateEvaluator::evaluate_batch(const std::vector<evaluator::Candidate>& candidates,
                                   const std::atomic<bool>* cancel) {
  std::vector<std::optional<evaluator::Evaluation>> out(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (cancel != nullptr && cancel->load()) break;
    out[i] = evaluate(candidates[i]);
  }
  return out;
}

bool freezes_before(const FreezeKey& a, const FreezeKey& b) {
  return std::make_tuple(!a.clears_noise_floor, -a.speedup, a.restriction_rank, a.iteration) <
         std::make_tuple(!b.clears_noise_floor, -b.speedup, b.restriction_rank, b.iteration);
}

int dispatch_restriction_rank(const op::Declaration& decl, const op::Manifest& m) {
  // Per variant, the format-1 weighted_rmsnorm/1 terms generalised to the declaration's row axis
  // (H): a contiguous-rows clause 4, a row-axis multiple 2, alignment above 4 bytes 1, a raised
  // minimum 1, a maximum below 65536 (and the declaration's) 1, each dtype of the contract without
  // an entry point 1; sm_90a 1; each variant beyond the first 1.
  const int ra = decl.row_axis();
  const int dtypes = static_cast<int>(std::size(kAllDTypes)); // float32, float16, bfloat16
  int rank = m.target == "sm_90a" ? 1 : 0;
  rank += static_cast<int>(m.variants.size()) - 1;
  for (const op::Variant& v : m.variants) {
    for (const auto& [t, layout] : v.when.rows)
      if (layout == op::RowLayout::kContiguous) {
        rank += 4;
        break;
      }
    if (ra >= 0) {
      const op::AxisRange& r = v.when.axes[static_cast<std::size_t>(ra)];
      const op::Axis& a = decl.axes[static_cast<std::size_t>(ra)];
      rank += r.multiple_of > 1 ? 2 : 0;
      rank += r.min > a.min ? 1 : 0;
      rank += r.max < std::min<std::int64_t>(a.max, 65536) ? 1 : 0;
    }
    rank += v.when.alignment_bytes > 4 ? 1 : 0;
    rank += dtypes - static_cast<int>(v.entry_points.size());
  }
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
  for (auto& last : rec.last_public_state(start.session.id)) {
    start.carry.entries.push_back(
        {std::move(last.report), std::move(last.reply), std::move(last.source)});
    start.carry.iteration = last.iteration;
  }
  return start;
}

// How an iteration loop ended before its budget: cancelled, stopped by a spent budget, or stopped
// by a provider failure that asking again would repeat.
struct IterationsEnd {
  bool interrupted = false;
  bool provider_stopped = false; // a provider failure that the next iteration would repeat
  std::string stop_note;
};

// Step 2: the iterations from `start`, each committed as one store step (the K candidates of an
// iteration together, run_iteration).
IterationsEnd run_iterations(const LoopOptions& options, const prompts::PromptBuilder& prompts,
                             Provider& provider, CandidateEvaluator& evaluator, Recorder& rec,
                             ProgressSink& progress, const std::atomic<bool>& cancel,
                             SessionStart& start, LoopResult& result) {
  const store::SessionRecord& session = start.session;
  Carry& carry = start.carry;
  for (int index = start.first_index; index < session.budget; ++index) {
    if (cancel.load()) return {true, false, ""};
    IterationOutcome out = run_iteration(options, session, index, prompts, carry, provider,
                                         evaluator, rec, progress, cancel);
    for (auto& summary : out.summaries)
      result.iterations.push_back(std::move(summary));
    if (out.next_carry) carry = std::move(*out.next_carry);
    if (out.interrupted) return {true, false, ""};
    if (!out.stop_note.empty()) return {false, out.provider_stopped, out.stop_note};
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
  holdout::SealedSuite sealed =
      holdout::SealedSuite::create(options.holdout_dir, label, *options.op,
                                   holdout::draw_secret_seed(), options.holdout_options);
  rec.holdout_commitment(start.session.id, sealed.commitment(), sealed.op().holdout_version());
  return sealed;
}

// The command that continues session `id`, as it can be run: the operator and the store this
// session lives in (the generator, budget and seed come from the session's record).
std::string resume_command(const LoopOptions& options, const store::Store& store, std::int64_t id) {
  return fmt::format("kloop optimize {} --resume {} --store {}",
                     store::shell_word(std::string(options.op->cli_name())), id,
                     store::shell_word(store.dir()));
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
  if (!options.op) throw std::invalid_argument("run_loop: LoopOptions::op is not set");
  const prompts::PromptBuilder prompts(options.op->contract()); // validates templates
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
                   {"candidate", it.candidate + 1}, // 1-based within the iteration, likewise
                   {"verdict", it.verdict},
                   {"wall_s", it.wall_s},
                   {"evaluation_s", it.evaluation_s},
                   {"phases", it.phases},
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
