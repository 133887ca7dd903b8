// Unit tests of the offline kernel family: determinism, names, validation, and that every curated
// variant's manifest parses against its source and states the variant's launch and dispatch.
#include <functional>
#include <iterator>
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/manifest.h"
#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/operator.h"

namespace kloop::rmsnorm {
namespace {

// Index of H in the declaration's axes (op::When::axes is indexed like them).
std::size_t h_axis() {
  return static_cast<std::size_t>(declaration().axis_index("H"));
}

Variant flagship_variant_for_test() {
  return *variant_by_name("v16-tauto-b512-c4-shfl-pers-peel");
}

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
  auto parsed = op::parse_manifest(declaration(), generate(d).manifest_json);
  ASSERT_TRUE(parsed.manifest) << parsed.errors.front().message;
  ASSERT_EQ(parsed.manifest->variants.size(), 1u);
  const op::When& w = parsed.manifest->variants[0].when;
  EXPECT_EQ(w.axes.at(h_axis()).min, 1);
  EXPECT_EQ(w.axes.at(h_axis()).max, 65536);
  EXPECT_EQ(w.alignment_bytes, 2);
  const auto x_rows = w.rows.find(declaration().tensor_index("x"));
  EXPECT_TRUE(x_rows == w.rows.end() || x_rows->second == op::RowLayout::kAnyStride);
}

TEST(OfflineFamily, EveryManifestParsesAndStatesTheVariant) {
  for (const auto& v : all_variants()) {
    const GeneratedCandidate c = generate(v);
    auto parsed = op::parse_manifest(declaration(), c.manifest_json);
    ASSERT_TRUE(parsed.manifest) << c.name << ": " << parsed.errors.front().field << ": "
                                 << parsed.errors.front().message;
    ASSERT_EQ(parsed.manifest->variants.size(), 1u) << c.name;
    const op::Variant& m = parsed.manifest->variants[0];
    const std::int64_t h_max = m.when.axes.at(h_axis()).max;
    EXPECT_EQ(m.entry_points.size(), 3u) << c.name;
    EXPECT_EQ(m.launch.block_threads, v.block_threads) << c.name;
    EXPECT_EQ(m.launch.rows_per_block, v.rows_per_block()) << c.name;
    EXPECT_EQ(m.launch.grid == op::GridKind::kPersistent, v.grid == FamilyGrid::kPersistent);
    EXPECT_EQ(m.when.alignment_bytes, v.vec_bytes > 0 && !v.peel ? v.vec_bytes : 2) << c.name;
    EXPECT_EQ(h_max, variant_h_max(v)) << c.name;
    EXPECT_EQ(m.launch.smem_bytes_per_unit, v.stage_weight ? v.vec_bytes : 0) << c.name;
    EXPECT_LE(m.launch.dynamic_smem_bytes(h_max), op::kMaxDynamicSmemBytes) << c.name;
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

TEST(OfflineFamily, SharedReductionBufferIsProtectedBeforeReuse) {
  for (const auto& v : all_variants()) {
    const std::string src = generate(v).kernel_cu;
    if (src.find("kl_red[") == std::string::npos) continue;
    if (v.reduction == Reduction::kSharedTree) {
      // The tree reuses one buffer: the row loop ends with a barrier.
      EXPECT_NE(src.find("__syncthreads();  // the reduction buffer is reused by the next row"),
                std::string::npos)
          << variant_name(v);
    } else {
      // Shuffle partials alternate between two buffers; the next row's barrier separates reads
      // of one buffer from the writes two rows later.
      EXPECT_NE(src.find("kl_red[2 * (kBlockThreads / 32)]"), std::string::npos) << variant_name(v);
      EXPECT_NE(src.find("float* red = kl_red + parity * (kBlockThreads / 32);"), std::string::npos)
          << variant_name(v);
      EXPECT_NE(src.find("parity ^= 1;"), std::string::npos) << variant_name(v);
      EXPECT_EQ(src.find("reused by the next row"), std::string::npos) << variant_name(v);
    }
  }
}

TEST(OfflineFamily, EvictFirstIsANamedOptionOfCachedVectorVariants) {
  const auto v = variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-ef");
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->evict_first);
  EXPECT_EQ(variant_name(*v), "v16-tauto-b256-c4-shfl-pers-peel-ef");
  EXPECT_TRUE(variant_by_name("v16-tauto-b512-c4-shfl-pers-peel-ws-ef")); // after -ws only
  EXPECT_FALSE(variant_by_name("v16-tauto-b512-c4-shfl-pers-peel-ef-ws"));
  Variant two_pass = *v;
  two_pass.cached_vecs = 0;
  const auto err = validate(two_pass);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("evict_first"), std::string::npos) << *err;
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c0-shfl-pers-peel-ef"));
  EXPECT_FALSE(variant_by_name("v0-t256-b256-c0-tree-rows-nopeel-ef"));
}

TEST(OfflineFamily, EvictFirstLoadsOnlyTheCachedPartWithLdcs) {
  const std::string ef =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-ef")).kernel_cu;
  const std::string plain =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel")).kernel_cu;
  EXPECT_NE(ef.find("cache[k] = i < nvec ? load_ef(xr + head + i * kV)"), std::string::npos);
  EXPECT_NE(ef.find("__ldcs(reinterpret_cast<const uint4*>(p))"), std::string::npos);
  // The streamed remainder is re-read for the output pass, so it keeps normal loads.
  EXPECT_NE(ef.find("ss = sumsq<T>(load_ro(xr + head + i * kV), ss)"), std::string::npos);
  EXPECT_NE(plain.find("cache[k] = i < nvec ? load_ro(xr + head + i * kV)"), std::string::npos);
}

TEST(OfflineFamily, EvictLastIsANamedOptionExclusiveWithEvictFirst) {
  const auto v = variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-el");
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->evict_last);
  EXPECT_FALSE(v->evict_first);
  // Suffix order -ws, -ef, -el, -ps, -wr, -pf, -bl.
  EXPECT_TRUE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-el-ps-wr-bl"));
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-ps-el"));
  Variant both = *v;
  both.evict_first = true;
  auto err = validate(both);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("evict_last"), std::string::npos) << *err;
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-ef-el"));
  Variant two_pass = *v;
  two_pass.cached_vecs = 0;
  err = validate(two_pass);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("evict_last"), std::string::npos) << *err;
  EXPECT_FALSE(variant_by_name("v0-t256-b256-c0-tree-rows-nopeel-el"));
}

