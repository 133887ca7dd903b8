// Sealed holdout suites (seed: "Freeze source, dispatch, reference, and policy before the final
// holdout"). At session start kloop draws a secret seed, derives a suite whose families differ from
// the public ones, and records a commitment (SHA-256 of the canonical suite plus the seed) before
// the first prompt. The sealed file lives outside every sandbox with owner-only permissions; the
// suite is unsealed once for the frozen candidate and retired in the same step; the seed is
// revealed only after that run. HoldoutResult is its own type: feedback/ accepts only
// evaluator::PublicReport, so no holdout value can reach a prompt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"
#include "kernels/operator.h"

namespace kloop::holdout {

// A 64-bit secret from the OS CSPRNG (libsodium randombytes_buf).
std::uint64_t draw_secret_seed();

// The holdout suite of `op` for `seed` (op.holdout_suite: families that differ from the public
// ones; for weighted_rmsnorm/1 random widths in [1, 20000] (a third of them primes, the next one
// at or after the draw, so at most 20011), random outer shapes up to four dimensions in total,
// random gaps and storage offsets, heavy-tailed rows with outlier channels, per-row scales from
// 1e-30 to 1e19, NaN and Inf at random positions, random eps; all three dtypes; every case in
// family "holdout" (no public family)). `cases` cases; each has at most
// max(max_elements / cases, row width) elements (for RMSNorm a transposed one at most
// max(200000, H)), so with the defaults (per case 500000 > 20011) they total at most
// `max_elements` and the CPU reference answers in seconds. Deterministic for a seed.
struct SuiteOptions {
  int cases = 48;
  std::int64_t max_elements = 24'000'000;
};
std::vector<nlohmann::json> generate_suite(const op::Operator& op, std::uint64_t seed,
                                           const SuiteOptions& options = {});

// Canonical text of a suite: one compact JSON array (object keys sorted) of the case specs.
std::string canonical_suite_text(const std::vector<nlohmann::json>& suite);
// SHA-256 hex over canonical_suite_text + "\n" + op.holdout_version() + "\nseed=" + decimal seed.
std::string commitment_for(const op::Operator& op, const std::vector<nlohmann::json>& suite,
                           std::uint64_t seed);
// Recomputes the suite from a revealed seed and checks it against a stored commitment.
bool verify_commitment(const op::Operator& op, const std::string& commitment,
                       std::uint64_t revealed_seed, const SuiteOptions& options = {});

// Raised when a retired or tampered sealed suite is used again.
class HoldoutError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The sealed suite on disk: DIR/<label>.sealed (mode 0600, DIR 0700) holds the seed and options;
// after its one use it is renamed to <label>.retired. Never place DIR inside a sandbox's view.
// The file is never its own witness: every check compares it with `commitment()`, the commitment
// the store recorded when the session began, so a file whose seed and commitment were edited
// together is refused like one whose seed alone was edited.
class SealedSuite {
public:
  // Draws nothing: seals `seed` of operator `op` under `dir` (the file names the operator's
  // contract id); commitment() is then the value the caller records in the store before the
  // first prompt. Throws HoldoutError if the label exists already.
  static SealedSuite create(const std::filesystem::path& dir, const std::string& label,
                            const op::Operator& op, std::uint64_t seed,
                            const SuiteOptions& options = {});
  // Opens an existing sealed or retired suite of a session whose store recorded
  // `recorded_commitment` when it began. Throws HoldoutError naming the path when the file is
  // absent or malformed (the field named), when it names no registered operator (a file without
  // "operator", written before operators were registered, belongs to the operator whose holdout
  // version is its suite_version), or when its commitment is not the recorded one.
  static SealedSuite open(const std::filesystem::path& dir, const std::string& label,
                          const std::string& recorded_commitment);

  // The commitment recorded in the store (SHA-256 hex; commitment_for).
  const std::string& commitment() const { return commitment_; }
  // The operator whose holdout families the suite draws from.
  const op::Operator& op() const { return *op_; }
  // The generation options the file was sealed with (read when opened).
  const SuiteOptions& options() const { return options_; }
  bool retired() const;
  // The suite for its single run. Retires the file first (rename), so a crash mid-run still
  // counts as a use. Throws HoldoutError when already retired, or when the suite regenerated from
  // the file's seed and options does not match commitment() (the sealed file was altered).
  std::vector<nlohmann::json> unseal_for_run();
  // The seed, only once retired (throws HoldoutError before).
  std::uint64_t reveal_seed() const;

private:
  SealedSuite(std::filesystem::path dir, std::string label, const op::Operator* op,
              std::string commitment, SuiteOptions options)
      : dir_(std::move(dir)), label_(std::move(label)), op_(op), commitment_(std::move(commitment)),
        options_(options) {}
  std::filesystem::path sealed_path() const;
  std::filesystem::path retired_path() const;
  std::filesystem::path dir_;
  std::string label_;
  const op::Operator* op_ = nullptr;
  std::string commitment_;
  SuiteOptions options_;
};

// The outcome of the one holdout run. Deliberately not a PublicReport.
struct HoldoutResult {
  evaluator::GateStatus status = evaluator::GateStatus::kNotRun;
  std::string reason;     // not_run / fail reason (case names only, never values)
  std::string commitment; // the commitment this run answered
  std::int64_t passed = 0, failed = 0;
  std::uint64_t revealed_seed = 0;
  nlohmann::json detail = nlohmann::json::object(); // suite result JSON (store only)
  nlohmann::json to_json() const;
  // Inverse of to_json (a run recorded in the store). Throws HoldoutError naming the bad field.
  static HoldoutResult from_json(const nlohmann::json& j);
};

} // namespace kloop::holdout
