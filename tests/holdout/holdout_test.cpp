// The holdout library on its own (holdout/holdout.h): suites are deterministic per seed, disjoint
// from the public families and within their element caps; a sealed suite is sealed once, unsealed
// once, reveals its seed only after retirement, and is checked against the commitment the store
// recorded, so an altered file (its seed alone, or its seed and commitment together), a wrong seed
// or a malformed file is refused with a HoldoutError, never used.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "holdout/holdout.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/operator.h"
#include "tests/support/test_files.h"

namespace kloop::holdout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using rmsnorm::CaseSpec;
using test_support::read_file;
using test_support::TempDir;

constexpr std::uint64_t kSeed = 0x1234abcd5678ef01ULL;

// The library for weighted_rmsnorm/1, with its case specs typed (the operator's holdout families).
const op::Operator& rms() {
  return rmsnorm::operator_instance();
}
const std::string kSuiteVersion(rms().holdout_version());
std::vector<CaseSpec> specs_of(const std::vector<json>& specs) {
  std::vector<CaseSpec> out;
  for (const json& j : specs)
    out.push_back(CaseSpec::from_json(j));
  return out;
}
std::vector<json> json_of(const std::vector<CaseSpec>& specs) {
  std::vector<json> out;
  for (const CaseSpec& s : specs)
    out.push_back(s.to_json());
  return out;
}
std::vector<CaseSpec> generate_suite(std::uint64_t seed, const SuiteOptions& o = {}) {
  return specs_of(holdout::generate_suite(rms(), seed, o));
}
std::string canonical_suite_text(const std::vector<CaseSpec>& suite) {
  return holdout::canonical_suite_text(json_of(suite));
}
std::string commitment_for(const std::vector<CaseSpec>& suite, std::uint64_t seed) {
  return holdout::commitment_for(rms(), json_of(suite), seed);
}
bool verify_commitment(const std::string& c, std::uint64_t seed, const SuiteOptions& o = {}) {
  return holdout::verify_commitment(rms(), c, seed, o);
}
SealedSuite seal(const fs::path& dir, const std::string& label, std::uint64_t seed,
                 const SuiteOptions& o = {}) {
  return SealedSuite::create(dir, label, rms(), seed, o);
}

