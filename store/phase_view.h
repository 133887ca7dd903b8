// Where the candidates' time went, read back from the store (issue 26): each candidate's phase
// record (telemetry kind "phases", written by the loop from evaluator/phases.h: {"wall_ms",
// "phases": [{"name","start_ms","wall_ms","device","nested","detail"}]}) and the totals of a
// session, shared by `kloop show` (text), `kloop show --json` (SessionDetail::to_json's
// "phase_summary") and the HTML report. store/ reads the JSON only; it knows no evaluator type.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::store {

struct CandidateDetail;
struct SessionDetail;

struct PhaseRow {
  std::string name;
  double start_ms = 0, wall_ms = 0;
  std::string device;
  bool nested = false; // part of another phase's time
  nlohmann::json detail = nlohmann::json::object();
};

// One candidate's record; nullopt when it has none (a session recorded before issue 26, or a
// reply that did not parse).
struct CandidatePhases {
  double wall_ms = 0; // the whole evaluation
  std::vector<PhaseRow> phases;
};
std::optional<CandidatePhases> candidate_phases(const CandidateDetail& candidate);

// The group a phase is counted in: its name up to the first ':' ("sanitizer:memcheck" ->
// "sanitizer"), or the whole name.
std::string phase_group(const std::string& name);

// One row of a session's totals: a group of top-level phases ("build", "sanitizer", ...) or one
// nested phase by its full name ("benchmark:streaming:cold", "worker_start").
struct PhaseTotal {
  std::string name;
  bool nested = false;
  int candidates = 0; // candidates that had it
  int runs = 0;       // phases added up
  double total_ms = 0, max_ms = 0;
  long rounds = 0;                                // benchmark states: rounds sampled
  int states = 0;                                 // benchmark states counted
  nlohmann::json stop = nlohmann::json::object(); // benchmark states: stop reason -> count
};
struct PhaseSummary {
  int candidates = 0;             // candidates with a phase record
  double wall_ms = 0;             // sum of their evaluation wall times
  std::vector<PhaseTotal> totals; // groups in evaluation order, each followed by its nested rows
  nlohmann::json to_json() const; // {"candidates","wall_ms","totals":[{name,nested,...}]}
};
PhaseSummary phase_summary(const SessionDetail& session);

// `kloop show`'s line for one candidate: "    time 48.2 s: build 2.10 s, static 0.41 s, ..."
// (groups of top-level phases in evaluation order), or "" when it has no record.
std::string candidate_phase_text(const CandidateDetail& candidate);

// `kloop show`'s table of the session's totals (one row per PhaseTotal; benchmark rows with their
// rounds and stop reasons), or "" when no candidate has a record.
std::string phase_summary_text(const SessionDetail& session);

} // namespace kloop::store
