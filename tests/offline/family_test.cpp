// Unit tests of the offline kernel family: determinism, names, validation, and that every curated
// variant's manifest parses against its source and states the variant's launch and dispatch.
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/manifest.h"

namespace kloop::rmsnorm {
namespace {

TEST(OfflineFamily, GenerationIsDeterministicAndVariantsDiffer) {
  std::set<std::string> sources;
  for (const auto& v : all_variants()) {
    const GeneratedCandidate a = generate(v);
    const GeneratedCandidate b = generate(v);
    EXPECT_EQ(a.kernel_cu, b.kernel_cu) << a.name;
    EXPECT_EQ(a.manifest_json, b.manifest_json) << a.name;
    sources.insert(a.kernel_cu);
  }
  EXPECT_EQ(sources.size(), all_variants().size());
}

TEST(OfflineFamily, NamesRoundTripAndRejectNonCanonicalText) {
  for (const auto& v : all_variants()) {
    auto back = variant_by_name(variant_name(v));
    ASSERT_TRUE(back.has_value()) << variant_name(v);
    EXPECT_EQ(*back, v);
  }
  EXPECT_FALSE(variant_by_name("v16-t032-b256-c4-shfl-rows-peel"));     // not canonical
  EXPECT_FALSE(variant_by_name("v16-t3-b256-c4-shfl-rows-peel"));       // 3 is not a power of two
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c4-shfl-rows-peel"));    // run-time tpr needs pers
  EXPECT_FALSE(variant_by_name("v0-t32-b256-c0-shfl-rows-peel"));       // scalar cannot peel
  EXPECT_FALSE(variant_by_name("v16-t32-b256-c4-shfl-rows-nopeel-ws")); // staging needs peel
  EXPECT_TRUE(variant_by_name("v8-t64-b128-c3-tree-pers-peel-ws"));     // any valid member parses
}

TEST(OfflineFamily, ValidateNamesTheOffendingParameter) {
  Variant v;
  v.vec_bytes = 4;
  ASSERT_TRUE(validate(v));
  EXPECT_NE(validate(v)->find("vec_bytes"), std::string::npos);
  v = Variant{};
  v.block_threads = 48;
  EXPECT_NE(validate(v)->find("block_threads"), std::string::npos);
  v = Variant{};
  v.threads_per_row = 512; // more than block_threads = 256
  EXPECT_NE(validate(v)->find("threads_per_row"), std::string::npos);
  EXPECT_THROW(generate(v), std::invalid_argument);
}

TEST(OfflineFamily, SafeDefaultIsScalarTwoPassAndGeneral) {
  const Variant& d = all_variants().front();
  EXPECT_EQ(d.vec_bytes, 0);
  EXPECT_EQ(d.cached_vecs, 0);
  auto parsed = parse_manifest(generate(d).manifest_json, generate(d).kernel_cu);
  ASSERT_TRUE(parsed.manifest) << parsed.errors.front().message;
  EXPECT_EQ(parsed.manifest->dispatch.h_min, 1);
  EXPECT_EQ(parsed.manifest->dispatch.h_max, 65536);
  EXPECT_EQ(parsed.manifest->dispatch.alignment_bytes, 2);
  EXPECT_EQ(parsed.manifest->dispatch.x_rows, RowLayout::kAnyStride);
}

TEST(OfflineFamily, EveryManifestParsesAndStatesTheVariant) {
  for (const auto& v : all_variants()) {
    const GeneratedCandidate c = generate(v);
    auto parsed = parse_manifest(c.manifest_json, c.kernel_cu);
    ASSERT_TRUE(parsed.manifest) << c.name << ": " << parsed.errors.front().field << ": "
                                 << parsed.errors.front().message;
    const Manifest& m = *parsed.manifest;
    EXPECT_EQ(m.entry_points.size(), 3u) << c.name;
    EXPECT_EQ(m.launch.block_threads, v.block_threads) << c.name;
    EXPECT_EQ(m.launch.rows_per_block, v.rows_per_block()) << c.name;
    EXPECT_EQ(m.launch.grid == GridKind::kPersistent, v.grid == FamilyGrid::kPersistent);
    EXPECT_EQ(m.dispatch.alignment_bytes, v.vec_bytes > 0 && !v.peel ? v.vec_bytes : 2) << c.name;
    EXPECT_EQ(m.dispatch.h_max, variant_h_max(v)) << c.name;
    EXPECT_EQ(m.launch.smem_bytes_per_h, v.stage_weight ? v.vec_bytes : 0) << c.name;
    EXPECT_LE(m.launch.dynamic_smem_bytes(m.dispatch.h_max), kMaxDynamicSmemBytes) << c.name;
  }
}

TEST(OfflineFamily, EntriesHaveTheContractSignatureAndOnlyToolkitIncludes) {
  const std::regex ws(R"(\s+)");
  for (const auto& v : all_variants()) {
    const std::string src = std::regex_replace(generate(v).kernel_cu, ws, " ");
    for (const auto& [name, type] :
         {std::pair{"rms_f32", "float"}, {"rms_f16", "__half"}, {"rms_bf16", "__nv_bfloat16"}}) {
      const std::string sig = std::string(name) + "(const " + type + "* x, const " + type +
                              "* weight, " + type +
                              "* y, long long rows, int H, long long x_row_stride, long long "
                              "y_row_stride, float eps)";
      EXPECT_NE(src.find(sig), std::string::npos) << variant_name(v) << " lacks " << sig;
    }
    std::smatch m;
    std::string rest = src;
    while (std::regex_search(rest, m, std::regex(R"(#include <([^>]+)>)"))) {
      EXPECT_TRUE(m[1] == "cuda_fp16.h" || m[1] == "cuda_bf16.h") << m[1];
      rest = m.suffix();
    }
  }
}

TEST(OfflineFamily, SharedReductionBufferHasABarrierBeforeReuse) {
  for (const auto& v : all_variants()) {
    const std::string src = generate(v).kernel_cu;
    if (src.find("kl_red[") == std::string::npos) continue;
    // The row loop ends with a barrier whenever a reduction buffer exists.
    EXPECT_NE(src.find("__syncthreads();  // the reduction buffer is reused by the next row"),
              std::string::npos)
        << variant_name(v);
  }
}

} // namespace
} // namespace kloop::rmsnorm
