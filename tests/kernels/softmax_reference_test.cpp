// row_softmax/1: the CPU reference against hand-derived values and PyTorch's non-finite semantics
// (kernels/softmax/reference.h), the declared errors, the operator's validation, and the
// contract document: its ABI, tolerance and benchmark sweep, and its pinned hash.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/abi_pack.h"
#include "kernels/registry.h"
#include "kernels/softmax/contract.h"
#include "kernels/softmax/operator.h"
#include "kernels/softmax/reference.h"

namespace kloop::softmax {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

HostTensor row(DType d, std::vector<float> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return HostTensor::from_values({n}, d, v);
}

std::vector<float> values(const HostTensor& t) {
  std::vector<float> out;
  for (std::int64_t i = 0; i < t.numel(); ++i)
    out.push_back(t.get(i));
  return out;
}

std::vector<float> softmax_of(DType d, std::vector<float> v) {
  const HostTensor x = row(d, std::move(v));
  EXPECT_TRUE(validate(x).ok());
  return values(reference_compute(x));
}

bool all_nan(const std::vector<float>& v) {
  for (float f : v)
    if (!std::isnan(f)) return false;
  return !v.empty();
}

TEST(SoftmaxReferenceTest, FiniteRowsMatchHandDerivedValues) {
  // softmax([1, 2, 3]) = [e^-2, e^-1, 1] / (1 + e^-1 + e^-2).
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  const auto y = softmax_of(DType::kFloat32, {1, 2, 3});
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(std::exp(-2.0) / z));
  EXPECT_FLOAT_EQ(y[1], static_cast<float>(std::exp(-1.0) / z));
  EXPECT_FLOAT_EQ(y[2], static_cast<float>(1 / z));
  EXPECT_EQ(softmax_of(DType::kFloat32, {0, 0}), (std::vector<float>{0.5f, 0.5f}));
  // N = 1: always exactly 1.
  EXPECT_EQ(softmax_of(DType::kFloat32, {-123.5f}), std::vector<float>{1.0f});
  EXPECT_EQ(softmax_of(DType::kBFloat16, {7}), std::vector<float>{1.0f});
}

TEST(SoftmaxReferenceTest, AllEqualRowsAreOneOverNAtEveryMagnitude) {
  for (float c : {0.0f, 1.0f, -1e4f, 1e4f, 3e38f, -3e38f}) {
    const auto y = softmax_of(DType::kFloat32, {c, c, c});
    EXPECT_EQ(y, (std::vector<float>(3, 1.0f / 3.0f))) << c; // 1/3 rounded once
  }
  // float16 / bfloat16: 1/3 rounded to the dtype (from float32's 1/3: no double-rounding tie).
  EXPECT_EQ(softmax_of(DType::kFloat16, {2, 2, 2}),
            std::vector<float>(3, half_bits_to_float(float_to_half_bits(1.0f / 3.0f))));
  EXPECT_EQ(softmax_of(DType::kBFloat16, {-5, -5, -5}), std::vector<float>(3, 0.333984375f));
}