TEST(OfflineFamily, EvictLastLoadsTheCachedPartUnderAnL2PolicyOnlyOnCallsOver64MiB) {
  for (const char* name :
       {"v16-tauto-b256-c4-shfl-pers-peel-el", "v8-t32-b256-c8-shfl-rows-peel-el",
        "v16-tauto-b256-c4-shfl-pers-peel-el-ps"}) {
    SCOPED_TRACE(name);
    const std::string src = generate(*variant_by_name(name)).kernel_cu;
    const bool v8 = std::string_view(name).substr(0, 3) == "v8-";
    // One decision per launch from the call's x bytes, the 64 MiB threshold defined once.
    EXPECT_NE(src.find("const bool el = evict_last_call<T>(rows, H);"), std::string::npos);
    EXPECT_NE(src.find("> kLargeCall;"), std::string::npos);
    std::size_t defs = 0;
    for (std::size_t at = src.find("kLargeCall = 64LL << 20"); at != std::string::npos;
         at = src.find("kLargeCall = 64LL << 20", at + 1))
      ++defs;
    EXPECT_EQ(defs, 1u);
    // The policy load, and the read-only load when the call is small.
    EXPECT_NE(src.find("createpolicy.fractional.L2::evict_last.b64"), std::string::npos);
    EXPECT_NE(src.find(v8 ? "ld.global.L1::evict_last.L2::cache_hint.v2.u32"
                          : "ld.global.L1::evict_last.L2::cache_hint.v4.u32"),
              std::string::npos);
    EXPECT_NE(src.find("if (!el) return load_ro(p);"), std::string::npos);
    EXPECT_NE(src.find("cache[k] = i < nvec ? load_el(xr + head + i * kV, el)"), std::string::npos);
    // The streamed remainder is re-read for the output pass and keeps read-only loads.
    if (!v8) {
      EXPECT_NE(src.find("ss = sumsq<T>(load_ro(xr + head + i * kV), ss)"), std::string::npos);
    }
  }
  const std::string plain =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel")).kernel_cu;
  EXPECT_EQ(plain.find("evict_last"), std::string::npos);
  EXPECT_EQ(plain.find("kLargeCall"), std::string::npos);
}

