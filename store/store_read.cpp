// Store: loading sessions, summaries, JSON views and `store verify`.
#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/core.h>

#include "store/error.h"
#include "store/phase_view.h"
#include "store/store.h"
#include "store/text_view.h"

namespace kloop::store {
namespace {

nlohmann::json parse_or_raw(const std::string& s) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  return j.is_discarded() ? nlohmann::json(s) : j;
}

template <class T> nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

constexpr const char* kSessionCols =
    "id, operator, contract_version, contract_sha256, provider, model, budget, seed, "
    "kloop_version, kloop_commit, toolkit_version, driver_version, device_name, device_uuid, "
    "device_arch, started_at, ended_at, status, verdict, params_json, owner_pid, owner_host";

SessionRecord read_session(const Stmt& st) {
  SessionRecord s;
  s.id = st.int64(0);
  s.operator_name = st.text(1);
  s.contract_version = st.text(2);
  s.contract_sha256 = st.text(3);
  s.provider = st.text(4);
  s.model = st.text(5);
  s.budget = static_cast<int>(st.int64(6));
  s.seed = st.int64(7);
  s.kloop_version = st.text(8);
  s.kloop_commit = st.text(9);
  s.toolkit_version = st.text(10);
  s.driver_version = st.text(11);
  s.device_name = st.text(12);
  s.device_uuid = st.text(13);
  s.device_arch = st.text(14);
  s.started_at = st.text(15);
  s.ended_at = st.text(16);
  s.status = static_cast<SessionStatus>(st.int64(17));
  if (!st.is_null(18)) s.verdict = static_cast<VerdictCode>(st.int64(18));
  s.params = parse_or_raw(st.text(19));
  s.owner_pid = st.int64(20);
  s.owner_host = st.text(21);
  return s;
}

std::optional<int> opt_int(const Stmt& st, int col) {
  if (st.is_null(col)) return std::nullopt;
  return static_cast<int>(st.int64(col));
}

} // namespace

std::string_view session_kind(const SessionRecord& s) {
  return s.provider == kCheckerCoverageProvider ? "checker-coverage" : "optimize";
}

nlohmann::json to_json(const SessionRecord& s) {
  return {{"id", s.id},
          {"kind", session_kind(s)},
          {"operator", s.operator_name},
          {"contract_version", s.contract_version},
          {"contract_sha256", s.contract_sha256},
          {"provider", s.provider},
          {"model", s.model},
          {"budget", s.budget},
          {"seed", s.seed},
          {"kloop_version", s.kloop_version},
          {"kloop_commit", s.kloop_commit},
          {"toolkit_version", s.toolkit_version},
          {"driver_version", s.driver_version},
          {"device", {{"name", s.device_name}, {"uuid", s.device_uuid}, {"arch", s.device_arch}}},
          {"started_at", s.started_at},
          {"ended_at", s.ended_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.ended_at)},
          {"status", name(s.status)},
          {"verdict", s.verdict ? nlohmann::json(name(*s.verdict)) : nlohmann::json(nullptr)},
          {"params", s.params}};
}

nlohmann::json to_json(const GateRecord& g) {
  return {
      {"name", g.name}, {"status", name(g.status)}, {"reason", g.reason}, {"evidence", g.evidence}};
}

const GateRecord* CandidateDetail::gate(std::string_view n) const {
  for (const auto& g : gates)
    if (g.name == n) return &g;
  return nullptr;
}
const TelemetryRecord* CandidateDetail::telemetry_of(std::string_view kind) const {
  for (const auto& t : telemetry)
    if (t.kind == kind) return &t;
  return nullptr;
}
const ArtifactRecord* CandidateDetail::artifact_of(ArtifactKind kind) const {
  for (const auto& a : artifacts)
    if (a.kind == kind) return &a;
  return nullptr;
}

