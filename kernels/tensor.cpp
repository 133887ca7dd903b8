// HostTensor: strided views over shared byte storage, element conversion, DLPack export.
#include "kernels/tensor.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace kloop {

DLDataType to_dl(DType dtype) {
  switch (dtype) {
  case DType::kFloat32:
    return DLDataType{kDLFloat, 32, 1};
  case DType::kFloat16:
    return DLDataType{kDLFloat, 16, 1};
  case DType::kBFloat16:
    return DLDataType{kDLBfloat, 16, 1};
  }
  throw std::invalid_argument("to_dl: unknown DType value");
}

std::optional<DType> from_dl(DLDataType type) {
  if (type.lanes != 1) return std::nullopt;
  if (type.code == kDLFloat && type.bits == 32) return DType::kFloat32;
  if (type.code == kDLFloat && type.bits == 16) return DType::kFloat16;
  if (type.code == kDLBfloat && type.bits == 16) return DType::kBFloat16;
  return std::nullopt;
}

std::string dl_type_name(DLDataType type) {
  if (auto d = from_dl(type)) return std::string(dtype_name(*d));
  if (type.lanes == 1 && type.code == kDLFloat && type.bits == 64) return "float64";
  if (type.lanes == 1 && type.code == kDLInt) return fmt::format("int{}", type.bits);
  return fmt::format("dl({},{},{})", type.code, type.bits, type.lanes);
}

bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

std::string device_name(DLDevice device) {
  if (device.device_type == kDLCPU) return "cpu";
  if (device.device_type == kDLCUDA) return fmt::format("cuda:{}", device.device_id);
  return fmt::format("dl_device({}):{}", static_cast<int>(device.device_type), device.device_id);
}

bool TensorMeta::operator==(const TensorMeta& o) const {
  return shape == o.shape && strides == o.strides && offset == o.offset &&
         type.code == o.type.code && type.bits == o.type.bits && type.lanes == o.type.lanes &&
         same_device(device, o.device) && layout == o.layout && storage == o.storage;
}

nlohmann::json TensorMeta::to_json() const {
  return {{"shape", shape},
          {"strides", strides},
          {"offset", offset},
          {"dtype", dl_type_name(type)},
          {"device", device_name(device)},
          {"layout", layout == TensorLayout::kStrided ? "strided" : "sparse"}};
}

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

namespace {

std::int64_t product(const std::vector<std::int64_t>& v) {
  std::int64_t p = 1;
  for (auto d : v)
    p *= d;
  return p;
}

bool supported_element(DLDataType t) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat) return t.bits == 16 || t.bits == 32 || t.bits == 64;
  if (t.code == kDLBfloat) return t.bits == 16;
  if (t.code == kDLInt) return t.bits == 32;
  return false;
}

// Checks that every element of (shape, strides, offset) lies inside `elems` storage elements.
void check_bounds(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                  std::int64_t offset, std::size_t elems) {
  if (shape.size() != strides.size()) {
    throw std::invalid_argument(fmt::format("tensor view: shape has {} dims but strides has {}",
                                            shape.size(), strides.size()));
  }
  std::int64_t lo = offset, hi = offset;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw std::invalid_argument(
          fmt::format("tensor view: shape[{}] = {} is negative", i, shape[i]));
    }
    if (shape[i] == 0) return; // empty view addresses nothing
    const std::int64_t span = (shape[i] - 1) * strides[i];
    (span < 0 ? lo : hi) += span;
  }
  if (lo < 0 || hi >= static_cast<std::int64_t>(elems)) {
    throw std::invalid_argument(fmt::format(
        "tensor view: elements [{}, {}] fall outside the storage of {} elements; fix the "
        "shape, strides or offset",
        lo, hi, elems));
  }
}

} // namespace

HostTensor HostTensor::zeros(std::vector<std::int64_t> shape, DType dtype) {
  return zeros(std::move(shape), to_dl(dtype));
}

HostTensor HostTensor::zeros(std::vector<std::int64_t> shape, DLDataType type) {
  auto strides = contiguous_strides(shape);
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("HostTensor::zeros: negative dimension in shape");
  }
  const auto elems = static_cast<std::size_t>(product(shape)); // before shape is moved from
  return strided(elems, type, std::move(shape), std::move(strides), 0);
}

