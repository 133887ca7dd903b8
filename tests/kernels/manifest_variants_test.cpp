// Candidate format 2 (issue 25): a manifest with several per-shape variants, read against the
// operator's declaration (kernels/manifest.h), and the trusted wrapper's choice among them
// (kernels/dispatch.h): the first variant whose `when` holds serves a call, the reference serves
// the rest; the chosen variant's entry point and launch rule are what the GPU worker launches
// (evaluator/gpu_worker/launch.h packs op::abi_values of the same geometry).
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "kernels/abi_pack.h"
#include "kernels/dispatch.h"
#include "kernels/manifest.h"
#include "kernels/registry.h"

namespace kloop::op {
namespace {

const Operator& rmsnorm() {
  const Operator* o = find_operator("rmsnorm");
  EXPECT_NE(o, nullptr);
  return *o;
}

// Two variants: a wide vectorised one for H a multiple of 8 from 1024 (bfloat16 and float16
// only, 32-bit indexing: at most 2^31 - 1 elements), then a scalar one for everything else.
const char* kTwoVariants = R"({
  "contract": "weighted_rmsnorm/1", "format": 2, "target": "sm_90",
  "variants": [
    {"name": "wide",
     "when": {"dtypes": ["bfloat16", "float16"], "h_min": 1024, "h_multiple_of": 8,
              "alignment_bytes": 16, "max_elements": 2147483647},
     "entry_points": {"bfloat16": "wide_bf16", "float16": "wide_f16"},
     "launch": {"block_threads": 512, "rows_per_block": 1, "grid": "per_rows",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}},
    {"name": "scalar", "when": {"alignment_bytes": 2},
     "entry_points": {"float32": "s_f32", "float16": "s_f16", "bfloat16": "s_bf16"},
     "launch": {"block_threads": 128, "rows_per_block": 4, "grid": "per_rows",
                "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}}
  ]})";

Manifest parse_ok(const std::string& text) {
  const ManifestParse p = parse_manifest(rmsnorm().declaration(), text);
  EXPECT_TRUE(p.manifest.has_value()) << (p.errors.empty() ? "" : p.errors.front().message);
  return p.manifest.value_or(Manifest{});
}

// A contiguous RMSNorm call of rows x h at 256-byte aligned addresses (x, weight, y).
CallGeometry call(DType dt, std::int64_t rows, std::int64_t h) {
  const Declaration& d = rmsnorm().declaration();
  CallArgs args;
  args.tensors = {HostTensor::zeros({1, h}, dt), HostTensor::zeros({h}, dt)};
  args.scalars = {ScalarArg::of(1e-6)};
  Validated v = rmsnorm().validate(args);
  EXPECT_TRUE(v.ok());
  CallGeometry g = call_geometry(d, args, v, {0x10000, 0x20000, 0x30000});
  g.rows = rows;
  g.tensors[0].span_elements = rows * h;
  g.tensors[2].span_elements = rows * h;
  return g;
}

TEST(ManifestVariantsTest, FormatTwoReadsEachVariantInOrder) {
  const Manifest m = parse_ok(kTwoVariants);
  EXPECT_EQ(m.format, 2);
  ASSERT_EQ(m.variants.size(), 2u);
  EXPECT_EQ(m.variants[0].name, "wide");
  EXPECT_EQ(m.variants[0].when.alignment_bytes, 16);
  EXPECT_EQ(m.variants[0].when.max_elements, 2147483647);
  EXPECT_EQ(m.variants[0].launch.block_threads, 512);
  EXPECT_EQ(m.variants[1].name, "scalar");
  EXPECT_EQ(m.variants[1].launch.rows_per_block, 4);
  EXPECT_EQ(m.entry_names(),
            (std::vector<std::string>{"wide_f16", "wide_bf16", "s_f32", "s_f16", "s_bf16"}))
      << "variant order, then dtype order within a variant";
  const std::string text = dispatch_predicate_text(rmsnorm().declaration(), m);
  EXPECT_NE(text.find("v0 wide: dtype in {bfloat16,float16} && 1024<=H<=2147483647 && H%8==0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("elements<=2147483647"), std::string::npos) << text;
  EXPECT_NE(text.find("else reference"), std::string::npos) << text;
}

TEST(ManifestVariantsTest, FormatOneIsOneDefaultVariant) {
  const Manifest m = parse_ok(R"({"contract": "weighted_rmsnorm/1", "target": "sm_90",
    "entry_points": {"float32": "a", "float16": "b", "bfloat16": "c"},
    "launch": {"block_threads": 256, "rows_per_block": 1, "grid": "persistent",
               "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}},
    "dispatch": {"h_min": 1, "h_max": 65536, "h_multiple_of": 1, "x_rows": "any_stride",
                 "alignment_bytes": 2}})");
  EXPECT_EQ(m.format, 1);
  ASSERT_EQ(m.variants.size(), 1u);
  EXPECT_EQ(m.variants[0].name, "default");
  const DispatchDecision d =
      decide_dispatch(rmsnorm().declaration(), m, call(DType::kFloat32, 8, 1009), DeviceInfo{});
  EXPECT_EQ(d.route, Route::kCandidate);
  EXPECT_EQ(d.variant, 0);
}

TEST(ManifestVariantsTest, TheFirstMatchingVariantServesAndTheReferenceServesTheRest) {
  const Declaration& decl = rmsnorm().declaration();
  const Manifest m = parse_ok(kTwoVariants);
  const DeviceInfo dev;
  auto decide = [&](const CallGeometry& g) { return decide_dispatch(decl, m, g, dev); };

  DispatchDecision d = decide(call(DType::kBFloat16, 64, 4096));
  EXPECT_EQ(d.route, Route::kCandidate);
  EXPECT_EQ(d.variant, 0) << "H=4096 bfloat16 is the wide variant's";
  d = decide(call(DType::kBFloat16, 64, 1009));
  EXPECT_EQ(d.variant, 1) << "H=1009 is no multiple of 8: the scalar variant";
  d = decide(call(DType::kFloat32, 64, 4096));
  EXPECT_EQ(d.variant, 1) << "float32 is not in the wide variant's dtypes";
  d = decide(call(DType::kFloat16, 64, 512));
  EXPECT_EQ(d.variant, 1) << "H=512 is below the wide variant's h_min";

  // An x address that is only 2-byte aligned: not the wide variant (16 bytes), the scalar one
  // (2 bytes).
  CallGeometry odd = call(DType::kBFloat16, 64, 4096);
  odd.tensors[0].addr += 2;
  d = decide(odd);
  EXPECT_EQ(d.variant, 1) << d.why;

  // Past 2^31 elements the wide variant's 32-bit bound routes to the scalar variant.
  d = decide(call(DType::kBFloat16, 524289, 4096));
  EXPECT_EQ(d.route, Route::kCandidate);
  EXPECT_EQ(d.variant, 1);

  // A call no variant admits (float32, not the wide variant's dtype; an odd x address, below
  // the scalar variant's 2-byte alignment): the reference, naming each variant's failed clause.
  CallGeometry f32 = call(DType::kFloat32, 4, 256);
  f32.tensors[0].addr += 1;
  d = decide(f32);
  EXPECT_EQ(d.route, Route::kReference);
  EXPECT_EQ(d.variant, -1);
  EXPECT_NE(d.why.find("dtype float32 is not in the variant's dtypes"), std::string::npos) << d.why;
  EXPECT_NE(d.why.find("alignment_bytes=2"), std::string::npos) << d.why;

  // Counting launches per variant, as the GPU worker's evidence does.
  PathCounts counts;
  counts.add(Route::kCandidate, 1);
  counts.add(Route::kCandidate, 0);
  counts.add(Route::kCandidate, 1);
  counts.add(Route::kReference);
  EXPECT_EQ(counts.to_json().at("per_variant"), nlohmann::json({1, 2}));
}

TEST(ManifestVariantsTest, TheChosenVariantsLaunchRuleAndTheCanonicalAbiAreWhatIsLaunched) {
  const Declaration& decl = rmsnorm().declaration();
  const Manifest m = parse_ok(kTwoVariants);
  const CallGeometry g = call(DType::kBFloat16, 10, 1009);
  const DispatchDecision d = decide_dispatch(decl, m, g, DeviceInfo{});
  ASSERT_EQ(d.variant, 1);
  const LaunchPlan plan =
      plan_launch(m.variants[1].launch, g.rows, row_width(decl, g), DeviceInfo{}, 0);
  EXPECT_EQ(plan.block, 128);
  EXPECT_EQ(plan.grid, 3) << "ceil(10 rows / 4 rows per block)";
  Validated v;
  v.scalars = {static_cast<double>(1e-6f)};
  PackedArgs args(abi(decl), abi_values(g, v));
  ASSERT_EQ(args.size(), 8u);
  auto ll = [&](std::size_t i) {
    long long x = 0;
    std::memcpy(&x, args.param_data(i), 8);
    return x;
  };
  EXPECT_EQ(ll(0), 0x10000); // x
  EXPECT_EQ(ll(1), 0x20000); // weight
  EXPECT_EQ(ll(2), 0x30000); // y
  EXPECT_EQ(ll(3), 10);      // rows
  int h = 0;
  std::memcpy(&h, args.param_data(4), 4);
  EXPECT_EQ(h, 1009);
  EXPECT_EQ(ll(5), 1009); // x_row_stride
  EXPECT_EQ(ll(6), 1009); // y_row_stride
  float eps = 0;
  std::memcpy(&eps, args.param_data(7), 4);
  EXPECT_EQ(eps, 1e-6f);
}

TEST(ManifestVariantsTest, MalformedVariantListsAreNamedByField) {
  const Declaration& decl = rmsnorm().declaration();
  auto first_error = [&](const std::string& text) {
    const ManifestParse p = parse_manifest(decl, text);
    EXPECT_FALSE(p.manifest.has_value());
    return p.errors.empty() ? ManifestError{} : p.errors.front();
  };
  const std::string head = R"({"contract": "weighted_rmsnorm/1", "format": 2, "target": "sm_90",
                               "variants": )";
  const std::string v = R"({"entry_points": {"float32": "k"}, "launch": {"block_threads": 128,
    "rows_per_block": 1, "grid": "per_rows", "dynamic_smem": {"fixed_bytes": 0,
    "bytes_per_h": 0}}})";
  std::string nine = "[";
  for (int i = 0; i < 9; ++i)
    nine += (i ? "," : "") + v;
  EXPECT_EQ(first_error(head + nine + "]}").field, "variants");
  EXPECT_EQ(first_error(head + "[]}").field, "variants");
  const std::string named = R"({"name": "a", "entry_points": {"float32": "k"}, "launch":
    {"block_threads": 128, "rows_per_block": 1, "grid": "per_rows", "dynamic_smem":
    {"fixed_bytes": 0, "bytes_per_h": 0}}})";
  EXPECT_EQ(first_error(head + "[" + named + "," + named + "]}").field, "variants[1].name");
  const std::string f16_only = R"({"when": {"dtypes": ["float16"]}, "entry_points":
    {"float32": "k"}, "launch": {"block_threads": 128, "rows_per_block": 1, "grid": "per_rows",
    "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}}})";
  const ManifestError e = first_error(head + "[" + f16_only + "]}");
  EXPECT_EQ(e.field, "variants[0].when.dtypes");
  EXPECT_NE(e.message.find("no entry point"), std::string::npos) << e.message;
  const ManifestError top = first_error(R"({"contract": "weighted_rmsnorm/1", "format": 2,
                                            "target": "sm_90", "entry_points": {"float32": "k"}})");
  EXPECT_EQ(top.field, "entry_points") << "format 2 takes variants, not format 1's keys";
  EXPECT_NE(top.message.find("each variant of 'variants' has its own entry_points"),
            std::string::npos)
      << top.message;
}