// Expects `f` to throw a HoldoutError whose message contains `needle`.
template <typename F> void expect_refused(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no HoldoutError; expected one naming \"" << needle << "\"";
  } catch (const HoldoutError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

json read_json(const fs::path& p) {
  return json::parse(read_file(p));
}

// Rewrites a sealed file the way a hand (or a process that reached the holdout folder) would.
void write_json(const fs::path& p, const json& j) {
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  std::ofstream(p, std::ios::trunc) << j.dump();
}

TEST(HoldoutSuiteTest, SameSeedSameSuiteAndOtherSeedsOtherSuites) {
  const auto a = generate_suite(kSeed);
  const auto b = generate_suite(kSeed);
  EXPECT_EQ(a, b);
  EXPECT_EQ(canonical_suite_text(a), canonical_suite_text(b));
  EXPECT_EQ(commitment_for(a, kSeed), commitment_for(b, kSeed));
  ASSERT_EQ(a.size(), 48u);
  std::set<std::string> texts{canonical_suite_text(a)};
  const std::uint64_t others[] = {kSeed + 1, kSeed ^ (std::uint64_t{1} << 63), 0, 1};
  for (std::uint64_t s : others)
    EXPECT_TRUE(texts.insert(canonical_suite_text(generate_suite(s))).second) << "seed " << s;
  // The commitment binds the seed as well as the suite text.
  EXPECT_NE(commitment_for(a, kSeed), commitment_for(a, kSeed + 1));
  EXPECT_EQ(commitment_for(a, kSeed).size(), 64u);
}

TEST(HoldoutSuiteTest, FamiliesAndNamesAreDisjointFromThePublicSuite) {
  std::set<std::string> public_families, public_names;
  for (const CaseSpec& s : rmsnorm::public_cases(kSeed)) {
    public_families.insert(s.family);
    public_names.insert(s.name);
  }
  ASSERT_FALSE(public_families.empty());
  for (std::uint64_t seed : {kSeed, std::uint64_t{7}, std::uint64_t{99}}) {
    std::set<DType> dtypes;
    for (const CaseSpec& s : generate_suite(seed)) {
      EXPECT_EQ(s.family, "holdout") << s.name;
      EXPECT_FALSE(public_families.contains(s.family)) << s.name;
      EXPECT_FALSE(public_names.contains(s.name)) << s.name;
      EXPECT_EQ(s.invalid, rmsnorm::InvalidKind::kNone) << s.name;
      EXPECT_GE(s.h, 1);
      EXPECT_LE(s.h, 20011) << s.name; // the first prime past 20000
      dtypes.insert(s.dtype);
    }
    EXPECT_EQ(dtypes.size(), 3u) << "all three dtypes, seed " << seed;
  }
}

TEST(HoldoutSuiteTest, CasesStayWithinTheirElementCaps) {
  // Defaults: 48 cases, 24M elements; a case is at most max(24M / 48, H) elements (transposed:
  // max(200000, H)), so the suite stays under 24M elements.
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    std::int64_t total = 0;
    for (const CaseSpec& s : generate_suite(seed)) {
      const std::int64_t cap = s.layout == rmsnorm::LayoutKind::kTransposed ? 200'000 : 500'000;
      EXPECT_LE(s.numel(), std::max(cap, s.h)) << s.name << " seed " << seed;
      total += s.numel();
    }
    EXPECT_LE(total, 24'000'000) << "seed " << seed;
  }
  // Smaller options: 12 cases of at most 30000 elements each, the transposed ones at most 200000
  // (their own cap: they materialise an [H, rows] buffer).
  const SuiteOptions small{12, 360'000};
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    const auto suite = generate_suite(seed, small);
    ASSERT_EQ(suite.size(), 12u);
    for (const CaseSpec& s : suite) {
      const std::int64_t cap = s.layout == rmsnorm::LayoutKind::kTransposed ? 200'000 : 30'000;
      EXPECT_LE(s.numel(), std::max(cap, s.h)) << s.name << " seed " << seed;
    }
  }
}

TEST(HoldoutSuiteTest, VerifyCommitmentNeedsTheSeedAndTheOptionsItWasMadeWith) {
  const std::string c = commitment_for(generate_suite(kSeed), kSeed);
  EXPECT_TRUE(verify_commitment(c, kSeed));
  EXPECT_FALSE(verify_commitment(c, kSeed + 1)); // a wrong seed
  EXPECT_FALSE(verify_commitment(c, 0));
  EXPECT_FALSE(verify_commitment(c, kSeed, SuiteOptions{47, 24'000'000})); // other options
  EXPECT_FALSE(verify_commitment(std::string(64, '0'), kSeed));
}

TEST(SealedSuiteTest, SealedFileIsOwnerOnlyAndHoldsNoCaseData) {
  TempDir t("holdout");
  const fs::path dir = t.dir() / "holdout";
  const SealedSuite s = seal(dir, "session-1", kSeed);
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir / "session-1.sealed").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const json body = read_json(dir / "session-1.sealed");
  EXPECT_EQ(body["commitment"], s.commitment());
  EXPECT_EQ(body["suite_version"], std::string(kSuiteVersion));
  EXPECT_FALSE(body.contains("outer")) << body.dump();
  EXPECT_EQ(read_file(dir / "session-1.sealed").find("\"h\""), std::string::npos);
  EXPECT_EQ(s.commitment(), commitment_for(generate_suite(kSeed), kSeed));
  EXPECT_FALSE(s.retired());
}

