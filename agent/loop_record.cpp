#include "agent/loop_record.h"

#include <fmt/core.h>

#include "evaluator/evidence.h"
#include "store/error.h"
#include "store/text_view.h"

namespace kloop::agent {
namespace {

using store::ArtifactKind;

const nlohmann::json* benchmark_summary(const evaluator::PublicReport& report) {
  const auto* g = report.find(evaluator::kGateBenchmark);
  if (g == nullptr || g->status != evaluator::GateStatus::kPass) return nullptr;
  auto it = g->evidence.find("summary");
  return it == g->evidence.end() || !it->is_object() ? nullptr : &*it;
}

std::optional<double> number_at(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Moves evidence values that are large raw data ("raw_*" keys) into blobs, leaving
// {"blob": sha256, "bytes": n} in their place.
nlohmann::json blobify_raw(store::Store::Step& step, nlohmann::json evidence) {
  if (!evidence.is_object()) return evidence;
  for (auto& [key, value] : evidence.items()) {
    if (key.rfind("raw_", 0) == 0 && !value.is_null()) {
      const std::string bytes =
          value.is_string() ? value.get<std::string>() : store::json_text(value);
      value = {{"blob", step.put_blob(bytes)}, {"bytes", bytes.size()}};
    } else if (value.is_object()) {
      value = blobify_raw(step, value);
    } else if (value.is_array()) {
      for (auto& element : value)
        if (element.is_object()) element = blobify_raw(step, element);
    }
  }
  return evidence;
}

// Roofline telemetry for the report: the streaming shape bf16 65536 x 4096 (cold L2) when
// measured, else the first shape; arithmetic intensity = 4 flop per element (seed's work proxy)
// over the shape's unique logical bytes.
std::optional<nlohmann::json> roofline_telemetry(const nlohmann::json& ev) {
  const auto shapes = ev.value("shapes", nlohmann::json::array());
  if (!shapes.is_array() || shapes.empty()) return std::nullopt;
  nlohmann::json pick = shapes.front();
  for (const auto& s : shapes)
    if (s.value("dtype", "") == "bfloat16" && s.value("rows", 0) == 65536 &&
        s.value("h", 0) == 4096)
      pick = s;
  const auto states = pick.value("states", nlohmann::json::array());
  if (!states.is_array() || states.empty()) return std::nullopt;
  const double tbps = states.front().value("effective_tbps", 0.0);
  const double unique = pick.value("logical_bytes", nlohmann::json::object()).value("unique", 0.0);
  const double elems = pick.value("rows", 0.0) * pick.value("h", 0.0);
  return nlohmann::json{{"achieved_gbps", tbps * 1000.0},
                        {"ceiling_gbps", ev.value("copy_ceiling_tbps", 0.0) * 1000.0},
                        {"arith_intensity", unique > 0 ? 4.0 * elems / unique : 0.0},
                        {"shape",
                         {{"rows", pick.value("rows", 0)},
                          {"h", pick.value("h", 0)},
                          {"dtype", pick.value("dtype", "")}}},
                        {"state", states.front().value("state", "")}};
}

// Names usage that made no sense in an iteration's notes ("usage_invalid"), where
// recorded_usage() and `kloop show` find it.
void note_usage(nlohmann::json& notes, const ProviderResponse& response) {
  if (response.usage.status == UsageStatus::kInvalid)
    notes["usage_invalid"] = response.usage.problem;
}

// How one candidate's reply was read: its usage and, when it reached the format gate, the reply
// parser's outcome and reason, the API's stop reason and refusal text. An iteration of one
// candidate carries these keys in its notes; one of several, per candidate under "replies".
nlohmann::json reply_notes(const CandidateRun& run) {
  const ProviderResponse& response = run.response;
  nlohmann::json out = {{"usage", response.usage.to_json()}};
  const auto* f = run.report ? run.report->find(evaluator::kGateFormat) : nullptr;
  if (f == nullptr) return out;
  evaluator::evidence::Problems ignored;
  const auto format = evaluator::evidence::FormatEvidence::read(f->evidence, ignored);
  out["reply_outcome"] = format.outcome;
  out["reply_reason"] = format.reason; // valid UTF-8: format_gate_result scrubs it
  out["stop_reason"] = store::replace_invalid_utf8(response.stop_reason);
  if (!response.refusal.empty()) out["refusal"] = store::replace_invalid_utf8(response.refusal);
  return out;
}

std::string full_prompt_text(const ProviderRequest& request) {
  std::string text = "[system]\n" + request.system + "\n";
  for (const auto& m : request.messages)
    text += "[" + m.role + "]\n" + m.content + "\n";
  return text;
}

} // namespace

std::optional<double> speedup_of(const evaluator::PublicReport& report) {
  const auto* s = benchmark_summary(report);
  return s ? number_at(*s, "geomean_speedup_vs_baseline") : std::nullopt;
}

std::optional<std::pair<double, double>>
speedup_interval_of(const evaluator::PublicReport& report) {
  const auto* s = benchmark_summary(report);
  if (s == nullptr) return std::nullopt;
  auto lo = number_at(*s, "geomean_ci_lo"), hi = number_at(*s, "geomean_ci_hi");
  if (!lo || !hi) return std::nullopt;
  return std::make_pair(*lo, *hi);
}

bool clears_noise_floor(const evaluator::PublicReport& report) {
  const auto* s = benchmark_summary(report);
  if (s == nullptr) return false;
  auto it = s->find("clears_noise_floor");
  return it != s->end() && it->is_boolean() && it->get<bool>();
}

store::GateRecord gate_record(const evaluator::GateResult& gate, int ordinal) {
  store::GateRecord r;
  r.ordinal = ordinal;
  r.name = gate.name;
  r.status = static_cast<store::GateCode>(gate.status);
  r.reason = gate.reason;
  r.evidence = gate.evidence;
  return r;
}

void Recorder::holdout_commitment(std::int64_t session_id, const std::string& commitment,
                                  std::string_view suite_version) {
  auto step = store_.begin_step();
  store::HoldoutCommitmentRecord r;
  r.session_id = session_id;
  r.commitment_sha256 = commitment;
  r.suite_version = std::string(suite_version);
  step.add_holdout_commitment(r);
  step.commit();
}

std::int64_t Recorder::add_exchange(store::Store::Step& step, std::int64_t iteration_id,
                                    const ProviderRequest& request,
                                    const ProviderResponse& response) {
  store::PromptRecord p;
  p.iteration_id = iteration_id;
  p.role = "full";
  p.blob_sha256 = step.put_blob(full_prompt_text(request));
  // Counts the API reported (read_usage bounds them); usage that is absent or made no sense stays
  // NULL here (invalid usage is named in the iteration's notes by note_usage), never stored as 0.
  if (response.usage.known() && response.usage.input_tokens > 0)
    p.tokens = static_cast<int>(response.usage.input_tokens);
  step.add_prompt(p);
  store::ResponseRecord r;
  r.iteration_id = iteration_id;
  r.prompt_id = p.id;
  const auto& ex = response.exchange;
  const std::string body = ex.response_body.empty() ? response.text : ex.response_body;
  r.blob_sha256 = body.empty() ? std::string() : step.put_blob(body);
  r.provider = ex.provider.empty() ? response.exchange.provider : ex.provider;
  r.model = request.model;
  if (ex.http_status != 0) r.http_status = static_cast<int>(ex.http_status);
  r.latency_ms = static_cast<double>(ex.latency_ms);
  r.retries = ex.retries;
  if (response.usage.known()) { // absent or invalid usage is unknown (NULL), never 0 tokens
    r.prompt_tokens = static_cast<int>(response.usage.input_tokens);
    r.completion_tokens = static_cast<int>(response.usage.output_tokens);
  }
  r.error = response.error;
  step.add_response(r);
  // The exchange record itself (request body without the key, headers redacted).
  store::ArtifactRecord a;
  a.iteration_id = iteration_id;
  a.kind = ArtifactKind::kLog;
  a.name = "exchange.json";
  step.add_artifact(a, store::json_text(ex.to_json()));
  return r.id;
}

void Recorder::provider_failure(std::int64_t session_id, int index, const ProviderRequest& request,
                                const ProviderResponse& response, double wall_s) {
  auto step = store_.begin_step();
  store::IterationRecord it;
  it.session_id = session_id;
  it.index = index;
  it.wall_ms = wall_s * 1000.0;
  it.notes = {{"provider_outcome", provider_outcome_name(response.outcome)},
              {"error", store::replace_invalid_utf8(response.error)},
              {"usage", response.usage.to_json()},
              {"prompt_sha256", prompt_sha256(request)}};
  note_usage(it.notes, response);
  step.add_iteration(it);
  add_exchange(step, it.id, request, response);
  step.commit();
}

void Recorder::iteration(std::int64_t session_id, int index, const ProviderRequest& request,
                         const ProviderResponse& response, const evaluator::Candidate& candidate,
                         bool parsed, const std::optional<evaluator::Evaluation>& evaluation,
                         const evaluator::PublicReport& report, double wall_s) {
  CandidateRun run{request, response, candidate, parsed, evaluation, report};
  iteration(session_id, index, std::vector<CandidateRun>{std::move(run)}, wall_s);
}

void Recorder::iteration(std::int64_t session_id, int index, const std::vector<CandidateRun>& runs,
                         double wall_s, const nlohmann::json& notes) {
  auto step = store_.begin_step();
  store::IterationRecord it;
  it.session_id = session_id;
  it.index = index;
  it.wall_ms = wall_s * 1000.0;
  const CandidateRun* first = nullptr; // the first run with a report
  for (const auto& r : runs)
    if (r.report && !first) first = &r;
  it.notes = {
      {"verdict", first ? evaluator::verdict_name(first->report->verdict) : "none"},
      {"prompt_sha256", runs.empty() ? std::string() : prompt_sha256(runs.front().request)}};
  for (const auto& r : runs) // the first usage report that made no sense
    if (!it.notes.contains("usage_invalid")) note_usage(it.notes, r.response);
  if (runs.size() == 1) {
    it.notes.update(reply_notes(runs.front()));
  } else {
    nlohmann::json verdicts = nlohmann::json::array(), replies = nlohmann::json::array();
    for (const auto& r : runs) {
      verdicts.push_back(r.report ? nlohmann::json(evaluator::verdict_name(r.report->verdict))
                                  : nlohmann::json(nullptr));
      replies.push_back(reply_notes(r));
    }
    it.notes["candidates"] = runs.size();
    it.notes["verdicts"] = verdicts;
    it.notes["replies"] = replies;
  }
  if (notes.is_object()) it.notes.update(notes);
  step.add_iteration(it);
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const CandidateRun& run = runs[k];
    if (run.report) {
      add_candidate(step, it.id, static_cast<int>(k), run);
      continue;
    }
    add_exchange(step, it.id, run.request, run.response); // no candidate: the exchange alone
    if (!run.response.text.empty()) {
      store::ArtifactRecord a;
      a.iteration_id = it.id;
      a.kind = ArtifactKind::kResponse;
      a.name = "reply.txt";
      step.add_artifact(a, run.response.text);
    }
  }
  step.commit();
}

namespace {

// The tool_calls rows of one candidate's processes, with each GPU worker's peak device memory as
// telemetry tied to its row (issue 8).
void add_tool_calls(store::Store::Step& step, std::int64_t iteration_id, std::int64_t candidate_id,
                    const std::vector<evaluator::ToolCall>& calls) {
  for (const auto& t : calls) {
    store::ToolCallRecord tr;
    tr.iteration_id = iteration_id;
    tr.candidate_id = candidate_id;
    tr.tool = t.detail.is_object() && t.detail.contains("tool")
                  ? t.detail.value("tool", std::string("?"))
                  : (t.argv.empty() ? std::string("?") : t.argv.front());
    if (t.detail.is_object()) tr.tool_version = t.detail.value("tool_version", std::string());
    tr.argv = t.argv;
    tr.cwd = t.cwd;
    tr.exit_code = t.exit_code;
    if (t.term_signal != 0) tr.signal = t.term_signal;
    tr.wall_ms = t.wall_ms;
    tr.user_ms = t.user_cpu_ms;
    tr.sys_ms = t.sys_cpu_ms;
    tr.max_rss_kb = t.max_rss_kib;
    tr.stdout_sha256 = step.put_blob(t.stdout_text);
    tr.stderr_sha256 = step.put_blob(t.stderr_text);
    step.add_tool_call(tr);
    // A GPU worker process (plain, under compute-sanitizer or ncu): its peak device memory,
    // tied to the tool_calls row (issue 8: each GPU worker's peak is recorded in the store).
    if (t.detail.is_object() && t.detail.contains("device_memory")) {
      store::TelemetryRecord m;
      m.candidate_id = candidate_id;
      m.kind = "device_memory";
      m.data = t.detail;
      m.data["tool_call_id"] = tr.id;
      m.data["wall_ms"] = t.wall_ms;
      m.data["max_rss_kib"] = t.max_rss_kib;
      step.add_telemetry(m);
    }
  }
}

} // namespace

void Recorder::add_candidate(store::Store::Step& step, std::int64_t iteration_id, int ordinal,
                             const CandidateRun& run) {
  add_exchange(step, iteration_id, run.request, run.response);
  const auto& response = run.response;
  const auto& candidate = run.candidate;
  const bool parsed = run.parsed;
  const auto& evaluation = run.evaluation;
  const evaluator::PublicReport& report = *run.report;
  store::CandidateRecord c;
  c.iteration_id = iteration_id;
  c.ordinal = ordinal;
  if (parsed) {
    c.source_sha256 = step.put_blob(candidate.source);
    c.manifest_sha256 = step.put_blob(candidate.manifest_text);
  }
  c.verdict = static_cast<store::VerdictCode>(report.verdict);
  c.speedup = speedup_of(report);
  if (auto ci = speedup_interval_of(report)) {
    c.speedup_lo = ci->first;
    c.speedup_hi = ci->second;
  }
  evaluator::PublicReport stored = report;
  for (auto& g : stored.gates)
    g.evidence = blobify_raw(step, g.evidence);
  c.report = stored.to_json();
  step.add_candidate(c);
  if (!response.text.empty()) { // the reply text itself: the assistant turn after a resume
    store::ArtifactRecord a;
    a.iteration_id = iteration_id;
    a.candidate_id = c.id;
    a.kind = ArtifactKind::kResponse;
    a.name = "reply.txt";
    step.add_artifact(a, response.text);
  }

  int gate_ordinal = 0;
  for (const auto& g : stored.gates) {
    store::GateRecord gr = gate_record(g, gate_ordinal++);
    gr.candidate_id = c.id;
    step.add_gate(gr);
  }
  // The correctness gate's per-case results (blobified above) also as a case-results artifact:
  // the receipt's correctness.case_results_uri_and_sha256.
  if (const auto* g = report.find(evaluator::kGateCorrectness);
      g && g->evidence.is_object() && g->evidence.contains("raw_case_results")) {
    store::ArtifactRecord a;
    a.iteration_id = iteration_id;
    a.candidate_id = c.id;
    a.kind = ArtifactKind::kCaseResults;
    a.name = "case_results.json";
    step.add_artifact(a, store::json_text(g->evidence["raw_case_results"]));
  }
  if (evaluation && evaluation->build) {
    const auto& b = *evaluation->build;
    auto artifact = [&](ArtifactKind kind, const char* name, const std::string& bytes) {
      if (bytes.empty()) return;
      store::ArtifactRecord a;
      a.iteration_id = iteration_id;
      a.candidate_id = c.id;
      a.kind = kind;
      a.name = name;
      step.add_artifact(a, bytes);
    };
    artifact(ArtifactKind::kCubin, "kernel.cubin", b.cubin);
    artifact(ArtifactKind::kPtx, "kernel.ptx", b.ptx);
    artifact(ArtifactKind::kLog, "nvrtc.log", b.log);
    artifact(ArtifactKind::kLog, "nvrtc-ptx.log", b.log_ptx);
  }
  for (const auto& g : stored.gates) { // telemetry the report and receipts read
    store::TelemetryRecord t;
    t.candidate_id = c.id;
    if (g.name == evaluator::kGateRoofline && g.status == evaluator::GateStatus::kPass) {
      if (auto roof = roofline_telemetry(g.evidence)) {
        t.kind = "roofline";
        t.data = *roof;
        step.add_telemetry(t);
      }
    } else if (g.name == evaluator::kGateBenchmark && g.evidence.contains("stalls") &&
               g.evidence["stalls"].contains("histogram")) {
      t.kind = "stall_reasons";
      t.data = g.evidence["stalls"]["histogram"];
      step.add_telemetry(t);
    }
    if (g.name == evaluator::kGateBenchmark && g.evidence.contains("raw_samples") &&
        g.evidence["raw_samples"].contains("blob")) {
      store::BenchmarkRecord b;
      b.candidate_id = c.id;
      b.series = "all_series"; // every series of every shape/state, as the worker wrote them
      b.samples_sha256 = g.evidence["raw_samples"]["blob"].get<std::string>();
      step.add_benchmark(b);
    }
  }
  if (evaluation) add_tool_calls(step, iteration_id, c.id, evaluation->tool_calls);
  if (evaluation) { // where the evaluation's time went (store/phase_view.h reads it)
    store::TelemetryRecord t;
    t.candidate_id = c.id;
    t.kind = "phases";
    t.data = evaluator::phases_telemetry(evaluation->phases, evaluation->wall_ms);
    step.add_telemetry(t);
  }
}

TokenUsage recorded_usage(const store::SessionDetail& session) {
  TokenUsage used;
  for (const auto& it : session.iterations) {
    for (const auto& r : it.responses) {
      used.input_tokens += r.prompt_tokens.value_or(0);
      used.output_tokens += r.completion_tokens.value_or(0);
    }
    const auto bad = it.iteration.notes.is_object() ? it.iteration.notes.find("usage_invalid")
                                                    : it.iteration.notes.end();
    if (used.status != UsageStatus::kInvalid && bad != it.iteration.notes.end()) {
      used.status = UsageStatus::kInvalid;
      used.problem = fmt::format("iteration {}: {}", it.iteration.index + 1,
                                 bad->is_string() ? bad->get<std::string>() : bad->dump());
    }
  }
  return used;
}

std::vector<Recorder::PublicState> Recorder::last_public_state(std::int64_t session_id) {
  const auto detail = store_.load_session(session_id);
  for (auto it = detail.iterations.rbegin(); it != detail.iterations.rend(); ++it) {
    if (it->candidates.empty() || it->responses.empty()) continue;
    std::vector<PublicState> states;
    for (const auto& cd : it->candidates) {
      PublicState state;
      state.iteration = it->iteration.index;
      const auto& cand = cd.candidate;
      try {
        state.report = evaluator::PublicReport::from_json(cand.report);
      } catch (const nlohmann::json::exception& e) { // an edited or damaged row
        throw store::DamagedStore(fmt::format(
            "store: the public report of candidate {} (session {}, iteration {}) does not read "
            "({}); the next prompt needs it. Run `{}`",
            cand.id, session_id, state.iteration + 1, e.what(),
            store::kloop_command("store verify", store_.dir())));
      }
      if (!cand.source_sha256.empty()) state.source = store_.blob(cand.source_sha256);
      for (const auto& a : cd.artifacts)
        if (a.name == "reply.txt") state.reply = store_.blob(a.sha256);
      states.push_back(std::move(state));
    }
    return states;
  }
  return {};
}

} // namespace kloop::agent