// Mistakes a first format-2 manifest makes: each gets one error naming the field and the fix.
TEST(ManifestVariantsTest, FormatTwoMistakesGetTheirFix) {
  const Declaration& decl = rmsnorm().declaration();
  auto errors = [&](const std::string& text) {
    const ManifestParse p = parse_manifest(decl, text);
    EXPECT_FALSE(p.manifest.has_value()) << text;
    return p.errors;
  };
  const std::string launch = R"("launch": {"block_threads": 128, "rows_per_block": 1, "grid":
    "per_rows", "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}})";
  // "variants" without "format": 2.
  const auto forgot =
      errors(R"({"contract": "weighted_rmsnorm/1", "target": "sm_90", "variants": [{"entry_points":
                 {"float32": "k"}, )" +
             launch + "}]}");
  ASSERT_FALSE(forgot.empty());
  EXPECT_EQ(forgot.front().field, "variants");
  EXPECT_NE(forgot.front().message.find("add \"format\": 2"), std::string::npos)
      << forgot.front().message;
  for (const ManifestError& e : forgot)
    EXPECT_EQ(e.message.find("unknown key 'variants'"), std::string::npos) << e.message;
  const std::string head = R"({"contract": "weighted_rmsnorm/1", "format": 2, "target": "sm_90",
                               "variants": [)";
  // An entry point for a dtype that when.dtypes leaves out could never be launched.
  const auto dead = errors(head + R"({"when": {"dtypes": ["float16"]}, "entry_points":
    {"float16": "k16", "float32": "k32"}, )" +
                           launch + "}]}");
  ASSERT_EQ(dead.size(), 1u) << dead.front().message;
  EXPECT_EQ(dead.front().field, "variants[0].entry_points.float32");
  EXPECT_NE(dead.front().message.find("could never be launched"), std::string::npos)
      << dead.front().message;
  // A dtype named twice.
  const auto twice = errors(head + R"({"when": {"dtypes": ["float16", "float16"]},
    "entry_points": {"float16": "k16"}, )" +
                            launch + "}]}");
  ASSERT_EQ(twice.size(), 1u) << twice.front().message;
  EXPECT_EQ(twice.front().field, "variants[0].when.dtypes");
  EXPECT_NE(twice.front().message.find("twice"), std::string::npos) << twice.front().message;
  // Twin: the same variant with its dtypes right parses.
  const ManifestParse ok = parse_manifest(decl, head + R"({"when": {"dtypes": ["float16"]},
    "entry_points": {"float16": "k16"}, )" + launch +
                                                    "}]}");
  EXPECT_TRUE(ok.manifest.has_value()) << (ok.errors.empty() ? "" : ok.errors.front().message);
}

} // namespace
} // namespace kloop::op