TEST(OfflineFamily, CompositeRunsTheBaselineDesignOnAlignedCallsAndThePeelElsewhere) {
  const auto v = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-ef-bl");
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->baseline_aligned);
  const std::string src = generate(*v).kernel_cu;
  // The baseline's device code, verbatim, inside namespace bl; its own entries and includes left
  // out, so the candidate keeps exactly the contract's three entries and two includes.
  const std::string_view base = embedded_baseline_source();
  const std::string impl = "__device__ void rms_impl(";
  ASSERT_NE(base.find(impl), std::string_view::npos);
  EXPECT_NE(src.find("namespace bl {"), std::string::npos);
  EXPECT_NE(src.find(impl), std::string::npos);
  int externs = 0, includes = 0;
  for (std::size_t p = src.find("extern \"C\""); p != std::string::npos;
       p = src.find("extern \"C\"", p + 1))
    ++externs;
  for (std::size_t p = src.find("#include"); p != std::string::npos;
       p = src.find("#include", p + 1))
    ++includes;
  EXPECT_EQ(externs, 3);
  EXPECT_EQ(includes, 2);
  // One uniform decision per launch: aligned calls to the baseline's path, the rest to the peel.
  EXPECT_NE(src.find("if (kl::aligned_call(x, weight, y, x_row_stride, y_row_stride))"),
            std::string::npos);
  EXPECT_NE(src.find("bl::rms_impl<__nv_bfloat16>(x, weight, y, rows, H"), std::string::npos);
  EXPECT_NE(src.find("kl::rms_rows<__nv_bfloat16>(x, weight, y, rows, H"), std::string::npos);
  // The manifest is the baseline's launch geometry and admits element-aligned views.
  const auto m = nlohmann::json::parse(generate(*v).manifest_json);
  EXPECT_EQ(m["launch"]["block_threads"], 256);
  EXPECT_EQ(m["launch"]["grid"], "persistent");
  EXPECT_EQ(m["dispatch"]["alignment_bytes"], 2);
}

TEST(OfflineFamily, CompositeNeedsTheBaselinesLaunchGeometry) {
  Variant v = *variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-ef-bl");
  EXPECT_FALSE(validate(v));
  for (auto change : std::vector<std::function<void(Variant&)>>{
           [](Variant& x) { x.block_threads = 512; }, [](Variant& x) { x.vec_bytes = 8; },
           [](Variant& x) { x.peel = false; }, [](Variant& x) { x.stage_weight = true; }}) {
    Variant bad = v;
    change(bad);
    const auto err = validate(bad);
    ASSERT_TRUE(err.has_value()) << variant_name(bad);
    EXPECT_NE(err->find("baseline_aligned"), std::string::npos) << *err;
  }
  EXPECT_FALSE(variant_by_name("v16-tauto-b512-c4-shfl-pers-peel-ef-bl"));
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-bl-ef")); // -bl comes last
  EXPECT_TRUE(variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-bl"));
}

TEST(OfflineFamily, Float32BaselineIsANamedOptionOfCompositesOnly) {
  const auto v = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl");
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->float32_baseline);
  EXPECT_TRUE(v->baseline_aligned);
  Variant bad = *v;
  bad.baseline_aligned = false;
  const auto err = validate(bad);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("float32_baseline"), std::string::npos) << *err;
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-f32bl"));    // no composite
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-f32bl-bl")); // order
  // The float32 entry is the baseline's call alone; the half entries keep the composite switch,
  // and the manifest says where float32 calls go.
  const GeneratedCandidate c = generate(*v);
  const std::size_t f32 = c.kernel_cu.find(") rms_f32(");
  const std::size_t f16 = c.kernel_cu.find(") rms_f16(");
  ASSERT_NE(f32, std::string::npos);
  ASSERT_NE(f16, std::string::npos);
  const std::string f32_body = c.kernel_cu.substr(f32, f16 - f32);
  EXPECT_NE(f32_body.find("bl::rms_impl<float>"), std::string::npos) << f32_body;
  EXPECT_EQ(f32_body.find("kl::"), std::string::npos) << f32_body;
  EXPECT_NE(c.kernel_cu.substr(f16).find("kl::rms_rows<__half>"), std::string::npos);
  EXPECT_NE(c.manifest_json.find("float32 calls run the in-tree baseline's own code"),
            std::string::npos);
}

