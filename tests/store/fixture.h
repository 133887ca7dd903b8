// Test helpers: temp store directories and a fake session written through the public Store API
// (the same calls the refinement loop makes), complete enough to fill every receipt field.
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"
#include "tests/support/test_files.h"

namespace kloop::store::testing {

using kloop::test_support::TempDir; // a fresh empty directory under $TMPDIR (tests/support)

// Rows written per fake iteration (the kill test checks each committed iteration has all).
inline constexpr int kGatesPerCandidate = 7;
inline constexpr int kCasesPerCandidate = 3;
inline constexpr int kArtifactsPerCandidate = 3; // cubin, ptx, case results

// Writes iteration `index` of session `session_id` as one step. Candidate speed-up grows with
// the index; the last iteration's candidate passes every gate. `full_evidence` adds what the
// receipt needs. Returns the candidate id.
std::int64_t write_fake_iteration(Store& st, std::int64_t session_id, int index, bool pass,
                                  bool full_evidence = true);

// Creates a session with `iterations` iterations, a holdout commitment (sha256 "e" x 64, suite
// "h1") and a passed holdout run of the last candidate (48 of 48 cases, commitment verified,
// retired), a promotion decision (promoted candidate = last) and the rollout evidence. Returns
// the session id.
std::int64_t write_fake_session(Store& st, int iterations, const std::string& provider = "offline",
                                const std::string& model = "builtin-v1", bool with_device = true);

} // namespace kloop::store::testing
