// The public, CASES.md, invalid and large suites of weighted_rmsnorm/1. Seeds of individual cases
// derive from the suite seed and the case index, so a suite is reproducible from one number.
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "kernels/rmsnorm/cases.h"

namespace kloop::rmsnorm {

namespace {

// Appends cases with a seed derived from (suite seed, index).
class Builder {
public:
  explicit Builder(std::uint64_t seed) : seed_(seed) {}
  CaseSpec& add(std::string family, std::string name, DType dtype, std::vector<std::int64_t> outer,
                std::int64_t h) {
    CaseSpec s;
    s.family = std::move(family);
    s.name = fmt::format("{}-{}", name, dtype_name(dtype));
    s.dtype = dtype;
    s.outer = std::move(outer);
    s.h = h;
    s.seed = seed_ * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull * (cases_.size() + 1);
    cases_.push_back(std::move(s));
    return cases_.back();
  }
  std::vector<CaseSpec> take() { return std::move(cases_); }

private:
  std::uint64_t seed_;
  std::vector<CaseSpec> cases_;
};

void add_cases_md(Builder& b) {
  using D = DType;
  // P5: tiny row, eps 1.0 (zeros pass atol 1e-6; the row check rejects them).
  for (DType d : kAllDTypes) {
    auto& p5 = b.add("cases_md", "P5-tiny-row-eps1", d, {1}, 2);
    p5.values = ValueFamily::kTinyRow;
    p5.eps = EpsScalar::of(1.0);
  }
  // P7: qkv = randn(4, 6144); x = qkv[:, :2048].view(4, 16, 128), bf16.
  auto& p7 = b.add("cases_md", "P7-fused-slice", D::kBFloat16, {4, 16}, 128);
  p7.layout = LayoutKind::kSlicedGaps;
  p7.gap = 4096;
  // P8: x = buf[1:].view(4, 2048), fp16, offsets on weight too.
  auto& p8 = b.add("cases_md", "P8-offset", D::kFloat16, {4}, 2048);
  p8.layout = LayoutKind::kStorageOffset;
  p8.offset = 1;
  p8.weight_offset = 1;
  // P9: widths that are not multiples of a vector width.
  b.add("cases_md", "P9-7x769", D::kFloat16, {7}, 769);
  b.add("cases_md", "P9-2x3584", D::kBFloat16, {2}, 3584);
  b.add("cases_md", "P9-2x4097", D::kFloat32, {2}, 4097);
  // P10: empty outer dimension.
  b.add("cases_md", "P10-0x4096", D::kBFloat16, {0}, 4096);
  b.add("cases_md", "P10-3x0x4096", D::kBFloat16, {3, 0}, 4096);
  // P11: fp16 all 300.0, weight 1: y == 1.0 (fp32 accumulation).
  auto& p11 = b.add("cases_md", "P11-fp16-300", D::kFloat16, {1}, 4096);
  p11.values = ValueFamily::kConstant300;
  p11.weight = WeightFamily::kOnes;
  // P12: a zero row and a 1e-3 row with eps 1e-6, 1e-5, 1e-12.
  for (double eps : {1e-6, 1e-5, 1e-12}) {
    auto& p12 =
        b.add("cases_md", fmt::format("P12-zero-and-1e-3-eps{}", eps), D::kFloat32, {2}, 8192);
    p12.values = ValueFamily::kZeroAndSmallRow;
    p12.eps = EpsScalar::of(eps);
  }
  // P15: several rows per block.
  b.add("cases_md", "P15-216x96", D::kFloat32, {216}, 96);
  // P16: tail of a vectorised bf16 row.
  b.add("cases_md", "P16-1x1152", D::kBFloat16, {1}, 1152);
}

void add_widths(Builder& b, DType d) {
  for (std::int64_t h : {1, 2, 127, 128, 129, 511, 512, 513, 1009, 4096, 4099, 8192, 16384}) {
    const std::int64_t rows = h <= 1009 ? 7 : (h <= 8192 ? 4 : 2);
    b.add("widths", fmt::format("width-{}", h), d, {rows}, h);
  }
  b.add("widths", "width-65536", d, {2}, 65536);
  b.add("widths", "rows-64x8192", d, {64}, 8192);
  b.add("widths", "rows-3000x128", d, {3000}, 128);
}

void add_views(Builder& b, DType d) {
  b.add("empty", "empty-0x4096", d, {0}, 4096);
  b.add("empty", "empty-3x0x4096", d, {3, 0}, 4096);
  b.add("empty", "empty-0x1", d, {0}, 1);
  b.add("views", "3d-2x3x5x129", d, {2, 3, 5}, 129).layout = LayoutKind::k3d;
  b.add("views", "3d-2x4x1009", d, {2, 4}, 1009).layout = LayoutKind::k3d;
  b.add("views", "1d-513", d, {}, 513);
  for (auto [rows, h] :
       {std::pair<std::int64_t, std::int64_t>{4, 2}, {16, 128}, {7, 1009}, {3, 4096}}) {
    b.add("views", fmt::format("transposed-{}x{}", rows, h), d, {rows}, h).layout =
        LayoutKind::kTransposed;
  }
  {
    auto& s = b.add("views", "transposed-3d-2x3x129", d, {2, 3}, 129);
    s.layout = LayoutKind::kTransposed;
  }
  for (auto [rows, h, gap] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 2048, 4096},
                              {5, 129, 3},
                              {3, 1009, 1}}) {
    auto& s = b.add("views", fmt::format("sliced-{}x{}-gap{}", rows, h, gap), d, {rows}, h);
    s.layout = LayoutKind::kSlicedGaps;
    s.gap = gap;
  }
  // More rows than any persistent grid has blocks (an sm_90 GPU holds at most 132 SMs x 32
  // blocks = 4224), so every block of a persistent kernel handles a second row; a gap that keeps
  // the row stride a multiple of 16 bytes (1136 elements), so vectorised paths run on strided rows;
  // 2.2-4.4 KiB rows that are no power of two (16-bit rows end in a partial 16-byte vector); eps
  // 1, so a row whose eps, width or stride is taken from the wrong place fails (checker coverage:
  // the baseline's second row of a pair, stride-as-width#4 / eps-hardcode#2 / hardcode-width#3,
  // survived every smaller case).
  {
    auto& s = b.add("views", "rows-4500x1100-gap36-eps1", d, {4500}, 1100);
    s.layout = LayoutKind::kSlicedGaps;
    s.gap = 36;
    s.eps = EpsScalar::of(1.0);
  }
  for (auto [rows, h, off] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 2048, 1},
                              {3, 1009, 3},
                              {6, 4096, 7}}) {
    auto& s = b.add("views", fmt::format("offset-{}x{}-off{}", rows, h, off), d, {rows}, h);
    s.layout = LayoutKind::kStorageOffset;
    s.offset = off;
    s.weight_offset = off % 2;
  }
  for (auto [rows, h] : {std::pair<std::int64_t, std::int64_t>{3, 2}, {5, 4096}, {4, 129}}) {
    b.add("views", fmt::format("expanded-{}x{}", rows, h), d, {rows}, h).layout =
        LayoutKind::kExpanded;
  }
}

