// The weighted_rmsnorm/1 contract document, its hash and its tolerance policy.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/reference.h"

namespace kloop::rmsnorm {
namespace {

TEST(ContractTest, DocumentNamesOperatorVersionDtypesAndEveryDeclaredError) {
  const auto& c = contract_json();
  EXPECT_EQ(c["operator"], "weighted_rmsnorm");
  EXPECT_EQ(c["version"], 1);
  EXPECT_EQ(contract_id(), "weighted_rmsnorm/1");
  EXPECT_EQ(c["dtypes"].size(), 3u);
  std::set<std::string> errors(c["errors"].begin(), c["errors"].end());
  for (int code = 1; code <= 12; ++code) {
    EXPECT_TRUE(errors.count(std::string(error_code_name(static_cast<ErrorCode>(code))))) << code;
  }
  EXPECT_NE(c["kernel_signature"].get<std::string>().find("long long x_row_stride"),
            std::string::npos);
  EXPECT_EQ(c["tolerance"]["per_dtype"]["bfloat16"]["rtol"], 1.6e-2);
}

TEST(ContractTest, HashIsStableHexOfTheCanonicalText) {
  const std::string h = contract_sha256();
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, contract_sha256());
  EXPECT_EQ(contract_canonical_text(), nlohmann::json::parse(contract_canonical_text()).dump());
}

TEST(ContractTest, BenchmarkSweepCoversRequiredShapesForAllDtypes) {
  const auto shapes = benchmark_shapes();
  for (DType d : kAllDTypes) {
    for (auto [rows, h] : {std::pair<std::int64_t, std::int64_t>{8, 4096},
                           {65536, 4096},
                           {32768, 1009},
                           {4096, 4099},
                           {65536, 128},
                           {16384, 4096},
                           {4096, 8192},
                           {2048, 16384}}) {
      // Bindings by name: C++20 lambdas cannot capture a structured binding implicitly (clang).
      const bool found =
          std::any_of(shapes.begin(), shapes.end(), [&, r = rows, c = h](const BenchShape& s) {
            return s.rows == r && s.h == c && s.dtype == d;
          });
      EXPECT_TRUE(found) << rows << "x" << h << " " << dtype_name(d);
    }
  }
}

TEST(ContractTest, TolerancesAllowAboutOneOutputUlpAndAreOrderedByPrecision) {
  const Tolerance f32 = tolerance_for(DType::kFloat32);
  const Tolerance f16 = tolerance_for(DType::kFloat16);
  const Tolerance bf16 = tolerance_for(DType::kBFloat16);
  EXPECT_GE(f16.rtol, 0x1.0p-10); // one half ulp relative at the bottom of a binade
  EXPECT_GE(bf16.rtol, 0x1.0p-7); // one bfloat16 ulp
  EXPECT_LT(f32.rtol, f16.rtol);
  EXPECT_LT(f16.rtol, bf16.rtol);
  // The tiny row [1e-8, -1e-8] (expected norm ~1.4e-8) is judged relatively in float32.
  EXPECT_LT(f32.row_floor, 1.4e-8);
}

} // namespace
} // namespace kloop::rmsnorm