TEST(SealedSuiteTest, ALabelIsSealedOnceEvenAfterItsRetirement) {
  TempDir t("holdout");
  SealedSuite s = seal(t.dir(), "session-1", kSeed);
  expect_refused([&] { seal(t.dir(), "session-1", kSeed + 1); }, "never re-sealed");
  s.unseal_for_run();
  expect_refused([&] { seal(t.dir(), "session-1", kSeed); }, "never re-sealed");
  // The first seal is untouched by the refusals.
  EXPECT_EQ(read_json(t.dir() / "session-1.retired")["seed"], std::to_string(kSeed));
}

TEST(SealedSuiteTest, UnsealsOnceRetiringFirstAndRevealsTheSeedOnlyAfter) {
  TempDir t("holdout");
  SealedSuite s = seal(t.dir(), "session-1", kSeed, SuiteOptions{12, 360'000});
  expect_refused([&] { s.reveal_seed(); }, "revealed only after its run");
  const auto suite = specs_of(s.unseal_for_run());
  EXPECT_EQ(suite, generate_suite(kSeed, SuiteOptions{12, 360'000}));
  EXPECT_TRUE(s.retired());
  EXPECT_FALSE(fs::exists(t.dir() / "session-1.sealed"));
  EXPECT_TRUE(fs::exists(t.dir() / "session-1.retired"));
  EXPECT_EQ(s.reveal_seed(), kSeed);
  expect_refused([&] { s.unseal_for_run(); }, "is retired; a holdout runs once");
  // Opened again (a resumed session), the retired suite stays retired.
  SealedSuite again = SealedSuite::open(t.dir(), "session-1", s.commitment());
  EXPECT_TRUE(again.retired());
  EXPECT_EQ(again.options().cases, 12);
  expect_refused([&] { again.unseal_for_run(); }, "is retired");
  EXPECT_EQ(again.reveal_seed(), kSeed);
}

TEST(SealedSuiteTest, OpenChecksTheFileAgainstTheRecordedCommitment) {
  TempDir t("holdout");
  const SealedSuite s = seal(t.dir(), "session-1", kSeed);
  EXPECT_EQ(SealedSuite::open(t.dir(), "session-1", s.commitment()).commitment(), s.commitment());
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", std::string(64, 'e')); },
                 "does not carry the commitment the store recorded");
  expect_refused([&] { SealedSuite::open(t.dir(), "session-2", s.commitment()); },
                 "no sealed suite 'session-2'");
}

TEST(SealedSuiteTest, AnAlteredSeedIsRefusedAtUnsealing) {
  TempDir t("holdout");
  const SealedSuite created = seal(t.dir(), "session-1", kSeed);
  const fs::path file = t.dir() / "session-1.sealed";
  json body = read_json(file);
  body["seed"] = std::to_string(kSeed + 1);
  write_json(file, body);
  SealedSuite s = SealedSuite::open(t.dir(), "session-1", created.commitment());
  expect_refused([&] { s.unseal_for_run(); }, "does not match the commitment the store recorded");
  EXPECT_TRUE(s.retired()) << "the attempt still counts as the suite's use";
}

// The hole of issue 23: a file whose seed and commitment were edited together agrees with itself;
// checked against the commitment the store recorded when the session began it is refused, both
// when a resumed session opens it and when an open suite is unsealed after the edit.
TEST(SealedSuiteTest, SeedAndCommitmentEditedTogetherAreRefused) {
  TempDir t("holdout");
  const std::string recorded = seal(t.dir(), "session-1", kSeed).commitment();
  SealedSuite opened = SealedSuite::open(t.dir(), "session-1", recorded);
  const fs::path file = t.dir() / "session-1.sealed";
  json body = read_json(file);
  const std::uint64_t chosen = 42; // a suite the editor knows
  body["seed"] = std::to_string(chosen);
  body["commitment"] = commitment_for(generate_suite(chosen), chosen);
  write_json(file, body);
  EXPECT_TRUE(verify_commitment(body["commitment"].get<std::string>(), chosen))
      << "the edit is self-consistent";
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", recorded); },
                 "does not carry the commitment the store recorded");
  expect_refused([&] { opened.unseal_for_run(); },
                 "does not match the commitment the store recorded");
}

TEST(SealedSuiteTest, AlteredOptionsOrVersionAreRefused) {
  TempDir t("holdout");
  const std::string recorded = seal(t.dir(), "session-1", kSeed).commitment();
  const fs::path file = t.dir() / "session-1.sealed";
  const json original = read_json(file);
  json body = original;
  body["cases"] = 47;
  write_json(file, body);
  SealedSuite s = SealedSuite::open(t.dir(), "session-1", recorded);
  expect_refused([&] { s.unseal_for_run(); }, "does not match the commitment");
  fs::rename(t.dir() / "session-1.retired", file);
  body = original;
  body["suite_version"] = "weighted_rmsnorm-holdout/0";
  write_json(file, body);
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", recorded); },
                 "was sealed with the rules weighted_rmsnorm-holdout/0");
}

TEST(SealedSuiteTest, MalformedFilesAreHoldoutErrorsNamingTheField) {
  TempDir t("holdout");
  const std::string recorded = seal(t.dir(), "session-1", kSeed).commitment();
  const fs::path file = t.dir() / "session-1.sealed";
  const json original = read_json(file);
  const auto refused_at_unseal = [&](json body, const std::string& needle) {
    write_json(file, body);
    SealedSuite s = SealedSuite::open(t.dir(), "session-1", recorded);
    expect_refused([&] { s.unseal_for_run(); }, needle);
    fs::rename(t.dir() / "session-1.retired", file);
  };
  json body = original;
  body.erase("seed");
  refused_at_unseal(body, "field `seed` is missing");
  body = original;
  body["seed"] = "12x";
  refused_at_unseal(body, "field `seed` is not a decimal integer");
  body = original;
  body["seed"] = 12;
  refused_at_unseal(body, "field `seed` is missing or not a string");

  body = original;
  body["cases"] = -3;
  write_json(file, body);
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", recorded); }, "field `cases`");
  body["cases"] = 10'000'000; // would take hours to generate
  write_json(file, body);
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", recorded); }, "field `cases`");
  body = original;
  body.erase("commitment");
  write_json(file, body);
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", recorded); }, "field `commitment`");
  std::ofstream(file, std::ios::trunc) << "{\"seed\": ";
  expect_refused([&] { SealedSuite::open(t.dir(), "session-1", recorded); }, "is corrupt");
}

TEST(HoldoutResultTest, RoundTripsThroughJsonAndNamesABadField) {
  HoldoutResult r;
  r.status = evaluator::GateStatus::kFail;
  r.reason = "case holdout-3 failed";
  r.commitment = std::string(64, 'a');
  r.passed = 47;
  r.failed = 1;
  r.revealed_seed = kSeed;
  r.detail = {{"passed", 47}};
  const HoldoutResult back = HoldoutResult::from_json(r.to_json());
  EXPECT_EQ(back.status, r.status);
  EXPECT_EQ(back.reason, r.reason);
  EXPECT_EQ(back.commitment, r.commitment);
  EXPECT_EQ(back.passed, 47);
  EXPECT_EQ(back.failed, 1);
  EXPECT_EQ(back.revealed_seed, kSeed);
  EXPECT_EQ(back.detail, r.detail);
  json bad = r.to_json();
  bad["revealed_seed"] = "-1";
  expect_refused([&] { HoldoutResult::from_json(bad); }, "`revealed_seed`");
  bad = r.to_json();
  bad["status"] = "great";
  expect_refused([&] { HoldoutResult::from_json(bad); }, "`status`");
}

} // namespace
} // namespace kloop::holdout