std::string CandidateDetail::sandbox() const {
  const GateRecord* g = gate("build");
  if (g == nullptr || !g->evidence.is_object()) return "";
  const auto it = g->evidence.find("sandbox");
  return it != g->evidence.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string sandbox_text(const SandboxCounts& counts) {
  if (counts.empty()) return "-";
  if (counts.size() == 1) return counts.front().first;
  std::string out;
  for (const auto& [kind, n] : counts)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", kind, n);
  return out;
}

namespace {
void count_sandbox(SandboxCounts& counts, const std::string& kind, int n = 1) {
  for (auto& [k, c] : counts)
    if (k == kind) {
      c += n;
      return;
    }
  counts.emplace_back(kind, n);
}
} // namespace

SandboxCounts SessionDetail::sandboxes() const {
  SandboxCounts counts;
  for (const auto& it : iterations)
    for (const auto& c : it.candidates)
      if (const std::string kind = c.sandbox(); !kind.empty()) count_sandbox(counts, kind);
  return counts;
}

int SessionDetail::unknown_usage_iterations() const {
  int n = 0;
  for (const auto& it : iterations)
    n += it.iteration.notes.is_object() && it.iteration.notes.contains("usage_invalid") ? 1 : 0;
  return n;
}

const HoldoutCommitmentRecord* SessionDetail::find_commitment(std::int64_t id) const {
  for (const auto& c : holdout_commitments)
    if (c.id == id) return &c;
  return nullptr;
}

bool SessionDetail::chain_holds(std::int64_t links, const std::string& sha256) const {
  return links >= 1 && links <= static_cast<std::int64_t>(chain_links.size()) &&
         chain_links[static_cast<std::size_t>(links - 1)] == sha256;
}

const CandidateDetail* SessionDetail::find_candidate(std::int64_t id) const {
  for (const auto& it : iterations)
    for (const auto& c : it.candidates)
      if (c.candidate.id == id) return &c;
  return nullptr;
}

const CandidateDetail* SessionDetail::best_candidate() const {
  if (promotion && promotion->candidate_id) return find_candidate(*promotion->candidate_id);
  const CandidateDetail* best = nullptr;
  for (const auto& it : iterations)
    for (const auto& c : it.candidates)
      if (c.candidate.verdict == VerdictCode::kPass && c.candidate.speedup &&
          (!best || *c.candidate.speedup > *best->candidate.speedup))
        best = &c;
  return best;
}

std::int64_t SessionDetail::tokens() const {
  std::int64_t n = 0;
  for (const auto& it : iterations)
    for (const auto& r : it.responses)
      n += r.prompt_tokens.value_or(0) + r.completion_tokens.value_or(0);
  return n;
}

double SessionDetail::wall_ms() const {
  double ms = 0;
  for (const auto& it : iterations)
    ms += it.iteration.wall_ms;
  return ms;
}

nlohmann::json SessionDetail::to_json() const {
  nlohmann::json its = nlohmann::json::array();
  for (const auto& it : iterations) {
    nlohmann::json cands = nlohmann::json::array();
    for (const auto& c : it.candidates) {
      nlohmann::json gates = nlohmann::json::array(), failing = nlohmann::json::array(),
                     arts = nlohmann::json::array(), bench = nlohmann::json::array(),
                     tel = nlohmann::json::object();
      for (const auto& g : c.gates)
        gates.push_back(store::to_json(g));
      for (const auto& tc : c.cases)
        if (tc.status != GateCode::kPass)
          failing.push_back({{"gate", tc.gate},
                             {"name", tc.name},
                             {"status", name(tc.status)},
                             {"detail", tc.detail}});
      for (const auto& a : c.artifacts)
        arts.push_back(
            {{"kind", name(a.kind)}, {"name", a.name}, {"sha256", a.sha256}, {"size", a.size}});
      for (const auto& b : c.benchmarks)
        bench.push_back({{"series", b.series},
                         {"samples_sha256", b.samples_sha256},
                         {"count", b.count},
                         {"median_us", opt(b.median_us)},
                         {"lo_us", opt(b.lo_us)},
                         {"hi_us", opt(b.hi_us)}});
      for (const auto& t : c.telemetry)
        tel[t.kind] = t.data;
      const std::string sandbox = c.sandbox();
      cands.push_back(
          {{"id", c.candidate.id},
           {"sandbox", sandbox.empty() ? nlohmann::json(nullptr) : nlohmann::json(sandbox)},
           {"source_sha256", c.candidate.source_sha256},
           {"manifest_sha256", c.candidate.manifest_sha256},
           {"verdict", name(c.candidate.verdict)},
           {"speedup", opt(c.candidate.speedup)},
           {"speedup_interval", {opt(c.candidate.speedup_lo), opt(c.candidate.speedup_hi)}},
           {"gates", gates},
           {"failing_cases", failing},
           {"artifacts", arts},
           {"benchmarks", bench},
           {"telemetry", tel}});
    }
    std::int64_t toks = 0;
    for (const auto& r : it.responses)
      toks += r.prompt_tokens.value_or(0) + r.completion_tokens.value_or(0);
    // "iteration" is 1-based, as `kloop show` and `kloop optimize` print it (the store's idx + 1).
    nlohmann::json entry = {{"iteration", it.iteration.index + 1},
                            {"started_at", it.iteration.started_at},
                            {"wall_ms", it.iteration.wall_ms},
                            {"tokens", toks},
                            {"candidates", cands}};
    if (it.iteration.notes.is_object() && it.iteration.notes.contains("usage_invalid"))
      entry["usage_invalid"] = it.iteration.notes["usage_invalid"];
    its.push_back(std::move(entry));
  }
  nlohmann::json j = {{"session", store::to_json(session)}, {"iterations", its}};
  nlohmann::json sandbox = nlohmann::json::object();
  for (const auto& [kind, n] : sandboxes())
    sandbox[kind] = n;
  j["sandbox"] = sandbox; // built candidates per sandbox kind ({} when none was built)
  j["tokens"] = tokens();
  j["unknown_usage_iterations"] = unknown_usage_iterations();
  j["promotion"] = nullptr;
  if (promotion)
    j["promotion"] = {{"decision", name(promotion->decision)},
                      {"candidate_id", opt(promotion->candidate_id)},
                      {"reason", promotion->reason},
                      {"decided_at", promotion->decided_at}};
  // Holdout: each commitment, and each run with its commitment, the case counts and whether the
  // commitment was verified against the revealed suite (null when the result does not say).
  nlohmann::json commitments = nlohmann::json::array(), holdout = nlohmann::json::array();
  for (const auto& c : holdout_commitments)
    commitments.push_back({{"id", c.id},
                           {"commitment_sha256", c.commitment_sha256},
                           {"suite_version", c.suite_version},
                           {"created_at", c.created_at}});
  j["holdout_commitments"] = commitments;
  for (const auto& h : holdout_runs) {
    const HoldoutCommitmentRecord* c = find_commitment(h.commitment_id);
    const auto result = [&](const char* key) {
      return h.result.is_object() && h.result.contains(key) ? h.result[key]
                                                            : nlohmann::json(nullptr);
    };
    holdout.push_back(
        {{"candidate_id", h.candidate_id},
         {"commitment_sha256", c ? nlohmann::json(c->commitment_sha256) : nlohmann::json(nullptr)},
         {"suite_version", c ? nlohmann::json(c->suite_version) : nlohmann::json(nullptr)},
         {"status", name(h.status)},
         {"passed", result("passed")},
         {"failed", result("failed")},
         {"commitment_verified", result("commitment_verified")},
         {"report_sha256",
          h.report_sha256.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.report_sha256)},
         {"retired", h.retired},
         {"ran_at", h.ran_at}});
  }
  j["holdout_runs"] = holdout;
  nlohmann::json rec = nlohmann::json::array();
  for (const auto& r : receipts)
    rec.push_back({{"payload_sha256", r.payload_sha256},
                   {"signing_key_id", r.signing_key_id},
                   {"reviewer", r.reviewer},
                   {"signed_at", r.signed_at}});
  j["receipts"] = rec;
  j["phase_summary"] = phase_summary(*this).to_json(); // where the time went (phase_view.h)
  const CandidateDetail* best = best_candidate();
  j["best_candidate_id"] = best ? nlohmann::json(best->candidate.id) : nlohmann::json(nullptr);
  // The row chain's head (store/chain.h), null for a session recorded before row chaining.
  j["row_chain"] =
      chain_head ? nlohmann::json{{"links", chain_head->links}, {"head_sha256", chain_head->sha256}}
                 : nlohmann::json(nullptr);
  return j;
}

