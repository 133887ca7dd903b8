// `kloop report --html` as a reader sees it (issue 22 item 12): the page of real sessions (one
// pending device validation, as a CPU-only machine ends it, and one rejected) is rendered in
// headless Chromium, and the test looks at the rendered pixels: each iteration bar, gate cell and
// legend swatch has the colour of its outcome, a pending iteration is never drawn in the colour
// of a rejection, the outcome colours differ from each other, and the timeline has a time axis
// with tick labels. Element positions come from the same page rendered with a probe script added
// (getBoundingClientRect after layout, read back with --dump-dom); the colours from a screenshot of
// the page as kloop wrote it, at the same window size.
#include <zlib.h>

#include <array>
#include <cstdio>
#include <optional>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/e2e_support.h"

namespace kloop::e2e {
namespace {

struct Proc {
  int rc = -1;
  std::string out;
};

Proc sh(const std::string& cmd) {
  Proc r;
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return r;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

constexpr const char* kWindow = "--window-size=1200,2400";

Proc chromium(const std::string& args, const fs::path& profile) {
  fs::remove_all(profile);
  fs::create_directories(profile);
  return sh("chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
            "--disable-background-networking --disable-component-update --disable-sync "
            "--force-device-scale-factor=1 --hide-scrollbars " +
            std::string(kWindow) + " --user-data-dir=" + profile.string() + " " + args);
}

// An 8-bit RGB or RGBA PNG (what Chromium writes), decoded: filters undone, alpha dropped.
struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb; // width * height * 3
  std::array<int, 3> at(int x, int y) const {
    const std::size_t i = (static_cast<std::size_t>(y) * width + x) * 3;
    return {rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

std::optional<Image> decode_png(const std::string& png) {
  if (png.size() < 33 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return std::nullopt;
  const auto u32 = [&](std::size_t i) {
    return (std::uint32_t(static_cast<unsigned char>(png[i])) << 24) |
           (std::uint32_t(static_cast<unsigned char>(png[i + 1])) << 16) |
           (std::uint32_t(static_cast<unsigned char>(png[i + 2])) << 8) |
           std::uint32_t(static_cast<unsigned char>(png[i + 3]));
  };
  Image img;
  img.width = static_cast<int>(u32(16));
  img.height = static_cast<int>(u32(20));
  const int depth = static_cast<unsigned char>(png[24]), type = static_cast<unsigned char>(png[25]);
  if (depth != 8 || (type != 2 && type != 6) || png[28] != 0) return std::nullopt; // no interlace
  const int channels = type == 6 ? 4 : 3;
  std::string idat;
  for (std::size_t p = 8; p + 8 <= png.size();) {
    const std::size_t len = u32(p);
    if (png.compare(p + 4, 4, "IDAT") == 0) idat += png.substr(p + 8, len);
    p += 12 + len;
  }
  const std::size_t stride = static_cast<std::size_t>(img.width) * channels;
  std::vector<unsigned char> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size())
    return std::nullopt;
  std::vector<unsigned char> px(stride * img.height), prev(stride, 0);
  for (int y = 0; y < img.height; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* in = &raw[y * (stride + 1) + 1];
    unsigned char* out = &px[y * stride];
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<std::size_t>(channels) ? out[i - channels] : 0;
      const int b = prev[i];
      const int c = i >= static_cast<std::size_t>(channels) ? prev[i - channels] : 0;
      int pred = 0;
      switch (filter) {
      case 1:
        pred = a;
        break;
      case 2:
        pred = b;
        break;
      case 3:
        pred = (a + b) / 2;
        break;
      case 4: {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
        break;
      }
      default:
        break;
      }
      out[i] = static_cast<unsigned char>(in[i] + pred);
    }
    std::copy(out, out + stride, prev.begin());
  }
  img.rgb.reserve(static_cast<std::size_t>(img.width) * img.height * 3);
  for (std::size_t i = 0; i < px.size(); i += channels)
    img.rgb.insert(img.rgb.end(), {px[i], px[i + 1], px[i + 2]});
  return img;
}

std::array<int, 3> hex_colour(const std::string& hex) {
  const auto v = std::stoul(hex.substr(1), nullptr, 16);
  return {static_cast<int>(v >> 16) & 255, static_cast<int>(v >> 8) & 255,
          static_cast<int>(v) & 255};
}

// The colour each outcome must be drawn in (the report's legend says which is which).
const std::map<std::string, std::string> kColours = {
    {"pass", "#2e7d32"},    {"fail", "#c62828"},         {"timeout", "#ef6c00"},
    {"crashed", "#6a1b9a"}, {"infra_error", "#1565c0"},  {"not_run", "#bdbdbd"},
    {"pending", "#fbc02d"}, {"no_candidate", "#5d4037"}, {"absent", "#f0f0f0"}};

// One laid-out element of interest: its kind ("iteration", "gate", "swatch", "tick"), outcome
// class and box centre.
struct Box {
  std::string kind, outcome, text;
  double x = 0, y = 0, w = 0, h = 0;
};

const char* kProbe = R"(<script>
const boxes = [];
for (const el of document.querySelectorAll('rect.iteration, rect.gate, rect.swatch, text.tick')) {
  const r = el.getBoundingClientRect();
  const cls = el.getAttribute('class').split(' ');
  boxes.push({kind: cls[0], outcome: cls[1] || '', text: el.textContent,
              x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height});
}
document.body.setAttribute('data-boxes', JSON.stringify(boxes));
</script>)";

std::vector<Box> laid_out_boxes(const fs::path& html, const fs::path& work) {
  std::string page = read_file(html);
  page.insert(page.rfind("</body>"), kProbe);
  const fs::path probe = work / "probe.html";
  write_file(probe, page);
  const Proc dom = chromium("--dump-dom file://" + probe.string(), work / "profile-dom");
  // A plain search: std::regex recurses once per character of the match and overflows the stack
  // under ASan on a long attribute.
  const std::string key = "data-boxes=\"";
  const std::size_t at = dom.out.find(key);
  if (at == std::string::npos) return {};
  const std::size_t end = dom.out.find('"', at + key.size());
  if (end == std::string::npos) return {};
  std::string text = dom.out.substr(at + key.size(), end - at - key.size());
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&quot;", "\""},
                                 {"&lt;", "<"},
                                 {"&gt;", ">"},
                                 {"&amp;", "&"}})
    for (std::size_t p; (p = text.find(from)) != std::string::npos;)
      text.replace(p, from.size(), to);
  std::vector<Box> out;
  for (const auto& b : json::parse(text))
    out.push_back({b["kind"], b["outcome"], b["text"], b["x"], b["y"], b["w"], b["h"]});
  return out;
}

