// HostTensor views: contiguous, transposed, sliced with gaps, storage offset, expanded, view();
// value bytes, metadata, DLPack export and the collapsed row stride used by the trusted wrapper.
#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>

#include "kernels/tensor.h"

namespace kloop {
namespace {

std::vector<float> iota(int n, float start = 0.0f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = start + static_cast<float>(i);
  return v;
}

TEST(HostTensorTest, ContiguousFactoryStoresValuesRowMajor) {
  HostTensor t = HostTensor::from_values({2, 3}, DType::kFloat32, iota(6));
  EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.width(), 3);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.get(1, 2), 5.0f);
  EXPECT_EQ(t.storage_bytes().size(), 24u);
}

TEST(HostTensorTest, ElementsConvertThroughTheDtype) {
  HostTensor h = HostTensor::from_values({2}, DType::kFloat16, {1.0f + 0x1.0p-11f, 70000.0f});
  EXPECT_EQ(h.get(0), 1.0f); // rounded to nearest even
  EXPECT_TRUE(std::isinf(h.get(1)));
  HostTensor b = HostTensor::from_values({1}, DType::kBFloat16, {3.0f});
  EXPECT_EQ(b.value_bytes().size(), 2u);
  EXPECT_EQ(b.get(0), 3.0f);
}

TEST(HostTensorTest, TransposeSwapsStridesAndAddressesStorage) {
  // torch.arange(8.0).reshape(4, 2).t(): shape [2, 4], strides (1, 2).
  HostTensor base = HostTensor::from_values({4, 2}, DType::kFloat32, iota(8));
  HostTensor t = base.t();
  EXPECT_EQ(t.shape(), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.get(0, 1), 2.0f);
  EXPECT_EQ(t.get(1, 3), 7.0f);
  EXPECT_TRUE(t.shares_storage(base));
  HostTensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage(base));
  EXPECT_EQ(c.value_bytes(), t.value_bytes());
}

TEST(HostTensorTest, SliceLeavesGapsBetweenRows) {
  // qkv[:, :2] of a [3, 5] buffer: row stride 5, width 2.
  HostTensor qkv = HostTensor::from_values({3, 5}, DType::kFloat32, iota(15));
  HostTensor x = qkv.slice(1, 0, 2);
  EXPECT_EQ(x.strides(), (std::vector<std::int64_t>{5, 1}));
  EXPECT_FALSE(x.is_contiguous());
  EXPECT_EQ(x.get(2, 1), 11.0f);
  EXPECT_EQ(x.row_col_offset(1, 0), 5);
  HostTensor tail = qkv.slice(1, 3, 5);
  EXPECT_EQ(tail.offset(), 3);
  EXPECT_EQ(tail.get(0, 0), 3.0f);
}

TEST(HostTensorTest, StorageOffsetViewStartsInsideTheStorage) {
  HostTensor buf = HostTensor::from_values({9}, DType::kFloat16, iota(9));
  HostTensor x = buf.slice(0, 1, 9).view({4, 2});
  EXPECT_EQ(x.offset(), 1);
  EXPECT_EQ(x.get(0, 0), 1.0f);
  EXPECT_EQ(x.get(3, 1), 8.0f);
  const DLTensor dl = x.dl();
  EXPECT_EQ(dl.byte_offset, 2u);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.strides[0], 2);
  EXPECT_EQ(dl.dtype.bits, 16);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
}

TEST(HostTensorTest, ExpandGivesStrideZeroRowsSharingValues) {
  HostTensor base = HostTensor::from_values({2, 2}, DType::kFloat32, {3, 4, 0, 0});
  HostTensor e = base.slice(0, 0, 1).expand({3, 2});
  EXPECT_EQ(e.strides(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(e.get(2, 1), 4.0f);
  EXPECT_EQ(e.value_bytes().size(), 6u * 4u);
  EXPECT_THROW(base.expand({3, 2}), std::invalid_argument);
}

TEST(HostTensorTest, ViewSplitsContiguousDimsAndRefusesIncompatibleStrides) {
  HostTensor qkv = HostTensor::zeros({4, 24}, DType::kBFloat16);
  HostTensor x = qkv.slice(1, 0, 8).view({4, 2, 4}); // qkv[:, :8].view(4, 2, 4)
  EXPECT_EQ(x.strides(), (std::vector<std::int64_t>{24, 4, 1}));
  EXPECT_THROW(qkv.slice(1, 0, 8).view({32}), std::invalid_argument);
  EXPECT_THROW(qkv.view({5, 5}), std::invalid_argument);
}

TEST(HostTensorTest, ViewsOutsideTheStorageAreRejected) {
  HostTensor t = HostTensor::zeros({4}, DType::kFloat32);
  EXPECT_THROW(t.as_strided({2, 2}, {2, 2}, 0), std::invalid_argument);
  EXPECT_THROW(t.as_strided({1}, {1}, 4), std::invalid_argument);
  EXPECT_NO_THROW(t.as_strided({0, 9}, {100, 1}, 0)); // empty view addresses nothing
}

TEST(HostTensorTest, MetadataRecordsStorageIdentityAndLabels) {
  HostTensor a = HostTensor::zeros({2, 3}, DType::kFloat32);
  HostTensor b = a;
  EXPECT_TRUE(a.meta() == b.meta());
  EXPECT_FALSE(a.meta() == a.t().meta());
  EXPECT_FALSE(a.meta() == a.clone().meta());
  EXPECT_FALSE(a.meta() == a.with_device(cuda_device(0)).meta());
  EXPECT_EQ(a.with_device(cuda_device(1)).meta().to_json()["device"], "cuda:1");
  EXPECT_THROW((void)HostTensor::zeros({1}, kDLFloat64Type).dtype(), std::logic_error);
  EXPECT_EQ(dl_type_name(kDLFloat64Type), "float64");
}

TEST(HostTensorTest, CollapsedRowStrideFollowsOuterDims) {
  HostTensor c = HostTensor::zeros({3, 4, 8}, DType::kFloat32);
  EXPECT_EQ(collapsed_row_stride(c), 8);
  HostTensor qkv = HostTensor::zeros({4, 24}, DType::kFloat32);
  EXPECT_EQ(collapsed_row_stride(qkv.slice(1, 0, 8)), 24); // one row stride with gaps
  EXPECT_FALSE(collapsed_row_stride(qkv.slice(1, 0, 8).view({4, 2, 4})).has_value());
  HostTensor e = HostTensor::zeros({1, 8}, DType::kFloat32).expand({5, 8});
  EXPECT_EQ(collapsed_row_stride(e), 0);
  EXPECT_EQ(collapsed_row_stride(HostTensor::zeros({1, 1, 8}, DType::kFloat32)), 8);
  EXPECT_EQ(collapsed_row_stride(HostTensor::zeros({3, 0, 8}, DType::kFloat32)), 8);
  EXPECT_EQ(collapsed_row_stride(HostTensor::zeros({4, 2}, DType::kFloat32).t()), 1);
}

} // namespace
} // namespace kloop