nlohmann::json SessionSummary::to_json() const {
  nlohmann::json sandbox_json = nlohmann::json::object();
  for (const auto& [kind, n] : sandboxes)
    sandbox_json[kind] = n;
  return {{"id", session.id},
          {"kind", session_kind(session)},
          {"operator", session.operator_name},
          {"provider", session.provider},
          {"model", session.model},
          {"budget", session.budget},
          {"iterations", iterations},
          {"candidates", candidates},
          {"status", name(session.status)},
          {"verdict", session.verdict ? nlohmann::json(name(*session.verdict)) : nullptr},
          {"decision", decision ? nlohmann::json(name(*decision)) : nullptr},
          {"best_speedup", opt(best_speedup)},
          {"best_speedup_interval", {opt(best_lo), opt(best_hi)}},
          {"tokens", tokens},
          {"sandbox", sandbox_json},
          {"started_at", session.started_at}};
}

std::vector<SessionSummary> Store::list_sessions() {
  std::vector<SessionSummary> out;
  Stmt st = db_.prepare(fmt::format("SELECT {} FROM sessions ORDER BY id DESC", kSessionCols));
  while (st.step()) {
    SessionSummary s;
    s.session = read_session(st);
    out.push_back(std::move(s));
  }
  for (auto& s : out) {
    Stmt c = db_.prepare(
        "SELECT (SELECT count(*) FROM iterations WHERE session_id = ?1), "
        "(SELECT count(*) FROM candidates c JOIN iterations i ON c.iteration_id = i.id "
        "  WHERE i.session_id = ?1), "
        "(SELECT coalesce(sum(coalesce(prompt_tokens,0) + coalesce(completion_tokens,0)),0) "
        "  FROM responses r JOIN iterations i ON r.iteration_id = i.id WHERE i.session_id = ?1)");
    c.bind(1, s.session.id);
    if (c.step()) {
      s.iterations = static_cast<int>(c.int64(0));
      s.candidates = static_cast<int>(c.int64(1));
      s.tokens = c.int64(2);
    }
    // The same candidate as SessionDetail::best_candidate(): the decided one, else the fastest
    // passing one (a session list and `kloop compare` must not disagree).
    Stmt b = db_.prepare(
        "SELECT speedup, speedup_lo, speedup_hi FROM ("
        " SELECT c.speedup, c.speedup_lo, c.speedup_hi, 0 AS rank, 0 AS v FROM candidates c "
        " WHERE c.id = (SELECT candidate_id FROM promotion_decisions WHERE session_id = ?1 "
        "   ORDER BY id DESC LIMIT 1)"
        " UNION ALL "
        " SELECT c.speedup, c.speedup_lo, c.speedup_hi, 1 AS rank, c.speedup AS v FROM candidates "
        " c JOIN iterations i ON c.iteration_id = i.id WHERE i.session_id = ?1 AND c.verdict = ?2 "
        " AND c.speedup IS NOT NULL) ORDER BY rank, v DESC LIMIT 1");
    b.bind(1, s.session.id).bind(2, static_cast<int>(VerdictCode::kPass));
    if (b.step()) {
      s.best_speedup = b.opt_real(0);
      s.best_lo = b.opt_real(1);
      s.best_hi = b.opt_real(2);
    }
    Stmt d = db_.prepare(
        "SELECT decision FROM promotion_decisions WHERE session_id = ? ORDER BY id DESC LIMIT 1");
    d.bind(1, s.session.id);
    if (d.step()) s.decision = static_cast<Decision>(d.int64(0));
    // CandidateDetail::sandbox() in SQL; an evidence row that is not JSON (edited) counts as none.
    Stmt sb = db_.prepare(
        "SELECT k, count(*) FROM (SELECT CASE WHEN json_valid(g.evidence_json) AND "
        "json_type(g.evidence_json, '$.sandbox') = 'text' THEN json_extract(g.evidence_json, "
        "'$.sandbox') END AS k, min(c.id) AS first FROM gate_results g JOIN candidates c ON "
        "g.candidate_id = c.id JOIN iterations i ON c.iteration_id = i.id WHERE i.session_id = ? "
        "AND g.name = 'build' GROUP BY c.id) WHERE k IS NOT NULL GROUP BY k ORDER BY min(first)");
    sb.bind(1, s.session.id);
    while (sb.step())
      count_sandbox(s.sandboxes, sb.text(0), static_cast<int>(sb.int64(1)));
  }
  return out;
}

