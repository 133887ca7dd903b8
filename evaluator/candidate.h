// A candidate on disk (kernel.cu + manifest.json, ../shared/docs/DESIGN.md "Candidate format") and
// the byte-level checks that come before any parsing: size limits, NUL bytes, UTF-8. Loading
// problems that are the user's (no such directory, missing file) are separate from content problems
// that are the candidate's (contract gate failures).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/manifest.h"

namespace kloop::evaluator {

struct Candidate {
  std::string source;                   // kernel.cu bytes (at most kMaxSourceBytes + 1 read)
  std::string manifest_text;            // manifest.json bytes (at most kMaxManifestBytes + 1 read)
  std::uintmax_t source_file_bytes = 0; // size on disk (may exceed what was read)
  std::uintmax_t manifest_file_bytes = 0;
};

struct CandidateLoad {
  std::optional<Candidate> candidate;
  std::string error; // set iff candidate is empty: names the path, the cause and the fix
};

// Reads DIR/kernel.cu and DIR/manifest.json. A missing or unreadable directory or file is an
// error (the CLI's exit code 2), not a gate result.
CandidateLoad load_candidate_dir(const std::string& dir);

// True when `bytes` is well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

// Content problems of the two files as contract-gate errors (field "kernel.cu" or
// "manifest.json"): over the size limit, NUL bytes, invalid UTF-8 (with the byte offset).
std::vector<op::ManifestError> check_candidate_bytes(const Candidate& candidate);

} // namespace kloop::evaluator
