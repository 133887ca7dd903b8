#include "holdout/holdout.h"

#include <sodium.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <sstream>

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
  // nlohmann::json objects keep keys sorted: the dump is canonical
  return nlohmann::json(suite).dump();
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
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw HoldoutError("holdout: sealed suite " + path.string() + " is corrupt: " + e.what());
  }
}

// The operator a sealed file belongs to: its "operator" (a contract id), or, in a file written
// before operators were registered, the one whose holdout version is the file's suite_version.
const op::Operator& operator_of(const nlohmann::json& body, const fs::path& path) {
  const op::Operator* found = nullptr;
  if (body.contains("operator") && body["operator"].is_string()) {
    found = op::find_operator(body["operator"].get<std::string>());
  } else if (body.contains("suite_version") && body["suite_version"].is_string()) {
    for (const op::Operator* o : op::operators())
      if (o->holdout_version() == body["suite_version"].get<std::string>()) found = o;
  }
  if (!found)
    throw HoldoutError("holdout: sealed suite " + path.string() +
                       " names no registered operator (`kloop operators` lists them)");
  return *found;
}

SuiteOptions options_of(const nlohmann::json& j) {
  SuiteOptions o;
  o.cases = j.at("cases").get<int>();
  o.max_elements = j.at("max_elements").get<std::int64_t>();
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
  SealedSuite suite(dir, label, &op, commitment_for(op, generate_suite(op, seed, options), seed));
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

SealedSuite SealedSuite::open(const fs::path& dir, const std::string& label) {
  SealedSuite probe(dir, label, nullptr, "");
  const fs::path path =
      fs::exists(probe.sealed_path()) ? probe.sealed_path() : probe.retired_path();
  if (!fs::exists(path))
    throw HoldoutError("holdout: no sealed suite '" + label + "' in " + dir.string());
  const nlohmann::json body = read_sealed(path);
  return SealedSuite(dir, label, &operator_of(body, path),
                     body.at("commitment").get<std::string>());
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
  const std::uint64_t seed = std::stoull(body.at("seed").get<std::string>());
  const SuiteOptions options = options_of(body);
  auto suite = generate_suite(*op_, seed, options);
  if (commitment_for(*op_, suite, seed) != commitment_)
    throw HoldoutError("holdout: suite '" + label_ +
                       "' does not match its commitment; the sealed "
                       "file was altered");
  return suite;
}

std::uint64_t SealedSuite::reveal_seed() const {
  if (!retired())
    throw HoldoutError("holdout: the seed of '" + label_ + "' is revealed only after its run");
  return std::stoull(read_sealed(retired_path()).at("seed").get<std::string>());
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

} // namespace kloop::holdout
