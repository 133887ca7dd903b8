// Host-side logic of the trusted wrapper of every operator (DESIGN.md "Candidate format"): the
// part that decides, from tensor metadata, device facts and the candidate's manifest, whether a
// validated call runs a manifest variant's entry point, the trusted reference kernel, or nothing
// (an empty call), and with which launch configuration. It never touches a device, so it is
// unit-tested on HostTensor metadata; the GPU worker (evaluator/gpu_worker/) feeds it device
// addresses and occupancy numbers and performs the launch. Validation itself is the operator's
// (Operator::validate), the same function the CPU reference runs, so both paths reject identical
// inputs with identical declared errors before any launch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/abi_pack.h"
#include "kernels/call.h"
#include "kernels/declaration.h"
#include "kernels/manifest.h"
#include "kernels/tensor.h"

namespace kloop::op {

// Facts about the device the call runs on (cudaGetDeviceProperties on the GPU machine).
struct DeviceInfo {
  int cc_major = 9; // compute capability
  int cc_minor = 0;
  int sm_count = 132;
  // cudaDevAttrMaxSharedMemoryPerBlockOptin; 227 KiB on sm_90 (kMaxDynamicSmemBytes).
  std::int64_t max_dynamic_smem_optin = kMaxDynamicSmemBytes;
  // sm_90a code runs only on compute capability exactly 9.0 (NVCC docs, "arch-specific features").
  bool has_sm90a() const { return cc_major == 9 && cc_minor == 0; }
  nlohmann::json to_json() const;
};

// Largest gridDim.x on sm_90 (CUDA C++ Programming Guide, "Technical specifications": 2^31 - 1).
inline constexpr std::int64_t kMaxGridX = 2147483647LL;

// Where one tensor of a call lives, as the kernel would see it.
struct TensorGeometry {
  std::uintptr_t addr = 0; // address of logical element 0 in the kernel's address space
  // Batched tensors: the row stride of the [rows, row] view in elements; nullopt when the batch
  // dims do not collapse to one stride (kloop::collapsed_row_stride). Broadcast tensors: unused.
  std::optional<std::int64_t> row_stride;
  std::int64_t last_stride = 1; // stride of the last dim (1 when it has size 1)
  bool contiguous = true;       // broadcast tensors: row-major without gaps
  // Batched tensors: elements from element 0 to the last one, (rows-1)*row_stride + row.
  std::int64_t span_elements = 0;
};

// What the kernel would see for one validated call.
struct CallGeometry {
  DType dtype = DType::kFloat32;
  std::int64_t rows = 0;
  std::vector<std::int64_t> axes;      // indexed like Declaration::axes
  std::vector<TensorGeometry> tensors; // indexed like Declaration::tensors
  bool empty() const;                  // rows == 0 or an axis of size 0: nothing to launch
  nlohmann::json to_json(const Declaration& decl) const;
};

// The geometry of a validated call (op.validate(call).ok()) with fresh contiguous outputs.
// `addresses` holds one address per declared tensor (element 0; device addresses on the GPU
// worker): the passed tensors' and the outputs' the caller allocated.
CallGeometry call_geometry(const Declaration& decl, const CallArgs& call, const Validated& v,
                           const std::vector<std::uintptr_t>& addresses);

enum class Route { kCandidate, kReference, kNoLaunch };
std::string_view route_name(Route route); // "candidate", "reference", "no_launch"

// The dispatch decision: the route, the variant that serves the call (index into
// Manifest::variants; -1 unless kCandidate) and, when not the candidate, why: the first clause
// that failed, e.g. "H=1009 is not a multiple of h_multiple_of=128" (with several variants, each
// variant's first failed clause, "variant0: ...; variant1: ...").
struct DispatchDecision {
  Route route = Route::kReference;
  int variant = -1;
  std::string why; // empty for kCandidate
};

// Evaluates the variants in order, each clause in a fixed order: empty call -> no launch; the
// variant's dtypes and entry points; target sm_90a only on a device that has it; each variable
// axis in [min, max] and a multiple of multiple_of; every batched tensor's last-dim stride 1 and
// batch dims collapsing to one row stride; `<tensor>_rows` contiguous needs row stride == row
// elements; broadcast tensors contiguous; every pointer and every row stride in bytes a multiple
// of alignment_bytes; rows and spans within max_rows / max_elements; the launch grid fits
// gridDim.x. The first variant whose clauses all hold serves; none: the reference. Never throws.
DispatchDecision decide_dispatch(const Declaration& decl, const Manifest& manifest,
                                 const CallGeometry& call, const DeviceInfo& device);

// Launch configuration of a variant (DESIGN.md "launch").
struct LaunchPlan {
  std::int64_t grid = 0;         // blocks in x
  int block = 0;                 // threads per block
  std::int64_t dynamic_smem = 0; // bytes: fixed_bytes + bytes_per_<row axis> * width
  nlohmann::json to_json() const;
};

// Default dynamic shared memory a kernel gets without opting in (48 KiB on every CUDA device).
inline constexpr std::int64_t kDefaultDynamicSmemBytes = 48 * 1024;

// Blocks of the per_rows rule: ceil(rows / rows_per_block).
std::int64_t per_rows_blocks(const LaunchRule& launch, std::int64_t rows);

// Row width of a call: the value of the declaration's row axis (1 without one).
std::int64_t row_width(const Declaration& decl, const CallGeometry& call);

// Plans the launch: per_rows -> ceil(rows / rows_per_block) blocks; persistent ->
// min(blocks_per_sm * sm_count, per_rows count), where blocks_per_sm is what
// cudaOccupancyMaxActiveBlocksPerMultiprocessor returned for (block_threads, dynamic smem). A
// persistent plan with blocks_per_sm <= 0 has grid 0: the caller reports that the kernel does not
// fit on an SM (a launch failure of the candidate). Needs rows >= 1.
LaunchPlan plan_launch(const LaunchRule& launch, std::int64_t rows, std::int64_t width,
                       const DeviceInfo& device, int blocks_per_sm);

// The ABI values of one call (abi_pack.h) from its geometry and validated scalars: every
// tensor's address, rows, the axes, each batched tensor's row stride, the scalars.
AbiValues abi_values(const CallGeometry& call, const Validated& v);

// Launch counts per path over a run (reported as gate evidence), and per variant.
struct PathCounts {
  std::int64_t candidate = 0;
  std::int64_t reference = 0;
  std::int64_t no_launch = 0;
  std::vector<std::int64_t> per_variant; // candidate launches of each variant
  void add(Route route, int variant = -1);
  nlohmann::json to_json() const; // {"candidate": n, "reference": n, "no_launch": n[,
                                  //  "per_variant": [...]]}
};

} // namespace kloop::op
