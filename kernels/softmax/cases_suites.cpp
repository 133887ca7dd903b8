// The public, invalid and large suites of row_softmax/1. Case seeds derive from the suite seed and
// the case index, so a suite is reproducible from one number.
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "kernels/softmax/cases.h"

namespace kloop::softmax {

namespace {

// Appends cases named "<name>-<dtype>" with a seed derived from (suite seed, index).
class Suite {
public:
  explicit Suite(std::uint64_t seed) : seed_(seed) {}
  CaseSpec& add(std::string family, const std::string& name, DType dtype,
                std::vector<std::int64_t> outer, std::int64_t n) {
    CaseSpec& s = cases_.emplace_back();
    s.family = std::move(family);
    s.name = fmt::format("{}-{}", name, dtype_name(dtype));
    s.dtype = dtype;
    s.outer = std::move(outer);
    s.n = n;
    s.seed = seed_ * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull * cases_.size();
    return s;
  }
  std::vector<CaseSpec> take() { return std::move(cases_); }

private:
  std::uint64_t seed_;
  std::vector<CaseSpec> cases_;
};

void add_widths(Suite& b, DType d) {
  for (std::int64_t n : {1,    2,    3,    7,    31,   32,   33,   100,   127,   128,  129,
                         255,  256,  257,  511,  512,  513,  1000, 1009,  1023,  1024, 1025,
                         2047, 2048, 2049, 4096, 4099, 8192, 8193, 16384, 32768, 65536}) {
    const std::int64_t rows = n <= 1025 ? 7 : (n <= 8193 ? 4 : (n <= 16384 ? 3 : 2));
    b.add("widths", fmt::format("width-{}", n), d, {rows}, n);
  }
  b.add("widths", "rows-3000x128", d, {3000}, 128);
  b.add("widths", "rows-64x8192", d, {64}, 8192);
  b.add("widths", "rows-600x4096", d, {600}, 4096);
  b.add("widths", "rows-216x96", d, {216}, 96); // several rows per block (CASES.md P15)
  b.add("widths", "rows-1x1152", d, {1}, 1152); // the tail of a vectorised row (P16)
  b.add("widths", "rows-9x3584", d, {9}, 3584); // a multiple of 8, not of 256 (P9)
  b.add("widths", "rows-7x769", d, {7}, 769);   // no multiple of any vector width (P9)
  // More rows than a grid of two 512-thread blocks per SM (264 on 132 SMs) holds at the target
  // width, so blocks take a second row.
  if (d == DType::kBFloat16) b.add("widths", "rows-270x32768", d, {270}, 32768);
}

void add_views(Suite& b, DType d) {
  b.add("empty", "empty-0x4096", d, {0}, 4096);
  b.add("empty", "empty-3x0x4096", d, {3, 0}, 4096);
  b.add("empty", "empty-0x1", d, {0}, 1);
  b.add("empty", "zero-width-3x0", d, {3}, 0); // N = 0: an empty output, as torch.softmax gives
  b.add("views", "3d-2x3x5x129", d, {2, 3, 5}, 129).layout = LayoutKind::k3d;
  b.add("views", "3d-2x4x1009", d, {2, 4}, 1009).layout = LayoutKind::k3d;
  b.add("views", "1d-513", d, {}, 513);
  b.add("views", "1d-32768", d, {}, 32768);
  for (auto [rows, n] :
       {std::pair<std::int64_t, std::int64_t>{4, 2}, {16, 128}, {7, 1009}, {3, 4096}})
    b.add("views", fmt::format("transposed-{}x{}", rows, n), d, {rows}, n).layout =
        LayoutKind::kTransposed;
  b.add("views", "transposed-3d-2x3x129", d, {2, 3}, 129).layout = LayoutKind::kTransposed;
  // Sliced rows: a fused-buffer slice (qkv[:, :2048], CASES.md P7), odd gaps, and gaps that keep
  // the row stride a multiple of 16 bytes (vector paths on strided rows), the last with more rows
  // than any persistent grid has blocks and a width that ends in a partial vector.
  for (auto [rows, n, gap] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 2048, 4096},
                              {5, 129, 3},
                              {3, 1009, 1},
                              {3, 32768, 8},
                              {4500, 1100, 36}}) {
    auto& s = b.add("views", fmt::format("sliced-{}x{}-gap{}", rows, n, gap), d, {rows}, n);
    s.layout = LayoutKind::kSlicedGaps;
    s.gap = gap;
  }
  for (auto [rows, n, off] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 2048, 1},
                              {3, 1009, 3},
                              {6, 4096, 7},
                              {2, 32768, 1}}) {
    auto& s = b.add("views", fmt::format("offset-{}x{}-off{}", rows, n, off), d, {rows}, n);
    s.layout = LayoutKind::kStorageOffset;
    s.offset = off;
  }
  for (auto [rows, n] : {std::pair<std::int64_t, std::int64_t>{3, 2}, {5, 4096}, {4, 129}})
    b.add("views", fmt::format("expanded-{}x{}", rows, n), d, {rows}, n).layout =
        LayoutKind::kExpanded;
}