TEST(SoftmaxReferenceTest, LargeMagnitudesAreShiftedByTheMaxAndNeverOverflow) {
  // x and x + 1 at 1e4: [1, e] / (1 + e) whatever the offset.
  const auto y = softmax_of(DType::kFloat32, {1e4f, 1e4f + 1});
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(1 / (1 + std::exp(1.0))));
  EXPECT_FLOAT_EQ(y[1], static_cast<float>(std::exp(1.0) / (1 + std::exp(1.0))));
  // Near float32's max: x - max overflows to -inf in float32 for the far element: exactly 0.
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(softmax_of(DType::kFloat32, {big, -big}), (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(softmax_of(DType::kFloat32, {big, big}), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(softmax_of(DType::kFloat16, {65504, -65504, 65504}),
            (std::vector<float>{0.5f, 0.0f, 0.5f}));
  // 200 below the max underflows to exactly 0 (exp(-200) ~ 1e-87).
  EXPECT_EQ(softmax_of(DType::kFloat32, {0, -200}), (std::vector<float>{1.0f, 0.0f}));
}

TEST(SoftmaxReferenceTest, NegativeInfinityElementsOfAFiniteRowAreExactlyZero) {
  EXPECT_EQ(softmax_of(DType::kFloat32, {-kInf, 0}), (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ(softmax_of(DType::kBFloat16, {-kInf, 3, -kInf, 3}),
            (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
  // The softmax of the finite ones is unchanged by masked elements.
  const auto masked = softmax_of(DType::kFloat32, {1, -kInf, 2, 3, -kInf});
  const auto plain = softmax_of(DType::kFloat32, {1, 2, 3});
  EXPECT_EQ(masked, (std::vector<float>{plain[0], 0.0f, plain[1], plain[2], 0.0f}));
}

// torch.softmax: an all -inf row is NaN (max = -inf, -inf - (-inf) = NaN); a +inf makes the row
// NaN (inf - inf in the sum); a NaN anywhere makes the row NaN.
TEST(SoftmaxReferenceTest, PyTorchNonFiniteRowsAreWholeRowsOfNan) {
  for (DType d : kAllDTypes) {
    EXPECT_TRUE(all_nan(softmax_of(d, {-kInf, -kInf, -kInf}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {-kInf}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {1, kInf, 2}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {kInf, kInf}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {kInf, -kInf}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {kInf}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {0, kNan, 0}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {kNan, -kInf}))) << dtype_name(d);
    EXPECT_TRUE(all_nan(softmax_of(d, {kNan}))) << dtype_name(d);
  }
  // Rows are independent: a NaN row next to a finite one.
  const HostTensor x = HostTensor::from_values({2, 2}, DType::kFloat32, {kNan, 1, 0, 0});
  const auto y = values(reference_compute(x));
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_EQ(y[3], 0.5f);
}

TEST(SoftmaxReferenceTest, ViewsGiveTheSoftmaxOfTheirLogicalRows) {
  const HostTensor base = HostTensor::from_values({3, 2}, DType::kFloat32, {1, 4, 2, 5, 3, 6});
  const HostTensor xt = base.t(); // [2, 3] with strides (1, 2): rows [1, 2, 3] and [4, 5, 6]
  const HostTensor y = reference_compute(xt);
  EXPECT_EQ(y.shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_TRUE(y.is_contiguous());
  const std::vector<float> got = values(y);
  EXPECT_EQ(got, values(reference_compute(xt.contiguous())));
  const auto first = softmax_of(DType::kFloat32, {1, 2, 3});
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 3), first);
  // Row [4, 5, 6] is row [1, 2, 3] shifted by 3: the same softmax.
  EXPECT_EQ(std::vector<float>(got.begin() + 3, got.end()), first);
}

TEST(SoftmaxReferenceTest, EmptyBatchesAndZeroWidthRowsGiveEmptyOutputsOfXsShape) {
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{3, 0}, {0, 4}, {2, 0, 5}, {0}}) {
    const HostTensor x = HostTensor::zeros(shape, DType::kBFloat16);
    const Validation v = validate(x);
    ASSERT_TRUE(v.ok());
    const HostTensor y = reference_compute(x);
    EXPECT_EQ(y.shape(), shape);
    EXPECT_EQ(y.numel(), 0);
  }
}

TEST(SoftmaxReferenceTest, InvalidCallsRaiseTheDeclaredErrorInTheContractsOrder) {
  const HostTensor x = HostTensor::from_values({2, 3}, DType::kFloat32, {1, 2, 3, 4, 5, 6});
  auto code_of = [](const HostTensor& t) {
    const Validation v = validate(t);
    return v.ok() ? std::string("ok") : v.error->code;
  };
  EXPECT_EQ(code_of(x), "ok");
  EXPECT_EQ(code_of(x.with_layout(TensorLayout::kSparse)), "non_strided_layout");
  EXPECT_EQ(code_of(HostTensor::zeros({}, DType::kFloat32)), "bad_rank");
  EXPECT_EQ(code_of(x.to(kDLFloat64Type)), "unsupported_dtype");
  EXPECT_EQ(code_of(HostTensor::zeros({2, 3}, kDLInt32Type)), "unsupported_dtype");
  EXPECT_EQ(code_of(x.with_device(DLDevice{kDLMetal, 0})), "unsupported_device");
  EXPECT_EQ(code_of(x.with_device(cuda_device(3))), "ok");
  // Order: a sparse 0-d float64 tensor is a layout error first.
  EXPECT_EQ(code_of(HostTensor::zeros({}, kDLFloat64Type).with_layout(TensorLayout::kSparse)),
            "non_strided_layout");
  const Validation bad = validate(x.to(kDLFloat64Type));
  EXPECT_THAT(bad.error->message, HasSubstr("float64"));
  EXPECT_THAT(bad.error->message, HasSubstr("use float16, bfloat16 or float32"));
  for (int c = 1; c <= kErrorCodes; ++c)
    EXPECT_EQ(parse_error_code(error_code_name(static_cast<ErrorCode>(c))),
              static_cast<ErrorCode>(c));
  EXPECT_EQ(parse_error_code("eps_not_number"), std::nullopt);
}

TEST(SoftmaxOperatorTest, ValidationGivesRowsTheBatchShapeAndN) {
  const op::Operator& op = operator_instance();
  const HostTensor x = HostTensor::zeros({2, 3, 5}, DType::kFloat16);
  const op::Validated v = op.validate({{x}, {}});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.rows, 6);
  EXPECT_EQ(v.batch_shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(v.axes, std::vector<std::int64_t>{5});
  EXPECT_TRUE(v.scalars.empty());
  EXPECT_FALSE(v.empty());
  EXPECT_TRUE(op.validate({{HostTensor::zeros({3, 0}, DType::kFloat16)}, {}}).empty());
  EXPECT_THROW((void)op.validate({{x, x}, {}}), std::invalid_argument);
  EXPECT_THROW((void)op.validate({{x}, {op::ScalarArg::of(1.0)}}), std::invalid_argument);
  const op::Validated sparse = op.validate({{x.with_layout(TensorLayout::kSparse)}, {}});
  ASSERT_FALSE(sparse.ok());
  EXPECT_EQ(sparse.error->code, "non_strided_layout");
  // The registry finds it by every name.
  EXPECT_EQ(op::find_operator("softmax"), &op);
  EXPECT_EQ(op::find_operator("row_softmax"), &op);
  EXPECT_EQ(op::find_operator("row_softmax/1"), &op);
  EXPECT_EQ(op.folder(), "kernels/softmax");
  EXPECT_TRUE(op.benchmark_scalars().empty());
}

TEST(SoftmaxContractTest, AbiIsPointersRowsNAndTheTwoRowStrides) {
  const auto params = op::abi(declaration());
  std::vector<std::string> got;
  for (const op::AbiParam& p : params)
    got.push_back(p.c_type + " " + p.name + ":" + std::to_string(p.bytes));
  EXPECT_EQ(got,
            (std::vector<std::string>{"const T* x:8", "T* y:8", "long long rows:8", "int N:4",
                                      "long long x_row_stride:8", "long long y_row_stride:8"}));
  EXPECT_EQ(contract_json().at("kernel_signature").get<std::string>(),
            "extern \"C\" __global__ void ENTRY(const T* x, T* y, long long rows, int N, "
            "long long x_row_stride, long long y_row_stride)");
  EXPECT_EQ(op::check_declaration(declaration()), std::nullopt);
  op::AbiValues v;
  v.tensors = {0x1000, 0x2000};
  v.rows = 3'000'000'000LL;
  v.axes = {32768};
  v.row_strides = {32776, 32768};
  op::PackedArgs packed(params, v);
  ASSERT_EQ(packed.size(), 6u);
  long long rows = 0, xs = 0;
  int n = 0;
  std::memcpy(&rows, packed.argv()[2], 8);
  std::memcpy(&n, packed.argv()[3], 4);
  std::memcpy(&xs, packed.argv()[4], 8);
  EXPECT_EQ(rows, 3'000'000'000LL);
  EXPECT_EQ(n, 32768);
  EXPECT_EQ(xs, 32776);
}

TEST(SoftmaxContractTest, ToleranceIsTheDocumentedPolicyAndInTheContract) {
  const auto& c = contract_json();
  for (DType d : kAllDTypes)
    EXPECT_EQ(c["tolerance"]["per_dtype"][std::string(dtype_name(d))], tolerance_for(d).to_json());
  EXPECT_EQ(tolerance_for(DType::kFloat32).rtol, 1e-4);
  EXPECT_EQ(tolerance_for(DType::kFloat32).atol, 1e-30);
  EXPECT_EQ(tolerance_for(DType::kFloat16).atol, 1.2e-7);
  EXPECT_EQ(tolerance_for(DType::kBFloat16).rtol, 1.6e-2);
  // 2 output ulps pass at the bottom of a binade, 3 fail (float16 and bfloat16).
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    const op::Tolerance t = tolerance_for(d);
    const double e = 0.25, ulp = output_ulp(d, e);
    EXPECT_LE(2 * ulp, t.atol + t.rtol * e) << dtype_name(d);
    EXPECT_GT(3 * ulp, t.atol + t.rtol * e) << dtype_name(d);
  }
  // Two float16 subnormal spacings pass on a subnormal output.
  EXPECT_LE(2 * output_ulp(DType::kFloat16, 3e-5), tolerance_for(DType::kFloat16).atol);
  EXPECT_EQ(c["errors"], (nlohmann::json{"non_strided_layout", "bad_rank", "unsupported_dtype",
                                         "unsupported_device"}));
  EXPECT_THAT(c["non_finite"].get<std::string>(), HasSubstr("every element is -inf"));
  EXPECT_EQ(operator_instance().tolerance(DType::kFloat16, 1).to_json(),
            tolerance_for(DType::kFloat16).to_json());
}

TEST(SoftmaxContractTest, BenchmarkSweepHasTheTargetShapeAndASweepOverN) {
  const auto shapes = benchmark_shapes();
  const op::BenchShape target{16384, {32768}, DType::kBFloat16};
  EXPECT_NE(std::find(shapes.begin(), shapes.end(), target), shapes.end());
  for (DType d : kAllDTypes)
    for (std::int64_t n : {128, 1024, 4096, 8192, 32768}) {
      bool found = false;
      for (const auto& s : shapes)
        found = found || (s.dtype == d && s.axes == std::vector<std::int64_t>{n});
      EXPECT_TRUE(found) << n << " " << dtype_name(d);
    }
  EXPECT_EQ(contract_json()["benchmark_shapes"].size(), shapes.size());
  EXPECT_EQ(target.to_json(declaration()),
            (nlohmann::json{{"rows", 16384}, {"n", 32768}, {"dtype", "bfloat16"}}));
}

// The contract hash at this commit: a change of any policy (formula, errors, tolerance, sweep,
// manifest schema) changes it, and with it what stored sessions of row_softmax/1 mean.
TEST(SoftmaxContractTest, ContractHashIsPinned) {
  EXPECT_EQ(contract_id(), "row_softmax/1");
  EXPECT_EQ(operator_instance().contract_sha256(),
            "28c5cc2c6178dc0055d134f328b1d94a897e2a4684a3ad694dd00ee4467e307d");
}

} // namespace
} // namespace kloop::softmax