SessionDetail Store::load_session(std::int64_t id) {
  SessionDetail d;
  {
    Stmt st = db_.prepare(fmt::format("SELECT {} FROM sessions WHERE id = ?", kSessionCols));
    st.bind(1, id);
    if (!st.step())
      throw NoSuchSession(fmt::format("store: no session {} in {}; list them with `{}`", id, dir_,
                                      kloop_command("sessions", dir_)));
    d.session = read_session(st);
  }
  Stmt its =
      db_.prepare("SELECT id, idx, started_at, ended_at, wall_ms, notes_json FROM iterations WHERE "
                  "session_id = ? ORDER BY idx");
  its.bind(1, id);
  while (its.step()) {
    IterationDetail it;
    it.iteration = {its.int64(0), id,          static_cast<int>(its.int64(1)), its.text(2),
                    its.text(3),  its.real(4), parse_or_raw(its.text(5))};
    d.iterations.push_back(std::move(it));
  }
  for (auto& it : d.iterations) {
    const std::int64_t iid = it.iteration.id;
    Stmt p =
        db_.prepare("SELECT id, role, blob_sha256, tokens FROM prompts WHERE iteration_id = ?");
    p.bind(1, iid);
    while (p.step())
      it.prompts.push_back({p.int64(0), iid, p.text(1), p.text(2), opt_int(p, 3)});
    Stmt r = db_.prepare(
        "SELECT id, prompt_id, blob_sha256, provider, model, http_status, latency_ms, retries, "
        "prompt_tokens, completion_tokens, error FROM responses WHERE iteration_id = ?");
    r.bind(1, iid);
    while (r.step())
      it.responses.push_back({r.int64(0), iid, r.opt_int64(1), r.text(2), r.text(3), r.text(4),
                              opt_int(r, 5), r.real(6), static_cast<int>(r.int64(7)), opt_int(r, 8),
                              opt_int(r, 9), r.text(10)});
    Stmt c = db_.prepare(
        "SELECT id, ordinal, source_sha256, manifest_sha256, verdict, speedup, speedup_lo, "
        "speedup_hi, report_json FROM candidates WHERE iteration_id = ? ORDER BY ordinal, id");
    c.bind(1, iid);
    while (c.step()) {
      CandidateDetail cd;
      cd.candidate = {c.int64(0),
                      iid,
                      static_cast<int>(c.int64(1)),
                      c.text(2),
                      c.text(3),
                      static_cast<VerdictCode>(c.int64(4)),
                      c.opt_real(5),
                      c.opt_real(6),
                      c.opt_real(7),
                      parse_or_raw(c.text(8))};
      it.candidates.push_back(std::move(cd));
    }
    Stmt t = db_.prepare(
        "SELECT id, candidate_id, tool, tool_version, argv_json, cwd, exit_code, signal, wall_ms, "
        "user_ms, sys_ms, max_rss_kb, stdout_sha256, stderr_sha256 FROM tool_calls WHERE "
        "iteration_id = ? ORDER BY id");
    t.bind(1, iid);
    while (t.step()) {
      ToolCallRecord tc{t.int64(0), iid,        t.opt_int64(1), t.text(2),     t.text(3),
                        {},         t.text(5),  opt_int(t, 6),  opt_int(t, 7), t.real(8),
                        t.real(9),  t.real(10), t.int64(11),    t.text(12),    t.text(13)};
      auto argv = parse_or_raw(t.text(4));
      if (argv.is_array())
        for (const auto& a : argv)
          tc.argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
      bool placed = false;
      for (auto& cd : it.candidates)
        if (tc.candidate_id && cd.candidate.id == *tc.candidate_id) {
          cd.tool_calls.push_back(tc);
          placed = true;
        }
      if (!placed) it.tool_calls.push_back(std::move(tc));
    }
    for (auto& cd : it.candidates) {
      const std::int64_t cid = cd.candidate.id;
      Stmt g = db_.prepare(
          "SELECT id, ordinal, name, status, reason, evidence_json FROM gate_results WHERE "
          "candidate_id = ? ORDER BY ordinal, id");
      g.bind(1, cid);
      while (g.step())
        cd.gates.push_back({g.int64(0), cid, static_cast<int>(g.int64(1)), g.text(2),
                            static_cast<GateCode>(g.int64(3)), g.text(4), parse_or_raw(g.text(5))});
      Stmt tc = db_.prepare(
          "SELECT id, gate, name, status, detail_json FROM test_cases WHERE candidate_id = ? "
          "ORDER BY id");
      tc.bind(1, cid);
      while (tc.step())
        cd.cases.push_back({tc.int64(0), cid, tc.text(1), tc.text(2),
                            static_cast<GateCode>(tc.int64(3)), parse_or_raw(tc.text(4))});
      Stmt a = db_.prepare(
          "SELECT id, kind, name, sha256, size FROM artifacts WHERE candidate_id = ? ORDER BY id");
      a.bind(1, cid);
      while (a.step())
        cd.artifacts.push_back({a.int64(0), iid, cid, static_cast<ArtifactKind>(a.int64(1)),
                                a.text(2), a.text(3), a.int64(4)});
      Stmt b = db_.prepare("SELECT id, series, samples_sha256, count, median_us, lo_us, hi_us FROM "
                           "benchmark_samples WHERE candidate_id = ? ORDER BY id");
      b.bind(1, cid);
      while (b.step())
        cd.benchmarks.push_back({b.int64(0), cid, b.text(1), b.text(2),
                                 static_cast<int>(b.int64(3)), b.opt_real(4), b.opt_real(5),
                                 b.opt_real(6)});
      Stmt te = db_.prepare(
          "SELECT id, kind, data_json FROM telemetry WHERE candidate_id = ? ORDER BY id");
      te.bind(1, cid);
      while (te.step())
        cd.telemetry.push_back({te.int64(0), cid, te.text(1), parse_or_raw(te.text(2))});
    }
  }
  Stmt hc = db_.prepare(
      "SELECT id, commitment_sha256, suite_version, created_at FROM holdout_commitments WHERE "
      "session_id = ? ORDER BY id");
  hc.bind(1, id);
  while (hc.step())
    d.holdout_commitments.push_back({hc.int64(0), id, hc.text(1), hc.text(2), hc.text(3)});
  Stmt hr = db_.prepare(
      "SELECT r.id, r.commitment_id, r.candidate_id, r.status, r.result_json, r.report_sha256, "
      "r.retired, r.ran_at FROM holdout_runs r JOIN holdout_commitments c ON r.commitment_id = "
      "c.id WHERE c.session_id = ? ORDER BY r.id");
  hr.bind(1, id);
  while (hr.step())
    d.holdout_runs.push_back({hr.int64(0), hr.int64(1), hr.int64(2),
                              static_cast<GateCode>(hr.int64(3)), parse_or_raw(hr.text(4)),
                              hr.text(5), hr.int64(6) != 0, hr.text(7)});
  Stmt pd = db_.prepare("SELECT id, candidate_id, decision, reason, evidence_json, decided_at FROM "
                        "promotion_decisions WHERE session_id = ? ORDER BY id DESC LIMIT 1");
  pd.bind(1, id);
  if (pd.step())
    d.promotion = PromotionRecord{pd.int64(0),     id,
                                  pd.opt_int64(1), static_cast<Decision>(pd.int64(2)),
                                  pd.text(3),      parse_or_raw(pd.text(4)),
                                  pd.text(5)};
  Stmt rc = db_.prepare(
      "SELECT id, payload_sha256, receipt_sha256, signing_key_id, reviewer, signed_at FROM "
      "receipts WHERE session_id = ? ORDER BY id");
  rc.bind(1, id);
  while (rc.step())
    d.receipts.push_back(
        {rc.int64(0), id, rc.text(1), rc.text(2), rc.text(3), rc.text(4), rc.text(5)});
  d.chain_head = store::chain_head(db_, id);
  if (d.chain_head) {
    Stmt ch = db_.prepare("SELECT link_sha256 FROM row_chain WHERE session_id = ? ORDER BY seq");
    ch.bind(1, id);
    while (ch.step())
      d.chain_links.push_back(ch.text(0));
  }
  return d;
}