HostTensor HostTensor::from_values(std::vector<std::int64_t> shape, DType dtype,
                                   const std::vector<float>& values) {
  HostTensor t = zeros(std::move(shape), dtype);
  if (static_cast<std::int64_t>(values.size()) != t.numel()) {
    throw std::invalid_argument(fmt::format(
        "HostTensor::from_values: {} values for a shape of {} elements", values.size(), t.numel()));
  }
  for (std::size_t i = 0; i < values.size(); ++i)
    t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

HostTensor HostTensor::strided(std::size_t storage_elems, DLDataType type,
                               std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                               std::int64_t offset) {
  if (!supported_element(type)) {
    throw std::invalid_argument(
        fmt::format("HostTensor: element type {} is not supported", dl_type_name(type)));
  }
  HostTensor t;
  t.type_ = type;
  t.storage_ = std::make_shared<std::vector<std::byte>>(storage_elems * t.element_bytes());
  return t.as_strided(std::move(shape), std::move(strides), offset);
}

HostTensor HostTensor::as_strided(std::vector<std::int64_t> shape,
                                  std::vector<std::int64_t> strides, std::int64_t offset) const {
  if (!storage_) throw std::invalid_argument("HostTensor::as_strided: tensor has no storage");
  check_bounds(shape, strides, offset, storage_->size() / element_bytes());
  HostTensor v = *this;
  v.shape_ = std::move(shape);
  v.strides_ = std::move(strides);
  v.offset_ = offset;
  return v;
}

HostTensor HostTensor::transpose(int dim0, int dim1) const {
  const int n = ndim();
  if (dim0 < 0) dim0 += n;
  if (dim1 < 0) dim1 += n;
  if (dim0 < 0 || dim1 < 0 || dim0 >= n || dim1 >= n) {
    throw std::invalid_argument(
        fmt::format("HostTensor::transpose: dims out of range for {}-d", n));
  }
  auto shape = shape_;
  auto strides = strides_;
  std::swap(shape[dim0], shape[dim1]);
  std::swap(strides[dim0], strides[dim1]);
  return as_strided(std::move(shape), std::move(strides), offset_);
}

HostTensor HostTensor::t() const {
  if (ndim() < 2) throw std::invalid_argument("HostTensor::t: needs at least 2 dims");
  return transpose(-2, -1);
}

HostTensor HostTensor::slice(int dim, std::int64_t start, std::int64_t stop) const {
  if (dim < 0) dim += ndim();
  if (dim < 0 || dim >= ndim() || start < 0 || stop < start || stop > shape_[dim]) {
    throw std::invalid_argument(fmt::format(
        "HostTensor::slice: dim {} range [{}, {}) is outside the tensor", dim, start, stop));
  }
  auto shape = shape_;
  shape[dim] = stop - start;
  return as_strided(std::move(shape), strides_, offset_ + start * strides_[dim]);
}

HostTensor HostTensor::expand(std::vector<std::int64_t> shape) const {
  if (shape.size() < shape_.size()) {
    throw std::invalid_argument("HostTensor::expand: target has fewer dims than the tensor");
  }
  const std::size_t lead = shape.size() - shape_.size();
  std::vector<std::int64_t> strides(shape.size(), 0);
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    const std::int64_t want = shape[lead + i];
    if (shape_[i] == want) {
      strides[lead + i] = strides_[i];
    } else if (shape_[i] != 1) {
      throw std::invalid_argument(fmt::format(
          "HostTensor::expand: dim {} has size {} and cannot expand to {}", i, shape_[i], want));
    }
  }
  return as_strided(std::move(shape), std::move(strides), offset_);
}

HostTensor HostTensor::view(std::vector<std::int64_t> shape) const {
  if (product(shape) != numel()) {
    throw std::invalid_argument(fmt::format("HostTensor::view: {} elements cannot view as {}",
                                            numel(), nlohmann::json(shape).dump()));
  }
  if (numel() == 0 || shape_.empty()) {
    auto strides = contiguous_strides(shape);
    return as_strided(std::move(shape), std::move(strides), offset_);
  }
  // torch's computeStride: old dims are grouped into chunks that are mutually contiguous; each
  // chunk must be covered exactly by consecutive new dims.
  std::vector<std::int64_t> strides(shape.size(), 1);
  std::int64_t view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_base_stride = strides_.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = ndim() - 1; d >= 0; --d) {
    tensor_numel *= shape_[d];
    if (d == 0 || (shape_[d - 1] != 1 && strides_[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) {
        throw std::invalid_argument(
            "HostTensor::view: the shape is not compatible with the strides; use contiguous()");
      }
      if (d > 0) {
        chunk_base_stride = strides_[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) {
    throw std::invalid_argument("HostTensor::view: the shape is not compatible with the strides");
  }
  return as_strided(std::move(shape), std::move(strides), offset_);
}

HostTensor HostTensor::with_device(DLDevice device) const {
  HostTensor v = *this;
  v.device_ = device;
  return v;
}

HostTensor HostTensor::with_layout(TensorLayout layout) const {
  HostTensor v = *this;
  v.layout_ = layout;
  return v;
}

HostTensor HostTensor::contiguous() const {
  return to(type_);
}

HostTensor HostTensor::to(DLDataType type) const {
  HostTensor out = zeros(shape_, type);
  out.device_ = device_;
  const std::int64_t n = numel();
  if (type.code == type_.code && type.bits == type_.bits) {
    const std::size_t eb = element_bytes();
    std::byte* dst = out.storage_->data();
    const std::byte* src = storage_->data();
    for (std::int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * eb, src + element_offset(i) * eb, eb);
    }
    return out;
  }
  for (std::int64_t i = 0; i < n; ++i)
    out.set(i, get(i));
  return out;
}

DType HostTensor::dtype() const {
  if (auto d = from_dl(type_)) return *d;
  throw std::logic_error(fmt::format("HostTensor::dtype: element type {} is not a contract dtype",
                                     dl_type_name(type_)));
}

std::int64_t HostTensor::numel() const {
  return product(shape_);
}

std::int64_t HostTensor::width() const {
  if (shape_.empty()) throw std::logic_error("HostTensor::width: a 0-d tensor has no last dim");
  return shape_.back();
}

std::int64_t HostTensor::rows() const {
  if (shape_.empty()) return 1;
  std::int64_t r = 1;
  for (std::size_t i = 0; i + 1 < shape_.size(); ++i)
    r *= shape_[i];
  return r;
}

bool HostTensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 0) return true;
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::int64_t HostTensor::element_offset(std::int64_t flat) const {
  std::int64_t off = offset_;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    const std::int64_t d = shape_[i];
    off += (flat % d) * strides_[i];
    flat /= d;
  }
  return off;
}

