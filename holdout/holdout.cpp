#include "holdout/holdout.h"

#include <sodium.h>
#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "kernels/registry.h"
#include "store/hash.h"

namespace kloop::holdout {
namespace fs = std::filesystem;

std::uint64_t draw_secret_seed() {
  if (sodium_init() < 0) throw HoldoutError("holdout: libsodium failed to initialise");
  std::uint64_t seed = 0;
  randombytes_buf(&seed, sizeof seed);
  return seed;
}

std::vector<nlohmann::json> generate_suite(const op::Operator& op, std::uint64_t seed,
                                           const SuiteOptions& options) {
  return op.holdout_suite(seed, options.cases, options.max_elements);
}

std::string canonical_suite_text(const std::vector<nlohmann::json>& suite) {
  return nlohmann::json(suite).dump(); // nlohmann::json objects keep keys sorted: canonical
}

std::string commitment_for(const op::Operator& op, const std::vector<nlohmann::json>& suite,
                           std::uint64_t seed) {
  return store::sha256_hex(canonical_suite_text(suite) + "\n" + std::string(op.holdout_version()) +
                           "\nseed=" + std::to_string(seed));
}

bool verify_commitment(const op::Operator& op, const std::string& commitment,
                       std::uint64_t revealed_seed, const SuiteOptions& options) {
  return commitment_for(op, generate_suite(op, revealed_seed, options), revealed_seed) ==
         commitment;
}

namespace {

nlohmann::json read_sealed(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw HoldoutError("holdout: cannot read sealed suite " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json body = nlohmann::json::parse(ss.str(), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    throw HoldoutError("holdout: sealed suite " + path.string() + " is corrupt: not a JSON object");
  return body;
}

// A field of a sealed file, checked: `kind` "string" or "integer" (non-negative).
const nlohmann::json& field_of(const nlohmann::json& body, const fs::path& path, const char* key,
                               std::string_view kind) {
  const auto it = body.find(key);
  const bool ok = it != body.end() &&
                  (kind == "string" ? it->is_string() : it->is_number_integer() && *it >= 0);
  if (!ok)
    throw HoldoutError(fmt::format("holdout: sealed suite {} is corrupt: field `{}` is missing or "
                                   "not {}",
                                   path.string(), key,
                                   kind == "string" ? "a string" : "a non-negative integer"));
  return *it;
}

std::uint64_t seed_of(const nlohmann::json& body, const fs::path& path) {
  const std::string text = field_of(body, path, "seed", "string").get<std::string>();
  std::uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw HoldoutError("holdout: sealed suite " + path.string() +
                       " is corrupt: field `seed` is not a decimal integer");
  return seed;
}

// The operator a sealed file belongs to: its "operator" (a contract id), or, in a file written
// before operators were registered, the one whose holdout version is the file's suite_version.
const op::Operator& operator_of(const nlohmann::json& body, const fs::path& path) {
  const op::Operator* found = nullptr;
  if (body.contains("operator")) {
    found = op::find_operator(field_of(body, path, "operator", "string").get<std::string>());
  } else {
    const std::string version = field_of(body, path, "suite_version", "string").get<std::string>();
    for (const op::Operator* o : op::operators())
      if (o->holdout_version() == version) found = o;
  }
  if (!found)
    throw HoldoutError("holdout: sealed suite " + path.string() +
                       " names no registered operator (`kloop operators` lists them)");
  return *found;
}

// Bound on a sealed file's case count, so a corrupt file cannot make unsealing generate for hours.
constexpr int kMaxSealedCases = 100000;

SuiteOptions options_of(const nlohmann::json& body, const fs::path& path) {
  SuiteOptions o;
  o.cases = field_of(body, path, "cases", "integer").get<int>();
  o.max_elements = field_of(body, path, "max_elements", "integer").get<std::int64_t>();
  if (o.cases < 1 || o.cases > kMaxSealedCases)
    throw HoldoutError(fmt::format("holdout: sealed suite {} is corrupt: field `cases` must be in "
                                   "[1, {}]",
                                   path.string(), kMaxSealedCases));
  return o;
}

} // namespace

fs::path SealedSuite::sealed_path() const {
  return dir_ / (label_ + ".sealed");
}
fs::path SealedSuite::retired_path() const {
  return dir_ / (label_ + ".retired");
}

SealedSuite SealedSuite::create(const fs::path& dir, const std::string& label,
                                const op::Operator& op, std::uint64_t seed,
                                const SuiteOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw HoldoutError("holdout: cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  SealedSuite suite(dir, label, &op, commitment_for(op, generate_suite(op, seed, options), seed),
                    options);
  if (fs::exists(suite.sealed_path()) || fs::exists(suite.retired_path()))
    throw HoldoutError("holdout: suite '" + label + "' exists already in " + dir.string() +
                       "; a suite is never re-sealed");
  const nlohmann::json body = {
      {"suite_version", op.holdout_version()}, {"operator", op.contract_id()},
      {"seed", std::to_string(seed)},          {"cases", options.cases},
      {"max_elements", options.max_elements},  {"commitment", suite.commitment_}};
  const fs::path tmp = suite.sealed_path().string() + ".tmp";
  {
    const mode_t old = ::umask(077); // the file is created owner-only
    std::ofstream out(tmp, std::ios::trunc);
    ::umask(old);
    if (!(out << body.dump())) throw HoldoutError("holdout: cannot write " + tmp.string());
  }
  fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  fs::rename(tmp, suite.sealed_path());
  return suite;
}

SealedSuite SealedSuite::open(const fs::path& dir, const std::string& label,
                              const std::string& recorded_commitment) {
  SealedSuite probe(dir, label, nullptr, recorded_commitment, {});
  const fs::path path =
      fs::exists(probe.sealed_path()) ? probe.sealed_path() : probe.retired_path();
  if (!fs::exists(path))
    throw HoldoutError("holdout: no sealed suite '" + label + "' in " + dir.string());
  const nlohmann::json body = read_sealed(path);
  probe.op_ = &operator_of(body, path);
  if (field_of(body, path, "suite_version", "string") != probe.op_->holdout_version())
    throw HoldoutError(fmt::format("holdout: sealed suite {} was sealed with the rules {}; this "
                                   "kloop generates {}, so it cannot regenerate that suite",
                                   path.string(), body["suite_version"].get<std::string>(),
                                   probe.op_->holdout_version()));
  if (field_of(body, path, "commitment", "string") != recorded_commitment)
    throw HoldoutError(fmt::format("holdout: sealed suite {} does not carry the commitment the "
                                   "store recorded when the session began ({}); the sealed file "
                                   "was replaced or altered",
                                   path.string(), recorded_commitment));
  probe.options_ = options_of(body, path);
  return probe;
}

bool SealedSuite::retired() const {
  return !fs::exists(sealed_path());
}

std::vector<nlohmann::json> SealedSuite::unseal_for_run() {
  if (retired())
    throw HoldoutError("holdout: suite '" + label_ +
                       "' is retired; a holdout runs once — seal a "
                       "fresh suite for new acceptance evidence");
  std::error_code ec;
  fs::rename(sealed_path(), retired_path(), ec); // retire before use: a crash still counts
  if (ec)
    throw HoldoutError("holdout: cannot retire " + sealed_path().string() + ": " + ec.message());
  const nlohmann::json body = read_sealed(retired_path());
  const std::uint64_t seed = seed_of(body, retired_path());
  auto suite = generate_suite(*op_, seed, options_of(body, retired_path()));
  if (commitment_for(*op_, suite, seed) != commitment_)
    throw HoldoutError("holdout: suite '" + label_ +
                       "' does not match the commitment the store recorded when the session "
                       "began; the sealed file was altered");
  return suite;
}

std::uint64_t SealedSuite::reveal_seed() const {
  if (!retired())
    throw HoldoutError("holdout: the seed of '" + label_ + "' is revealed only after its run");
  return seed_of(read_sealed(retired_path()), retired_path());
}

nlohmann::json HoldoutResult::to_json() const {
  return {{"status", evaluator::gate_status_name(status)},
          {"reason", reason},
          {"commitment", commitment},
          {"passed", passed},
          {"failed", failed},
          {"revealed_seed", std::to_string(revealed_seed)},
          {"detail", detail}};
}

HoldoutResult HoldoutResult::from_json(const nlohmann::json& j) {
  const auto fail = [](const char* field) {
    return HoldoutError(
        fmt::format("holdout: the recorded holdout result has no valid `{}`", field));
  };
  if (!j.is_object()) throw fail("status");
  HoldoutResult r;
  try {
    r.status = evaluator::parse_gate_status(j.value("status", std::string()));
  } catch (const std::invalid_argument&) {
    throw fail("status");
  }
  const auto text = [&](const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) throw fail(key);
    return it->get<std::string>();
  };
  const auto count = [&](const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) throw fail(key);
    return it->get<std::int64_t>();
  };
  r.reason = text("reason");
  r.commitment = text("commitment");
  r.passed = count("passed");
  r.failed = count("failed");
  const std::string seed = text("revealed_seed");
  const auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), r.revealed_seed);
  if (ec != std::errc() || end != seed.data() + seed.size()) throw fail("revealed_seed");
  r.detail = j.value("detail", nlohmann::json::object());
  return r;
}

} // namespace kloop::holdout