TEST(ReportRenderE2E, OutcomeColoursLegendAndTimeAxisAsRendered) {
  if (sh("command -v chromium").rc != 0)
    GTEST_SKIP() << "chromium is not installed (Debian package `chromium`, scripts/bootstrap.sh "
                    "installs it); the report is not rendered here";
  const fs::path dir = fresh_dir("render");
  const fs::path store = dir / "store";
  // Session 1: the offline main job without a GPU (pending device validation, unless a device is
  // here); session 2: a provider whose replies fail the format gate (rejected).
  const auto pending =
      kloop_run({"optimize", "rmsnorm", "--budget", "2", "--store", store.string()});
  FakeOpenAi server({completion_body("a reply without code")});
  const auto rejected = kloop_run({"optimize", "rmsnorm", "--provider", "openai", "--base-url",
                                   server.base_url(), "--budget", "2", "--store", store.string()});
  ASSERT_EQ(rejected.exit_code, 1) << rejected.stdout_text << rejected.stderr_text;
  const bool cpu_only = pending.exit_code == 3;
  std::set<std::string> seen_outcomes;
  std::map<std::string, std::array<int, 3>> drawn; // outcome -> a pixel drawn for it
  for (const std::string id : {"1", "2"}) {
    const fs::path html = dir / ("report" + id + ".html");
    const auto rep = kloop_run({"report", id, "--html", html.string(), "--store", store.string()});
    ASSERT_EQ(rep.exit_code, 0) << rep.stderr_text;
    const std::vector<Box> boxes = laid_out_boxes(html, dir);
    ASSERT_FALSE(boxes.empty()) << "the probe found no chart elements in report " << id;
    const fs::path shot = dir / ("shot" + id + ".png");
    const Proc sc = chromium("--screenshot=" + shot.string() + " file://" + html.string(),
                             dir / "profile-shot");
    const auto img = decode_png(read_file(shot));
    ASSERT_TRUE(img) << "screenshot " << shot << " did not decode";
    int iterations = 0, swatches = 0, cells = 0;
    std::vector<std::string> ticks;
    for (const auto& b : boxes) {
      if (b.kind == "tick") {
        if (b.w > 0) ticks.push_back(b.text);
        continue;
      }
      if (b.w < 4 || b.h < 4 || b.x >= img->width || b.y >= img->height) continue;
      ASSERT_TRUE(kColours.count(b.outcome)) << b.kind << " with outcome '" << b.outcome << "'";
      const auto px = img->at(static_cast<int>(b.x), static_cast<int>(b.y));
      EXPECT_EQ(px, hex_colour(kColours.at(b.outcome)))
          << "report " << id << ": " << b.kind << " " << b.outcome << " at (" << b.x << ", " << b.y
          << ") is drawn rgb(" << px[0] << "," << px[1] << "," << px[2] << ")";
      drawn[b.outcome] = px;
      seen_outcomes.insert(b.outcome);
      iterations += b.kind == "iteration";
      swatches += b.kind == "swatch";
      cells += b.kind == "gate";
      if (id == "1" && cpu_only && b.kind == "iteration") {
        EXPECT_EQ(b.outcome, "pending") << "a session waiting for a device is not a rejection";
      }
    }
    EXPECT_EQ(iterations, 2) << "report " << id;
    EXPECT_GE(swatches, 10) << "report " << id << ": the timeline and gate legends";
    EXPECT_GT(cells, 0) << "report " << id;
    EXPECT_GE(ticks.size(), 3u) << "report " << id << ": the timeline's time axis";
    if (!ticks.empty()) {
      EXPECT_EQ(ticks.front(), "0 s");
    }
  }
  if (cpu_only) {
    EXPECT_TRUE(seen_outcomes.count("pending"));
    EXPECT_TRUE(seen_outcomes.count("not_run"));
  }
  EXPECT_TRUE(seen_outcomes.count("fail"));
  // Every outcome drawn has its own colour.
  std::set<std::array<int, 3>> distinct;
  for (const auto& [outcome, px] : drawn)
    distinct.insert(px);
  EXPECT_EQ(distinct.size(), drawn.size());
  fs::remove_all(dir);
}

} // namespace
} // namespace kloop::e2e