// The half types hand over the same way (-f16bl, -bf16bl, after -f32bl); at least one dtype stays
// composite, and each handed entry is the baseline's call alone.
TEST(OfflineFamily, HalfTypeBaselineEntriesAreNamedOptionsAndOneDtypeStaysComposite) {
  const auto v = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl-bf16bl");
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->float32_baseline);
  EXPECT_FALSE(v->float16_baseline);
  EXPECT_TRUE(v->bfloat16_baseline);
  EXPECT_EQ(variant_name(*v), "v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl-bf16bl");
  const auto f16 = variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f16bl");
  ASSERT_TRUE(f16.has_value());
  EXPECT_TRUE(f16->float16_baseline);
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bf16bl"));          // no -bl
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-bf16bl-f32bl")); // order
  Variant all = *v;
  all.float16_baseline = true;
  const auto err = validate(all);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("at least one dtype must stay composite"), std::string::npos) << *err;
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl-f32bl-f16bl-bf16bl"));

  const GeneratedCandidate c = generate(*v);
  const std::size_t p32 = c.kernel_cu.find(") rms_f32(");
  const std::size_t p16 = c.kernel_cu.find(") rms_f16(");
  const std::size_t pbf = c.kernel_cu.find(") rms_bf16(");
  ASSERT_NE(p32, std::string::npos);
  ASSERT_NE(p16, std::string::npos);
  ASSERT_NE(pbf, std::string::npos);
  const std::string f16_body = c.kernel_cu.substr(p16, pbf - p16);
  const std::string bf16_body = c.kernel_cu.substr(pbf);
  EXPECT_NE(f16_body.find("kl::rms_rows<__half>"), std::string::npos) << f16_body; // composite
  EXPECT_NE(bf16_body.find("bl::rms_impl<__nv_bfloat16>"), std::string::npos) << bf16_body;
  EXPECT_EQ(bf16_body.find("kl::"), std::string::npos) << bf16_body;
  EXPECT_NE(c.manifest_json.find("float32 and bfloat16 calls run the in-tree baseline's own code"),
            std::string::npos)
      << c.manifest_json;
}