std::optional<ChainHead> Store::chain_head(std::int64_t session_id) {
  return store::chain_head(db_, session_id);
}

VerifyReport Store::verify() {
  VerifyReport rep;
  {
    Stmt ic = db_.prepare("PRAGMA integrity_check");
    std::string lines;
    while (ic.step())
      lines += (lines.empty() ? "" : "\n") + ic.text(0);
    rep.integrity = lines;
  }
  std::set<std::string> registered;
  Stmt st = db_.prepare("SELECT sha256 FROM blobs ORDER BY sha256");
  while (st.step()) {
    const std::string sha = st.text(0);
    registered.insert(sha);
    ++rep.blobs_checked;
    switch (blobs_.check(sha)) {
    case BlobState::kOk:
      break;
    case BlobState::kMissing:
      rep.missing.push_back(sha);
      break;
    case BlobState::kAltered:
      rep.altered.push_back(sha);
      break;
    }
  }
  rep.chains = verify_chains(db_, blobs_);
  // Files no row registers (BlobStore layout: blobs/ab/cdef..., temp files .tmp-*).
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(blobs_.root(), ec)) {
    if (!sub.is_directory(ec)) continue;
    const std::string prefix = sub.path().filename().string();
    for (const auto& f : fs::directory_iterator(sub.path(), ec)) {
      const std::string name = f.path().filename().string();
      if (registered.count(prefix + name) != 0) continue;
      rep.orphans.push_back(prefix + "/" + name);
      std::error_code size_ec;
      const auto size = f.file_size(size_ec);
      rep.orphan_bytes += size_ec ? 0 : static_cast<std::int64_t>(size);
    }
  }
  std::sort(rep.orphans.begin(), rep.orphans.end());
  return rep;
}

} // namespace kloop::store