void add_values(Suite& b, DType d) {
  const ValueFamily families[] = {
      ValueFamily::kLogits,         ValueFamily::kLargePositive,   ValueFamily::kLargeNegative,
      ValueFamily::kNearMax,        ValueFamily::kConstantRows,    ValueFamily::kCausalMask,
      ValueFamily::kNegInfElements, ValueFamily::kAllNegInf,       ValueFamily::kNanInf,
      ValueFamily::kAscending,      ValueFamily::kDescending,      ValueFamily::kOneHot,
      ValueFamily::kSubnormals,     ValueFamily::kMixedMagnitudes, ValueFamily::kHeavyTailed};
  for (ValueFamily f : families)
    for (std::int64_t n : {1, 129, 4096}) {
      auto& s = b.add("values", fmt::format("{}-6x{}", value_family_name(f), n), d, {6}, n);
      s.values = f;
    }
  // The block-per-row width: one row per family that changes the running max or the sum.
  for (ValueFamily f :
       {ValueFamily::kLargePositive, ValueFamily::kConstantRows, ValueFamily::kCausalMask,
        ValueFamily::kNanInf, ValueFamily::kAscending, ValueFamily::kNegInfElements}) {
    auto& s = b.add("values", fmt::format("{}-4x32768", value_family_name(f)), d, {4}, 32768);
    s.values = f;
  }
}

} // namespace

std::vector<CaseSpec> invalid_cases(std::uint64_t seed) {
  Suite b(seed ^ 0x1a7a11dull);
  for (DType d : kAllDTypes)
    for (InvalidKind k : {InvalidKind::kNonStrided, InvalidKind::kScalarX, InvalidKind::kFloat64,
                          InvalidKind::kInt32, InvalidKind::kUnsupportedDevice})
      b.add("invalid", fmt::format("invalid-{}", invalid_kind_name(k)), d, {2}, 16).invalid = k;
  return b.take();
}

std::vector<CaseSpec> public_cases(std::uint64_t seed) {
  Suite b(seed);
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
  Suite b(seed ^ 0x1a26eull);
  // The target shape, and a float32 tensor over 2^31 bytes (byte offsets need 64 bits).
  b.add("large", "target-16384x32768", DType::kBFloat16, {16384}, 32768);
  b.add("large", "bytes-over-2GiB-16385x32768", DType::kFloat32, {16385}, 32768);
  // More than 65535 rows (grid.y / grid.z limits), narrow and transposed.
  for (DType d : kAllDTypes) {
    b.add("large", "rows-70001x128", d, {70001}, 128);
    b.add("large", "rows-200000x1", d, {200000}, 1);
    b.add("large", "rows-65537x1009-transposed", d, {65537}, 1009).layout = LayoutKind::kTransposed;
  }
  // Past 2^31 elements per dtype (2^31 + 32768): element offsets need 64 bits; cheap row values.
  for (DType d : kAllDTypes)
    b.add("large", "elements-past-2e31-65537x32768", d, {65537}, 32768).values =
        ValueFamily::kRowRamp;
  return b.take();
}

} // namespace kloop::softmax
