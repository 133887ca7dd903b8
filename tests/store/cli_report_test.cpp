// The store CLI (app/cmd_store.cpp, via the store_cli test executable) end to end, and the HTML
// report rendered in headless Chromium: screenshot is a non-blank PNG, the DOM holds the charts.
// Chromium tests skip (GTEST_SKIP) when `chromium` is not installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "store/store.h"
#include "tests/store/fixture.h"

namespace kloop::store {
namespace {

using testing::TempDir;

struct Proc {
  int rc = -1;
  std::string out;
};

Proc sh(const std::string& cmd) {
  Proc r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string bin(const char* name) {
  return std::string(KLOOP_BINARY_DIR) + "/bin/" + name;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(StoreCliTest, SessionsShowCompareVerifyAndReceiptRoundTrip) {
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const std::string cli = bin("store_cli") + " ";
  const Proc list = sh(cli + "sessions --store " + s);
  EXPECT_EQ(list.rc, 0) << list.out;
  EXPECT_NE(list.out.find("offline/builtin-v1"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("1.50x"), std::string::npos) << list.out;
  const Proc show = sh(cli + "show 1 --json --store " + s);
  ASSERT_EQ(show.rc, 0) << show.out;
  const auto j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["iterations"].size(), 3u);
  EXPECT_EQ(j["promotion"]["decision"], "promoted");
  // The text view numbers iterations from 1, as `kloop optimize` prints them ([1/3] .. [3/3]);
  // the JSON keeps the store's 0-based index.
  const Proc text = sh(cli + "show 1 --store " + s);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("\niteration 1 ("), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\niteration 3 ("), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("\niteration 0 ("), std::string::npos) << text.out;
  EXPECT_EQ(j["iterations"][0]["index"], 0);
  const Proc cmp = sh(cli + "compare 1 --json --store " + s);
  ASSERT_EQ(cmp.rc, 0) << cmp.out;
  EXPECT_EQ(nlohmann::json::parse(cmp.out)["groups"][0]["sessions"][0]["iterations_to_first_pass"],
            3);
  EXPECT_EQ(sh(cli + "store verify --store " + s).rc, 0);
  EXPECT_EQ(sh(cli + "show 9 --store " + s).rc, 2); // unknown id: a usage error, clearly named
  // With --json the error is also one JSON document on stdout (stderr is dropped here).
  const Proc missing = sh("(" + cli + "show 9 --json --store " + s + " 2>/dev/null)");
  EXPECT_EQ(missing.rc, 2);
  const auto err = nlohmann::json::parse(missing.out, nullptr, false);
  ASSERT_TRUE(err.is_object()) << missing.out;
  EXPECT_NE(err.value("error", std::string()).find("no session 9"), std::string::npos)
      << missing.out;
  EXPECT_EQ(err.value("exit_code", 0), 2);
  // An ID beyond int64 is refused as typed (CLI11 alone would clamp it to INT64_MAX).
  const Proc huge = sh(cli + "show 99999999999999999999 --store " + s);
  EXPECT_EQ(huge.rc, 2);
  EXPECT_NE(huge.out.find("got '99999999999999999999'"), std::string::npos) << huge.out;
  EXPECT_EQ(huge.out.find("9223372036854775807 in"), std::string::npos) << huge.out;
  EXPECT_EQ(sh(cli + "compare 1 0 --store " + s).rc, 2);
  // A leading zero is refused, not read as octal (010 would be session 8).
  const Proc octal = sh(cli + "show 010 --store " + s);
  EXPECT_EQ(octal.rc, 2);
  EXPECT_NE(octal.out.find("got '010'"), std::string::npos) << octal.out;
  // Usage errors with --json also give the JSON document on stdout.
  const Proc usage = sh("(" + cli + "show abc --json --store " + s + " 2>/dev/null)");
  EXPECT_EQ(usage.rc, 2);
  const auto uerr = nlohmann::json::parse(usage.out, nullptr, false);
  ASSERT_TRUE(uerr.is_object()) << usage.out;
  EXPECT_NE(uerr.value("error", std::string()).find("got 'abc'"), std::string::npos) << usage.out;
  // A message with bytes that are not UTF-8 (here the store path) still gives valid JSON.
  const Proc non_utf8 = sh("(" + cli + "show 1 --json --store \"$(printf '" + t.path() +
                           "/bad\\377dir')\" 2>/dev/null)");
  EXPECT_EQ(non_utf8.rc, 3) << non_utf8.out;
  EXPECT_TRUE(nlohmann::json::parse(non_utf8.out, nullptr, false).is_object()) << non_utf8.out;
  // Receipt: generate a key, sign, verify; a tampered receipt fails with exit 1.
  const Proc gen = sh(cli + "keys generate --out " + t.path() + "/key.json");
  ASSERT_EQ(gen.rc, 0) << gen.out;
  const auto key = nlohmann::json::parse(read(t.path() + "/key.json"));
  std::ofstream(t.path() + "/reg.json") << nlohmann::json{{key["key_id"], key["public_key"]}};
  ASSERT_EQ(sh(cli + "receipt sign 1 --key " + t.path() + "/key.json --reviewer bob --out " +
               t.path() + "/r.json --store " + s)
                .rc,
            0);
  const Proc ok =
      sh(cli + "receipt verify " + t.path() + "/r.json --keys " + t.path() + "/reg.json");
  EXPECT_EQ(ok.rc, 0) << ok.out;
  auto r = nlohmann::json::parse(read(t.path() + "/r.json"));
  r["payload"]["approval_identity"]["reviewer"] = "mallory";
  std::ofstream(t.path() + "/bad.json") << r.dump();
  const Proc bad =
      sh(cli + "receipt verify " + t.path() + "/bad.json --keys " + t.path() + "/reg.json");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("payload hash mismatch"), std::string::npos) << bad.out;
  // A damaged blob makes `store verify` exit 1 and name it.
  const std::string src = j["iterations"][0]["candidates"][0]["source_sha256"];
  std::filesystem::remove(s + "/blobs/" + src.substr(0, 2) + "/" + src.substr(2));
  const Proc ver = sh(cli + "store verify --store " + s);
  EXPECT_EQ(ver.rc, 1);
  EXPECT_NE(ver.out.find("missing blob " + src), std::string::npos) << ver.out;
}

// Inflates the IDAT stream of a PNG; returns the number of distinct byte values (a blank page
// gives only a handful: filter bytes and one colour).
int png_distinct_bytes(const std::string& png) {
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return -1;
  std::string idat;
  for (std::size_t p = 8; p + 8 <= png.size();) {
    const auto u = [&](std::size_t i) { return static_cast<unsigned char>(png[i]); };
    const std::size_t len = (u(p) << 24) | (u(p + 1) << 16) | (u(p + 2) << 8) | u(p + 3);
    if (png.compare(p + 4, 4, "IDAT") == 0) idat += png.substr(p + 8, len);
    p += 12 + len;
  }
  std::string raw(64u << 20, '\0');
  uLongf raw_len = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_len,
                 reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK)
    return -2;
  std::set<unsigned char> seen(raw.begin(), raw.begin() + static_cast<long>(raw_len));
  return static_cast<int>(seen.size());
}

Proc chromium(const std::string& args) {
  return sh("chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
            "--disable-background-networking --disable-component-update --disable-sync "
            "--user-data-dir=$(mktemp -d) " +
            args);
}

TEST(StoreReportTest, HtmlReportRendersChartsInHeadlessChromium) {
  if (sh("command -v chromium").rc != 0)
    GTEST_SKIP() << "chromium is not installed (Debian package `chromium`); report not rendered";
  TempDir t;
  const std::string s = t.path() + "/s";
  ASSERT_EQ(sh(bin("store_fake_session_driver") + " " + s + " 3 --finish").rc, 0);
  const std::string html = t.path() + "/report.html";
  ASSERT_EQ(sh(bin("store_cli") + " report 1 --html " + html + " --store " + s).rc, 0);
  const std::string page = read(html);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  const Proc dom = chromium("--dump-dom file://" + html);
  ASSERT_EQ(dom.rc, 0) << dom.out;
  for (const char* id : {"timeline", "gates", "roofline", "speedup", "stalls"})
    EXPECT_NE(dom.out.find(std::string("<svg id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(dom.out.find("class=\"speedup-point\""), std::string::npos);
  EXPECT_NE(dom.out.find("class=\"gate fail\""), std::string::npos);
  const std::string shot = t.path() + "/shot.png";
  const Proc sc = chromium("--screenshot=" + shot + " --window-size=1200,1600 file://" + html);
  ASSERT_EQ(sc.rc, 0) << sc.out;
  EXPECT_GT(png_distinct_bytes(read(shot)), 32);
}

TEST(StoreReportTest, SessionWithoutDeviceDataSaysSoInsteadOfCharts) {
  TempDir t;
  const std::string s = t.path() + "/s";
  {
    Store st = Store::open(s);
    SessionRecord rec{.operator_name = "weighted_rmsnorm", .provider = "offline", .budget = 1};
    st.create_session(rec);
    auto step = st.begin_step();
    IterationRecord it{.session_id = rec.id, .index = 0, .wall_ms = 50};
    step.add_iteration(it);
    CandidateRecord c{.iteration_id = it.id,
                      .source_sha256 = step.put_blob("k"),
                      .verdict = VerdictCode::kPendingDeviceValidation};
    step.add_candidate(c);
    GateRecord g{.candidate_id = c.id,
                 .name = "benchmark",
                 .status = GateCode::kNotRun,
                 .reason = "no device"};
    step.add_gate(g);
    step.commit();
    st.finish_session(rec.id, SessionStatus::kCompleted, VerdictCode::kPendingDeviceValidation);
  }
  const std::string html = t.path() + "/report.html";
  ASSERT_EQ(sh(bin("store_cli") + " report 1 --html " + html + " --store " + s).rc, 0);
  const std::string page = read(html);
  EXPECT_NE(page.find("no benchmark data (not run: no device)"), std::string::npos);
  EXPECT_NE(page.find("id=\"roofline-missing\""), std::string::npos);
  EXPECT_NE(page.find("id=\"stalls-missing\""), std::string::npos);
  EXPECT_NE(page.find("<svg id=\"gates\""), std::string::npos);
  // Iterations are numbered from 1, as `kloop optimize` prints them (stored index 0).
  EXPECT_NE(page.find("<title>iteration 1 ("), std::string::npos);
  EXPECT_NE(page.find(">iter 1 cand 1</text>"), std::string::npos);
  EXPECT_EQ(page.find("<title>iteration 0 ("), std::string::npos);
}

} // namespace
} // namespace kloop::store
