// The operator declaration: what one operator's kernels take, as data that every layer reads
// (issue 25). Named axes (variable or fixed, with constraints such as I == 2*H), named tensors with
// a role (input, output, input-output), a dtype rule (the call's dtype T, or a fixed float32), a
// symbolic shape behind a batch prefix or a broadcast shape (weight-like, no batch prefix), and
// scalars. From it come the canonical kernel ABI (abi()), the kernel signature text of the prompt
// and the contract (kernel_signature()), the PTX parameter classes the static gate checks, the GPU
// worker's argument packing (kernels/abi_pack.h), the audit rules by role and the logical bytes of
// the roofline. Modelled on FlashInfer-Bench's Definition (axes, inputs, outputs, constraints),
// plus what kloop's contracts carry beyond it: the strides the ABI exposes and the broadcast rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/dtype.h"

namespace kloop::op {

// What the call does with a tensor. Inputs must be byte-identical after the call; outputs are
// fresh buffers the wrapper allocates, poisons and checks for unwritten elements; input-output
// tensors are written in place and compared against the reference's final bytes.
enum class Role { kInput, kOutput, kInputOutput };
std::string_view role_name(Role role); // "input", "output", "input_output"

// Element type of a tensor: the call's dtype T (float, __half or __nv_bfloat16), or float32 for
// every call (statistics a kernel returns in full precision, for example).
enum class DTypeRule { kCall, kFloat32 };

// A named size. Variable axes are kernel parameters (`int NAME`, in [min, max]); fixed axes are
// constants of the contract and not passed.
struct Axis {
  std::string name;
  bool variable = true;
  std::int64_t value = 0; // fixed axes only
  std::int64_t min = 1;   // variable axes: the contract's range (max at most INT32_MAX: `int`)
  std::int64_t max = 2147483647;
  std::string doc;
};

// axis == factor * of (I == 2*H); checked by validate() and on every call.
struct AxisConstraint {
  std::string axis;
  std::int64_t factor = 1;
  std::string of;
  std::string text() const; // "I == 2*H"
};

// A named tensor. A batched tensor has the shape [batch..., dims...]: the batch prefix collapses
// to `rows` rows, each row the dims flattened, contiguous within the row, rows at one row stride
// that the ABI exposes as `long long NAME_row_stride` (elements). A broadcast tensor has the shape
// [dims...] only (weight-like: the same for every row) and must be contiguous.
struct Tensor {
  std::string name;
  Role role = Role::kInput;
  DTypeRule dtype = DTypeRule::kCall;
  bool batched = true;
  std::vector<std::string> dims; // axis names, outermost first
  std::string doc;
  bool written() const { return role != Role::kInput; }
};

enum class ScalarType { kFloat32, kInt32, kInt64 };
std::string_view scalar_c_type(ScalarType type); // "float", "int", "long long"

struct Scalar {
  std::string name;
  ScalarType type = ScalarType::kFloat32;
  std::string doc;
};

struct Declaration {
  std::string name; // the contract's operator name, e.g. "weighted_rmsnorm"
  int version = 1;  // contract version
  std::vector<Axis> axes;
  std::vector<AxisConstraint> constraints;
  std::vector<Tensor> tensors; // in ABI order
  std::vector<Scalar> scalars; // in ABI order

  std::string id() const; // "weighted_rmsnorm/1"
  // Index of the axis / tensor named `name`, or -1.
  int axis_index(std::string_view name) const;
  int tensor_index(std::string_view name) const;
  bool has_batch() const; // some tensor is batched (the ABI then has `long long rows`)
  // The innermost axis of the batched tensors (H for RMSNorm): what format-1 dispatch keys
  // (h_min, h_max, h_multiple_of) and launch.dynamic_smem.bytes_per_h name. -1 without batch.
  int row_axis() const;
  // Elements of one row of tensor `t` (the product of its dims) for the given variable-axis
  // values (axes[i] for axis i; fixed axes use their value).
  std::int64_t row_elements(const Tensor& t, const std::vector<std::int64_t>& axes) const;
  // JSON of the declaration (contracts that include it hash it).
  nlohmann::json to_json() const;
};

// Why a declaration is malformed (unknown axis in dims or a constraint, duplicate names, an axis
// range outside [1, INT32_MAX], a batched tensor without dims, a contiguous-only input-output,
// ...), or nullopt. Registered operators are checked by a unit test.
std::optional<std::string> check_declaration(const Declaration& decl);

// One kernel parameter of the canonical ABI.
enum class AbiKind {
  kTensor,    // `const T* NAME` (input) or `T* NAME` (output, input-output)
  kRows,      // `long long rows`: product of the batch prefix
  kAxis,      // `int NAME`: a variable axis
  kRowStride, // `long long NAME_row_stride`: row stride of a batched tensor, in elements
  kScalar,    // `float NAME`, `int NAME` or `long long NAME`
};

struct AbiParam {
  std::string name;
  AbiKind kind = AbiKind::kTensor;
  int index = -1;        // tensor, axis or scalar index in the declaration (-1 for rows)
  std::string c_type;    // "const T*", "T*", "const float*", "long long", "int", "float"
  std::size_t bytes = 8; // 8 for pointers and long long, 4 for int and float
  // PTX spellings the static gate accepts for this parameter: .u64/.b64 for pointers, .u64/.s64/
  // .b64 for long long, .u32/.s32/.b32 for int, .f32/.b32 for float.
  std::vector<std::string> ptx_types;
};

// The canonical ABI of a declaration: tensor pointers in declaration order, then rows (when some
// tensor is batched), then the variable axes in declaration order, then one row stride per batched
// tensor in declaration order, then the scalars. For weighted_rmsnorm/1 that is exactly
// (const T* x, const T* weight, T* y, long long rows, int H, long long x_row_stride,
//  long long y_row_stride, float eps).
std::vector<AbiParam> abi(const Declaration& decl);

// `extern "C" __global__ void ENTRY(<abi>)` on one line, as the contract and the prompt show it.
std::string kernel_signature(const Declaration& decl);

} // namespace kloop::op