void add_values(Builder& b, DType d) {
  const ValueFamily families[] = {ValueFamily::kZeros,           ValueFamily::kSubnormals,
                                  ValueFamily::kMixedMagnitudes, ValueFamily::kBig1e19,
                                  ValueFamily::kBig2e19,         ValueFamily::kNanInf,
                                  ValueFamily::kConstantRows,    ValueFamily::kHeavyTailed};
  for (ValueFamily f : families) {
    // float16 cannot hold 1e19: those families are float32/bfloat16 only.
    const bool big = f == ValueFamily::kBig1e19 || f == ValueFamily::kBig2e19;
    if (big && d == DType::kFloat16) continue;
    for (std::int64_t h : {129, 4096}) {
      auto& s = b.add("values", fmt::format("{}-6x{}", value_family_name(f), h), d, {6}, h);
      s.values = f;
    }
  }
  for (double eps : {1e-6, 1e-5, 1e-12, 1.0}) {
    b.add("eps", fmt::format("eps-{}-4x512", eps), d, {4}, 512).eps = EpsScalar::of(eps);
    auto& s = b.add("eps", fmt::format("eps-{}-subnormals-4x512", eps), d, {4}, 512);
    s.values = ValueFamily::kSubnormals;
    s.eps = EpsScalar::of(eps);
  }
  b.add("eps", "eps-int-1-4x512", d, {4}, 512).eps = EpsScalar::integer(1);
}

} // namespace

std::vector<CaseSpec> cases_md_cases() {
  Builder b(0x5eed);
  add_cases_md(b);
  return b.take();
}

std::vector<CaseSpec> invalid_cases(std::uint64_t seed) {
  Builder b(seed ^ 0x1a7a11dull);
  const InvalidKind kinds[] = {
      InvalidKind::kWeightShape,     InvalidKind::kDtypeMismatch, InvalidKind::kUnsupportedDtype,
      InvalidKind::kDeviceMismatch,  InvalidKind::kNonStrided,    InvalidKind::kZeroWidth,
      InvalidKind::kScalarX,         InvalidKind::kEpsZero,       InvalidKind::kEpsNegative,
      InvalidKind::kEpsNan,          InvalidKind::kEpsInf,        InvalidKind::kEpsUnderflowFp32,
      InvalidKind::kEpsOverflowFp32, InvalidKind::kEpsBool,       InvalidKind::kEpsHugeInt};
  for (DType d : kAllDTypes) {
    for (InvalidKind k : kinds) {
      const std::int64_t h = k == InvalidKind::kZeroWidth ? 0 : 16;
      auto& s = b.add("invalid", fmt::format("invalid-{}", invalid_kind_name(k)), d, {2}, h);
      s.invalid = k;
    }
  }
  return b.take();
}

std::vector<CaseSpec> public_cases(std::uint64_t seed) {
  Builder b(seed);
  add_cases_md(b);
  for (DType d : kAllDTypes) {
    add_widths(b, d);
    add_views(b, d);
    add_values(b, d);
  }
  auto cases = b.take();
  for (auto& s : invalid_cases(seed))
    cases.push_back(std::move(s));
  return cases;
}

std::vector<CaseSpec> large_cases(std::uint64_t seed) {
  Builder b(seed ^ 0x1a26eull);
  // Over 2^31 bytes per tensor (offsets need 64-bit arithmetic).
  b.add("large", "bytes-over-2GiB-131073x4096", DType::kFloat32, {131073}, 4096);
  b.add("large", "bytes-over-2GiB-262145x4096", DType::kFloat16, {262145}, 4096);
  b.add("large", "bytes-over-2GiB-140000x8192", DType::kBFloat16, {140000}, 8192);
  // More than 65535 rows (grid.y / grid.z limits).
  for (DType d : kAllDTypes) {
    b.add("large", "rows-70001x128", d, {70001}, 128);
    b.add("large", "rows-200000x1", d, {200000}, 1);
    auto& s = b.add("large", "rows-65537x1009-transposed", d, {65537}, 1009);
    s.layout = LayoutKind::kTransposed;
  }
  return b.take();
}

} // namespace kloop::rmsnorm
