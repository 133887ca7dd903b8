#include "holdout/holdout.h"

#include <sodium.h>
#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "store/hash.h"

namespace kloop::holdout {
namespace fs = std::filesystem;
using rmsnorm::CaseSpec;
using rmsnorm::LayoutKind;
using rmsnorm::ValueFamily;

namespace {

bool is_prime(std::int64_t n) {
  if (n < 2) return false;
  for (std::int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

std::int64_t uniform_int(rmsnorm::Rng& rng, std::int64_t lo, std::int64_t hi) { // [lo, hi]
  return lo + static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(hi - lo + 1));
}

std::int64_t draw_width(rmsnorm::Rng& rng, int index) {
  std::int64_t h = uniform_int(rng, 1, 20000);
  if (index % 3 == 0) { // a prime at or after h (<= 20011, the first prime past 20000)
    while (!is_prime(h))
      ++h;
  }
  return h;
}

// Outer shape with 1..3 dimensions whose product stays under `max_rows`.
std::vector<std::int64_t> draw_outer(rmsnorm::Rng& rng, std::int64_t max_rows) {
  const int dims = static_cast<int>(uniform_int(rng, 1, 3));
  std::vector<std::int64_t> outer;
  std::int64_t rows = 1;
  for (int d = 0; d < dims; ++d) {
    const std::int64_t cap = std::max<std::int64_t>(1, max_rows / rows);
    const std::int64_t n = uniform_int(rng, 1, std::min<std::int64_t>(cap, d == 0 ? 4096 : 64));
    outer.push_back(n);
    rows *= n;
  }
  return outer;
}

constexpr ValueFamily kValueFamilies[] = {
    ValueFamily::kHeavyTailed, ValueFamily::kOutlierChannels, ValueFamily::kRowScales,
    ValueFamily::kNanInf,      ValueFamily::kNormal,          ValueFamily::kMixedMagnitudes,
    ValueFamily::kRowScales,   ValueFamily::kOutlierChannels,
};

constexpr LayoutKind kLayouts[] = {LayoutKind::kContiguous,    LayoutKind::kSlicedGaps,
                                   LayoutKind::kStorageOffset, LayoutKind::kContiguous,
                                   LayoutKind::kTransposed,    LayoutKind::kExpanded};

} // namespace

std::uint64_t draw_secret_seed() {
  if (sodium_init() < 0) throw HoldoutError("holdout: libsodium failed to initialise");
  std::uint64_t seed = 0;
  randombytes_buf(&seed, sizeof seed);
  return seed;
}

std::vector<CaseSpec> generate_suite(std::uint64_t seed, const SuiteOptions& options) {
  rmsnorm::Rng rng(seed ^ 0x686f6c646f75745fULL); // "holdout_": separates it from public draws
  std::vector<CaseSpec> suite;
  const std::int64_t per_case = std::max<std::int64_t>(1, options.max_elements / options.cases);
  for (int i = 0; i < options.cases; ++i) {
    CaseSpec s;
    s.name = "holdout-" + std::to_string(i);
    s.family = "holdout";
    s.dtype = kAllDTypes[i % 3];
    s.h = draw_width(rng, i);
    s.layout = kLayouts[uniform_int(rng, 0, std::size(kLayouts) - 1)];
    // Transposed views materialise an [H, rows] buffer; keep them small.
    const std::int64_t row_budget = s.layout == LayoutKind::kTransposed
                                        ? std::max<std::int64_t>(1, 200'000 / s.h)
                                        : std::max<std::int64_t>(1, per_case / s.h);
    s.outer = draw_outer(rng, row_budget);
    if (s.layout == LayoutKind::kSlicedGaps) s.gap = uniform_int(rng, 1, 64);
    s.offset = s.layout == LayoutKind::kStorageOffset ? uniform_int(rng, 1, 7) : 0;
    s.weight_offset = uniform_int(rng, 0, 3);
    s.values = kValueFamilies[uniform_int(rng, 0, std::size(kValueFamilies) - 1)];
    // eps log-uniform in [1e-12, 1e-1]; one case in eight uses the integer 1.
    if (uniform_int(rng, 0, 7) == 0) {
      s.eps = rmsnorm::EpsScalar::integer(1);
    } else {
      s.eps = rmsnorm::EpsScalar::of(std::pow(10.0, -12.0 + 11.0 * rng.uniform()));
    }
    s.seed = rng.next();
    suite.push_back(std::move(s));
  }
  return suite;
}

std::string canonical_suite_text(const std::vector<CaseSpec>& suite) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& s : suite)
    arr.push_back(s.to_json());
  return arr.dump(); // nlohmann::json objects keep keys sorted: the dump is canonical
}

std::string commitment_for(const std::vector<CaseSpec>& suite, std::uint64_t seed) {
  return store::sha256_hex(canonical_suite_text(suite) + "\n" + std::string(kSuiteVersion) +
                           "\nseed=" + std::to_string(seed));
}

bool verify_commitment(const std::string& commitment, std::uint64_t revealed_seed,
                       const SuiteOptions& options) {
  return commitment_for(generate_suite(revealed_seed, options), revealed_seed) == commitment;
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

SealedSuite SealedSuite::create(const fs::path& dir, const std::string& label, std::uint64_t seed,
                                const SuiteOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw HoldoutError("holdout: cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  SealedSuite suite(dir, label, commitment_for(generate_suite(seed, options), seed), options);
  if (fs::exists(suite.sealed_path()) || fs::exists(suite.retired_path()))
    throw HoldoutError("holdout: suite '" + label + "' exists already in " + dir.string() +
                       "; a suite is never re-sealed");
  const nlohmann::json body = {{"suite_version", kSuiteVersion},
                               {"seed", std::to_string(seed)},
                               {"cases", options.cases},
                               {"max_elements", options.max_elements},
                               {"commitment", suite.commitment_}};
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
  SealedSuite probe(dir, label, recorded_commitment, {});
  const fs::path path =
      fs::exists(probe.sealed_path()) ? probe.sealed_path() : probe.retired_path();
  if (!fs::exists(path))
    throw HoldoutError("holdout: no sealed suite '" + label + "' in " + dir.string());
  const nlohmann::json body = read_sealed(path);
  if (field_of(body, path, "suite_version", "string") != kSuiteVersion)
    throw HoldoutError(fmt::format("holdout: sealed suite {} was sealed with the rules {}; this "
                                   "kloop generates {}, so it cannot regenerate that suite",
                                   path.string(), body["suite_version"].get<std::string>(),
                                   kSuiteVersion));
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

std::vector<CaseSpec> SealedSuite::unseal_for_run() {
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
  auto suite = generate_suite(seed, options_of(body, retired_path()));
  if (commitment_for(suite, seed) != commitment_)
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
