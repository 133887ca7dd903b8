// The argument packer (abi_pack.h).
#include "kernels/abi_pack.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace kloop::op {
namespace {

template <typename T> void put(std::byte* slot, T value) {
  static_assert(sizeof(T) <= 8);
  std::memcpy(slot, &value, sizeof(T));
}

template <typename V> const V& at(const std::vector<V>& v, int i, const AbiParam& p) {
  if (i < 0 || static_cast<std::size_t>(i) >= v.size())
    throw std::invalid_argument(fmt::format("kernel argument '{}' has no value", p.name));
  return v[static_cast<std::size_t>(i)];
}

void put_int(std::byte* slot, std::int64_t v, const AbiParam& p) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw std::invalid_argument(
        fmt::format("kernel argument '{}' = {} does not fit its type int", p.name, v));
  put(slot, static_cast<int>(v));
}

} // namespace

PackedArgs::PackedArgs(const std::vector<AbiParam>& params, const AbiValues& v)
    : slots_(params.size()), bytes_(params.size()), argv_(params.size()) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const AbiParam& p = params[i];
    std::byte* s = slots_[i].bytes;
    std::memset(s, 0, 8);
    switch (p.kind) {
    case AbiKind::kTensor:
      put(s, reinterpret_cast<const void*>(at(v.tensors, p.index, p)));
      break;
    case AbiKind::kRows:
      put(s, static_cast<long long>(v.rows));
      break;
    case AbiKind::kAxis:
      put_int(s, at(v.axes, p.index, p), p);
      break;
    case AbiKind::kRowStride:
      put(s, static_cast<long long>(at(v.row_strides, p.index, p)));
      break;
    case AbiKind::kScalar: {
      const double x = at(v.scalars, p.index, p);
      if (p.c_type == "float")
        put(s, static_cast<float>(x));
      else if (p.c_type == "int")
        put_int(s, static_cast<std::int64_t>(x), p);
      else
        put(s, static_cast<long long>(x));
      break;
    }
    }
    bytes_[i] = p.bytes;
    argv_[i] = s;
  }
}

} // namespace kloop::op
