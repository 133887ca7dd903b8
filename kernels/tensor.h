// Host tensors for the operator contracts: a strided view (shape, strides in ELEMENTS, storage
// offset, element type, device label) over a shared byte storage, exportable as a DLPack DLTensor.
// The CPU reference, the case families and the correctness core all work on HostTensor; the GPU
// worker copies the same bytes to device buffers and labels them with a CUDA device. Views share
// storage (like torch views); `contiguous()` and `clone()` copy. Element type is a DLPack
// DLDataType so that the audit can also represent wrong outputs (float64, int32); the contract's
// own dtypes convert through `dtype()`. Bad arguments to a factory throw std::invalid_argument
// naming the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>

#include "kernels/dtype.h"

namespace kloop {

// DLPack element type of a contract dtype (kDLFloat 32/16 or kDLBfloat 16, one lane).
DLDataType to_dl(DType dtype);
// Contract dtype of a DLPack element type; nullopt for anything else (float64, int32, ...).
std::optional<DType> from_dl(DLDataType type);
// "float32", "float16", "bfloat16", "float64", "int32", ... ("dl(code,bits,lanes)" otherwise).
std::string dl_type_name(DLDataType type);
inline constexpr DLDataType kDLFloat64Type{kDLFloat, 64, 1};
inline constexpr DLDataType kDLInt32Type{kDLInt, 32, 1};

// Memory layout kind (torch.layout). Only kStrided is a valid operator input; kSparse exists so
// that the reference's "non-strided layout" declared error can be exercised.
enum class TensorLayout { kStrided, kSparse };

inline constexpr DLDevice kCpuDevice{kDLCPU, 0};
inline DLDevice cuda_device(int id) {
  return DLDevice{kDLCUDA, id};
}
bool same_device(DLDevice a, DLDevice b);
std::string device_name(DLDevice device); // "cpu", "cuda:0", "dl_device(7):0"

// Everything the audit compares before and after a call (seed: shape, stride, storage_offset,
// dtype, device, storage pointer).
struct TensorMeta {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides; // elements
  std::int64_t offset = 0;           // elements from storage start
  DLDataType type{};
  DLDevice device{};
  TensorLayout layout = TensorLayout::kStrided;
  std::uintptr_t storage = 0; // storage base address (identity of the storage)
  bool operator==(const TensorMeta& other) const;
  nlohmann::json to_json() const;
};

class HostTensor {
public:
  HostTensor() = default; // an empty 0-d placeholder without storage; valid() is false

  // Contiguous zero-filled tensor (all bits zero) with fresh storage.
  static HostTensor zeros(std::vector<std::int64_t> shape, DType dtype);
  static HostTensor zeros(std::vector<std::int64_t> shape, DLDataType type);
  // Contiguous tensor from row-major values, each converted to `dtype` (RNE). values.size() must
  // equal the product of shape.
  static HostTensor from_values(std::vector<std::int64_t> shape, DType dtype,
                                const std::vector<float>& values);
  // Fresh storage of `storage_elems` elements (zero bits) viewed as (shape, strides, offset).
  static HostTensor strided(std::size_t storage_elems, DLDataType type,
                            std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                            std::int64_t offset);

  // Views sharing this tensor's storage. Each checks that every addressed element lies inside the
  // storage and throws std::invalid_argument otherwise.
  HostTensor as_strided(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                        std::int64_t offset) const;
  HostTensor transpose(int dim0, int dim1) const; // negative dims count from the end
  HostTensor t() const;                           // transpose(-2, -1); needs ndim >= 2
  // x[..., start:stop, ...] along `dim` (step 1): keeps strides, so rows get gaps.
  HostTensor slice(int dim, std::int64_t start, std::int64_t stop) const;
  // torch.expand: size-1 dims (and new leading dims) get stride 0.
  HostTensor expand(std::vector<std::int64_t> shape) const;
  // torch.view for a contiguous-compatible split/merge: only allowed when the tensor's strides
  // admit it (a merged group must be mutually contiguous); throws std::invalid_argument otherwise.
  HostTensor view(std::vector<std::int64_t> shape) const;
  // Same bytes, different labels (metadata only): used to build invalid inputs in tests.
  HostTensor with_device(DLDevice device) const;
  HostTensor with_layout(TensorLayout layout) const;

  HostTensor contiguous() const; // row-major copy with fresh storage (always a copy)
  HostTensor clone() const { return contiguous(); }
  // Same logical values converted to another element type (fresh contiguous storage).
  HostTensor to(DLDataType type) const;

  bool valid() const { return storage_ != nullptr; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  DLDataType dl_type() const { return type_; }
  // Contract dtype; throws std::logic_error for other element types (check has_contract_dtype()).
  DType dtype() const;
  bool has_contract_dtype() const { return from_dl(type_).has_value(); }
  std::size_t element_bytes() const { return (type_.bits * type_.lanes + 7) / 8; }
  DLDevice device() const { return device_; }
  TensorLayout layout() const { return layout_; }
  std::int64_t numel() const;
  std::int64_t width() const; // shape[-1]; needs ndim >= 1
  std::int64_t rows() const;  // product of shape[:-1] (1 for a 1-d tensor)
  bool is_contiguous() const; // row-major with no gaps (size-1 dims ignored)

  // Logical element `flat` (row-major over shape) as float, converted from the element type.
  float get(std::int64_t flat) const;
  void set(std::int64_t flat, float value); // converted to the element type (RNE)
  // Element `col` of row `row` of the [rows(), width()] view of the tensor.
  float get(std::int64_t row, std::int64_t col) const { return get(row * width() + col); }
  // Offset in elements from storage start of logical element `flat`.
  std::int64_t element_offset(std::int64_t flat) const;
  // Offset in elements from storage start of element (row, col) of the [rows, width] view.
  std::int64_t row_col_offset(std::int64_t row, std::int64_t col) const;

  // Whole storage as raw bytes (shared with every view of it).
  std::span<std::byte> storage_bytes() const;
  // Logical elements' bytes in row-major order (the seed's value_bytes).
  std::vector<std::byte> value_bytes() const;
  TensorMeta meta() const;
  bool shares_storage(const HostTensor& other) const; // same storage object (non-empty)

  // DLPack view: data = storage base, byte_offset = offset * element bytes, strides in elements.
  // Valid while this tensor lives (points into shape_/strides_).
  DLTensor dl() const;

private:
  std::shared_ptr<std::vector<std::byte>> storage_;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t offset_ = 0;
  DLDataType type_{kDLFloat, 32, 1};
  DLDevice device_ = kCpuDevice;
  TensorLayout layout_ = TensorLayout::kStrided;
};

// Row-major contiguous strides (elements) of `shape`.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);

// Whether the outer dimensions of x[..., H] collapse to a single row stride, i.e. element
// (r, j) of the [rows, H] view lives at offset + r * S + j * stride[-1] for one S. Returns S in
// elements, or nullopt. Size-1 outer dims are ignored; rows() <= 1 returns H (any stride works).
// The trusted wrapper uses it (DESIGN.md, "dispatch": outer dimensions that do not collapse).
std::optional<std::int64_t> collapsed_row_stride(const HostTensor& x);

} // namespace kloop