std::int64_t HostTensor::row_col_offset(std::int64_t row, std::int64_t col) const {
  return element_offset(row * width() + col);
}

namespace {

template <typename T> T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T> void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

} // namespace

float HostTensor::get(std::int64_t flat) const {
  if (flat < 0 || flat >= numel()) {
    throw std::out_of_range(fmt::format("HostTensor::get: index {} of {}", flat, numel()));
  }
  const std::byte* p = storage_->data() + element_offset(flat) * element_bytes();
  if (type_.code == kDLFloat && type_.bits == 32) return load<float>(p);
  if (type_.code == kDLFloat && type_.bits == 16) return half_bits_to_float(load<std::uint16_t>(p));
  if (type_.code == kDLBfloat) return bf16_bits_to_float(load<std::uint16_t>(p));
  if (type_.code == kDLFloat && type_.bits == 64) return static_cast<float>(load<double>(p));
  return static_cast<float>(load<std::int32_t>(p));
}

void HostTensor::set(std::int64_t flat, float value) {
  if (flat < 0 || flat >= numel()) {
    throw std::out_of_range(fmt::format("HostTensor::set: index {} of {}", flat, numel()));
  }
  std::byte* p = storage_->data() + element_offset(flat) * element_bytes();
  if (type_.code == kDLFloat && type_.bits == 32) {
    store(p, value);
  } else if (type_.code == kDLFloat && type_.bits == 16) {
    store(p, float_to_half_bits(value));
  } else if (type_.code == kDLBfloat) {
    store(p, float_to_bf16_bits(value));
  } else if (type_.code == kDLFloat && type_.bits == 64) {
    store(p, static_cast<double>(value));
  } else {
    store(p, static_cast<std::int32_t>(value));
  }
}

std::span<std::byte> HostTensor::storage_bytes() const {
  if (!storage_) return {};
  return {storage_->data(), storage_->size()};
}

std::vector<std::byte> HostTensor::value_bytes() const {
  const std::int64_t n = numel();
  const std::size_t eb = element_bytes();
  std::vector<std::byte> out(static_cast<std::size_t>(n) * eb);
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + i * eb, storage_->data() + element_offset(i) * eb, eb);
  }
  return out;
}

TensorMeta HostTensor::meta() const {
  return TensorMeta{shape_,
                    strides_,
                    offset_,
                    type_,
                    device_,
                    layout_,
                    reinterpret_cast<std::uintptr_t>(storage_ ? storage_->data() : nullptr)};
}

bool HostTensor::shares_storage(const HostTensor& other) const {
  return storage_ && storage_ == other.storage_;
}

DLTensor HostTensor::dl() const {
  DLTensor t{};
  t.data = storage_ ? storage_->data() : nullptr;
  t.device = device_;
  t.ndim = ndim();
  t.dtype = type_;
  t.shape = const_cast<std::int64_t*>(shape_.data());
  t.strides = const_cast<std::int64_t*>(strides_.data());
  t.byte_offset = static_cast<std::uint64_t>(offset_) * element_bytes();
  return t;
}

std::optional<std::int64_t> collapsed_row_stride(const HostTensor& x) {
  if (x.ndim() < 1) return std::nullopt;
  const std::int64_t h = x.width();
  if (x.rows() == 0) return h; // no rows at all: any stride works
  std::optional<std::int64_t> row_stride;
  std::int64_t inner_rows = 1; // rows spanned by one step of the current dim
  for (int d = x.ndim() - 2; d >= 0; --d) {
    const std::int64_t size = x.shape()[d];
    if (size == 1) continue;
    const std::int64_t stride = x.strides()[d];
    if (!row_stride) {
      row_stride = stride; // innermost non-trivial outer dim
    } else if (stride != *row_stride * inner_rows) {
      return std::nullopt;
    }
    inner_rows *= size;
  }
  return row_stride.value_or(h);
}

} // namespace kloop