TEST(OfflineFamily, StoreHintWarpRowsAndPrefetchAreNamedOptionsWithStatedConstraints) {
  const auto all = variant_by_name("v16-tauto-b128-c2-shfl-pers-peel-ef-ps-wr-pf");
  ASSERT_TRUE(all.has_value());
  EXPECT_TRUE(all->evict_first && all->plain_stores && all->warp_rows && all->prefetch);
  EXPECT_EQ(variant_name(*all), "v16-tauto-b128-c2-shfl-pers-peel-ef-ps-wr-pf");
  EXPECT_TRUE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl"));
  // Suffix order -ws, -ef, -el, -ps, -wr, -pf, -bl; any other order is not a canonical name.
  EXPECT_FALSE(variant_by_name("v16-tauto-b128-c2-shfl-pers-peel-ef-ps-pf-wr"));
  EXPECT_FALSE(variant_by_name("v16-tauto-b128-c2-shfl-pers-peel-ps-ef"));
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-bl-wr"));
  const auto fails_on = [](Variant v, const std::function<void(Variant&)>& change,
                           const char* field) {
    change(v);
    const auto err = validate(v);
    ASSERT_TRUE(err.has_value()) << variant_name(v);
    EXPECT_NE(err->find(field), std::string::npos) << *err;
  };
  const Variant base = *all;
  // A per_rows block has no next row; a two-pass variant has no cache to prefetch.
  fails_on(
      base,
      [](Variant& v) {
        v.threads_per_row = 32, v.grid = FamilyGrid::kPerRows, v.warp_rows = false;
      },
      "prefetch");
  fails_on(
      base, [](Variant& v) { v.cached_vecs = 0, v.evict_first = false, v.warp_rows = false; },
      "prefetch");
  fails_on(
      base, [](Variant& v) { v.vec_bytes = 0, v.peel = false, v.evict_first = false; },
      "plain_stores");
  fails_on(
      base, [](Variant& v) { v.threads_per_row = 32; }, "warp_rows");
  fails_on(
      base, [](Variant& v) { v.reduction = Reduction::kSharedTree; }, "warp_rows");
  fails_on(
      base, [](Variant& v) { v.block_threads = 32; }, "warp_rows");
  // Prefetch doubles the cache, which would lower a composite's launch bound for the baseline's
  // path too.
  EXPECT_FALSE(variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-pf-bl"));
  fails_on(
      *variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-bl"),
      [](Variant& v) { v.prefetch = true; }, "baseline_aligned");
}

TEST(OfflineFamily, PrefetchIssuesTheNextRowsLoadsBeforeTheCurrentRowIsReduced) {
  const std::string pf =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-pf")).kernel_cu;
  const std::string plain =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel")).kernel_cu;
  const std::size_t loop = pf.find("for (long long base =");
  const std::size_t first = pf.find("cache[k] = i < nvec ? load_ro(xr + head + i * kV)");
  const std::size_t next = pf.find("next[k] = i < nnvec ? load_ro(nxr + nhead + i * kV)");
  const std::size_t reduce = pf.find("__shfl_xor_sync(0xffffffffu, total, o)");
  const std::size_t barrier = pf.find("__syncthreads();", loop);
  const std::size_t rotate = pf.find("cache[k] = next[k];");
  ASSERT_NE(loop, std::string::npos);
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(next, std::string::npos);
  ASSERT_NE(reduce, std::string::npos);
  ASSERT_NE(barrier, std::string::npos);
  ASSERT_NE(rotate, std::string::npos);
  EXPECT_LT(first, loop);     // the first row's cache is loaded before the loop
  EXPECT_LT(loop, next);      // each iteration issues the next row's loads ...
  EXPECT_LT(next, reduce);    // ... before this row's shuffle reduction
  EXPECT_LT(next, barrier);   // ... and before its barrier
  EXPECT_LT(barrier, rotate); // the cache rotates at the end of the iteration
  // The next row is base + step + group, the row this group takes in the next iteration.
  EXPECT_NE(pf.find("const long long nrow = base + step + group;"), std::string::npos);
  EXPECT_EQ(plain.find("next["), std::string::npos);
}

TEST(OfflineFamily, StoreHintWritesBackOnlyOnCallsLargerThanL2) {
  for (const char* name :
       {"v16-tauto-b256-c4-shfl-pers-peel-ps", "v16-tauto-b512-c4-shfl-pers-peel-ws-ps",
        "v16-t32-b256-c8-shfl-rows-nopeel-ps", "v8-t32-b256-c8-shfl-rows-peel-ps"}) {
    SCOPED_TRACE(name);
    const auto v = variant_by_name(name);
    ASSERT_TRUE(v.has_value());
    const std::string ps = generate(*v).kernel_cu;
    // 64 MiB of x decides, once per launch; the hint is a scoped enum, so no other name (the
    // weight row pointer of the output pass, say) can stand in for it.
    EXPECT_NE(ps.find("kLargeCall = 64LL << 20"), std::string::npos);
    EXPECT_NE(ps.find("> kLargeCall\n             ? StoreHint::kWriteBack\n             : "
                      "StoreHint::kStream;"),
              std::string::npos);
    EXPECT_NE(ps.find("if (hint == StoreHint::kWriteBack)\n    *p = v;"), std::string::npos);
    const std::regex decl(R"([A-Za-z_]\w*\s+hint\s*=[^=])");
    const auto decls =
        std::distance(std::sregex_iterator(ps.begin(), ps.end(), decl), std::sregex_iterator());
    EXPECT_EQ(decls, 1) << "the hint must be declared once (const StoreHint hint = ...)";
    EXPECT_NE(ps.find("const StoreHint hint = store_hint<T>(rows, H);"), std::string::npos);
    // Every vector store of y takes the hint.
    const std::regex store_call(R"(store_y\(yr \+ head \+ i \* kV, o(, hint)?\);)");
    int calls = 0, with_hint = 0;
    for (auto it = std::sregex_iterator(ps.begin(), ps.end(), store_call);
         it != std::sregex_iterator(); ++it, ++calls)
      with_hint += (*it)[1].matched ? 1 : 0;
    EXPECT_GT(calls, 0);
    EXPECT_EQ(with_hint, calls);
  }
  // Without the option every vector store streams, as before.
  const std::string plain =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel")).kernel_cu;
  EXPECT_EQ(plain.find("StoreHint"), std::string::npos);
  EXPECT_NE(plain.find("__stcs(reinterpret_cast<uint4*>(p)"), std::string::npos);
  // A composite keeps the baseline's code verbatim (its streaming stores included).
  const std::string comp =
      generate(*variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-ps-wr-bl")).kernel_cu;
  const std::string_view base = embedded_baseline_source();
  const std::size_t ns = base.find("namespace {");
  const std::size_t cut = base.find("extern \"C\"");
  ASSERT_NE(ns, std::string_view::npos);
  ASSERT_NE(cut, std::string_view::npos);
  EXPECT_NE(comp.find(std::string(base.substr(ns, cut - ns))), std::string::npos);
}

TEST(OfflineFamily, WarpRowsGivesRowsOfUpToTwiceAWarpsCacheOneWarp) {
  const std::string wr =
      generate(*variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-wr-bl")).kernel_cu;
  const std::size_t rule = wr.find("if (tpr > 32 && nv <= 128) tpr = 32;");
  ASSERT_NE(rule, std::string::npos); // 2 cached vectors: rows of up to 128 vectors
  // After the cache-sized choice, before the few-rows widening.
  EXPECT_LT(wr.find("tpr * 2 < nv) tpr <<= 1;"), rule);
  EXPECT_LT(rule, wr.find("// Few rows: widen rows"));
  const std::string c4 =
      generate(*variant_by_name("v16-tauto-b256-c4-shfl-pers-peel-ps-wr")).kernel_cu;
  EXPECT_NE(c4.find("if (tpr > 32 && nv <= 256) tpr = 32;"), std::string::npos);
  EXPECT_EQ(
      generate(*variant_by_name("v16-tauto-b256-c2-shfl-pers-peel-bl")).kernel_cu.find("Warp rows"),
      std::string::npos);
}

TEST(OfflineFamily, RunTimeThreadsPerRowWidensRowsWhenTheGridHasSpareRowSlots) {
  const std::string src = generate(flagship_variant_for_test()).kernel_cu;
  EXPECT_NE(src.find("static_cast<long long>(gridDim.x) * (kBlockThreads / tpr) >= 2 * rows"),
            std::string::npos);
  // Fixed geometry has no run-time choice at all.
  const std::string fixed = generate(*variant_by_name("v16-t32-b256-c8-shfl-rows-peel")).kernel_cu;
  EXPECT_NE(fixed.find("constexpr int tpr = 32;"), std::string::npos);
  EXPECT_EQ(fixed.find("gridDim.x) * (kBlockThreads / tpr)"), std::string::npos);
}

} // namespace
} // namespace kloop::rmsnorm
