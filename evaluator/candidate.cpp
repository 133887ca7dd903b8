#include "evaluator/candidate.h"

#include <filesystem>
#include <fstream>

#include <fmt/core.h>

namespace kloop::evaluator {
namespace {

namespace fs = std::filesystem;

// Reads at most `cap` bytes of `path`; std::nullopt when it cannot be opened.
std::optional<std::string> read_capped(const fs::path& path, std::size_t cap) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string s(cap, '\0');
  in.read(s.data(), static_cast<std::streamsize>(cap));
  if (in.bad()) return std::nullopt;
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

// Offset of the first byte that breaks UTF-8, or npos.
std::size_t first_bad_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else
      return i;
    if (i + static_cast<std::size_t>(n) >= s.size()) return i;
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    const std::uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += static_cast<std::size_t>(n) + 1;
  }
  return std::string_view::npos;
}

void check_text(const std::string& field, std::string_view text, std::uintmax_t file_bytes,
                std::size_t limit, std::vector<op::ManifestError>& out) {
  if (file_bytes > limit) {
    out.push_back({field, fmt::format("{} is {} bytes; the limit is {} bytes ({} KiB): shorten it",
                                      field, file_bytes, limit, limit / 1024)});
    return;
  }
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    out.push_back({field, fmt::format("{} contains a NUL byte at offset {}; send plain UTF-8 text",
                                      field, nul)});
    return;
  }
  if (auto bad = first_bad_utf8(text); bad != std::string_view::npos)
    out.push_back({field, fmt::format("{} is not valid UTF-8 (first bad byte at offset {}); send "
                                      "plain UTF-8 text",
                                      field, bad)});
}

} // namespace

bool is_valid_utf8(std::string_view bytes) {
  return first_bad_utf8(bytes) == std::string_view::npos;
}

CandidateLoad load_candidate_dir(const std::string& dir) {
  CandidateLoad out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    out.error = fmt::format("candidate directory '{}' does not exist or is not a directory; pass "
                            "a folder holding kernel.cu and manifest.json",
                            dir);
    return out;
  }
  Candidate c;
  struct File {
    const char* name;
    std::size_t cap;
    std::string* text;
    std::uintmax_t* size;
  };
  for (const File& f : {File{"kernel.cu", op::kMaxSourceBytes + 1, &c.source, &c.source_file_bytes},
                        File{"manifest.json", op::kMaxManifestBytes + 1, &c.manifest_text,
                             &c.manifest_file_bytes}}) {
    const fs::path p = fs::path(dir) / f.name;
    auto text = fs::is_regular_file(p, ec) ? read_capped(p, f.cap) : std::nullopt;
    if (!text) {
      out.error = fmt::format("cannot read {}: the candidate directory must hold readable files "
                              "kernel.cu and manifest.json",
                              p.string());
      return out;
    }
    *f.text = std::move(*text);
    *f.size = fs::file_size(p, ec);
    if (ec) *f.size = f.text->size();
  }
  out.candidate = std::move(c);
  return out;
}

std::vector<op::ManifestError> check_candidate_bytes(const Candidate& candidate) {
  std::vector<op::ManifestError> out;
  check_text("kernel.cu", candidate.source,
             std::max<std::uintmax_t>(candidate.source_file_bytes, candidate.source.size()),
             op::kMaxSourceBytes, out);
  check_text(
      "manifest.json", candidate.manifest_text,
      std::max<std::uintmax_t>(candidate.manifest_file_bytes, candidate.manifest_text.size()),
      op::kMaxManifestBytes, out);
  return out;
}

} // namespace kloop::evaluator
