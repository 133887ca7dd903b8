#include "holdout/holdout.h"

#include <sodium.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <sstream>

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
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw HoldoutError("holdout: sealed suite " + path.string() + " is corrupt: " + e.what());
  }
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

SealedSuite SealedSuite::create(const fs::path& dir, const std::string& label, std::uint64_t seed,
                                const SuiteOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw HoldoutError("holdout: cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  SealedSuite suite(dir, label, commitment_for(generate_suite(seed, options), seed));
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

SealedSuite SealedSuite::open(const fs::path& dir, const std::string& label) {
  SealedSuite probe(dir, label, "");
  const fs::path path =
      fs::exists(probe.sealed_path()) ? probe.sealed_path() : probe.retired_path();
  if (!fs::exists(path))
    throw HoldoutError("holdout: no sealed suite '" + label + "' in " + dir.string());
  return SealedSuite(dir, label, read_sealed(path).at("commitment").get<std::string>());
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
  const std::uint64_t seed = std::stoull(body.at("seed").get<std::string>());
  const SuiteOptions options = options_of(body);
  auto suite = generate_suite(seed, options);
  if (commitment_for(suite, seed) != commitment_)
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
