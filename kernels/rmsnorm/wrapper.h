// Host-side logic of the trusted wrapper of weighted_rmsnorm/1 (../shared/docs/DESIGN.md,
// "Candidate format"): the part that decides, from tensor metadata, device facts and the
// candidate's manifest, whether a validated call runs the candidate kernel, the trusted reference
// kernel, or nothing (rows == 0), and with which launch configuration. It never touches a device,
// so it is unit-tested on HostTensor metadata; the GPU worker (evaluator/gpu_worker/) feeds it
// device addresses and occupancy numbers and performs the launch. Validation itself is
// rmsnorm::validate (reference.h), the same function the CPU reference runs, so both paths reject
// identical inputs with identical declared errors before any launch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/rmsnorm/manifest.h"
#include "kernels/tensor.h"

namespace kloop::rmsnorm {

// Facts about the device the call runs on (cudaGetDeviceProperties on the GPU machine).
struct DeviceInfo {
  int cc_major = 9; // compute capability
  int cc_minor = 0;
  int sm_count = 132;
  // cudaDevAttrMaxSharedMemoryPerBlockOptin; 227 KiB on sm_90 (manifest.h kMaxDynamicSmemBytes).
  std::int64_t max_dynamic_smem_optin = kMaxDynamicSmemBytes;
  // sm_90a code runs only on compute capability exactly 9.0 (NVCC docs, "arch-specific features").
  bool has_sm90a() const { return cc_major == 9 && cc_minor == 0; }
  nlohmann::json to_json() const;
};

// Largest gridDim.x on sm_90 (CUDA C++ Programming Guide, "Technical specifications": 2^31 - 1).
inline constexpr std::int64_t kMaxGridX = 2147483647LL;

// What the kernel would see for one validated call. Addresses are those of logical element 0 of
// each tensor in the address space the kernel runs in (device addresses on the GPU worker).
struct CallGeometry {
  DType dtype = DType::kFloat32;
  std::int64_t rows = 0; // product of x's outer dims
  std::int64_t h = 0;    // x.shape[-1]
  // Row stride of the [rows, H] view in elements; nullopt when the outer dims do not collapse to
  // one stride (kloop::collapsed_row_stride).
  std::optional<std::int64_t> x_row_stride;
  std::int64_t x_last_stride = 1; // stride of x's last dim (elements); 1 when h == 1
  bool weight_contiguous = true;  // weight stride 1 (or h == 1)
  std::int64_t y_row_stride = 0;  // the fresh output is contiguous: h
  std::uintptr_t x_addr = 0, w_addr = 0, y_addr = 0;
  nlohmann::json to_json() const;
};

// Geometry of validated inputs (rmsnorm::validate(x, weight, eps).ok()) with a fresh contiguous
// output of x's shape. `*_addr` are the addresses of element 0 (storage base + offset * bytes).
CallGeometry call_geometry(const HostTensor& x, const HostTensor& weight, std::uintptr_t x_addr,
                           std::uintptr_t w_addr, std::uintptr_t y_addr);

enum class Route { kCandidate, kReference, kNoLaunch };
std::string_view route_name(Route route); // "candidate", "reference", "no_launch"

// The dispatch decision and, when not the candidate, the first predicate clause that failed,
// e.g. "H=1009 is not a multiple of h_multiple_of=128".
struct DispatchDecision {
  Route route = Route::kReference;
  std::string why; // empty for kCandidate
};

// Evaluates the manifest's dispatch predicate in a fixed order: rows == 0 -> no launch; dtype has
// an entry point; target sm_90a only on a device that has it; h_min <= H <= h_max; H multiple of
// h_multiple_of; last-dim stride 1; outer dims collapse to one row stride; x_rows contiguous needs
// row stride == H; weight contiguous; x, weight, y addresses and both row strides in bytes are
// multiples of alignment_bytes; the launch grid fits gridDim.x. Never throws.
DispatchDecision decide_dispatch(const Manifest& manifest, const CallGeometry& call,
                                 const DeviceInfo& device);

// Launch configuration for the candidate (DESIGN.md "launch").
struct LaunchPlan {
  std::int64_t grid = 0;         // blocks in x
  int block = 0;                 // threads per block
  std::int64_t dynamic_smem = 0; // bytes: fixed_bytes + bytes_per_h * H
  bool raise_smem_limit = false; // > 48 KiB: set cudaFuncAttributeMaxDynamicSharedMemorySize
  nlohmann::json to_json() const;
};

// Default dynamic shared memory a kernel gets without opting in (48 KiB on every CUDA device).
inline constexpr std::int64_t kDefaultDynamicSmemBytes = 48 * 1024;

// Blocks of the per_rows rule: ceil(rows / rows_per_block).
std::int64_t per_rows_blocks(const LaunchRule& launch, std::int64_t rows);

// Plans the launch: per_rows -> ceil(rows / rows_per_block) blocks; persistent ->
// min(blocks_per_sm * sm_count, per_rows count), where blocks_per_sm is what
// cudaOccupancyMaxActiveBlocksPerMultiprocessor returned for (block_threads, dynamic smem).
// A persistent plan with blocks_per_sm <= 0 has grid 0: the caller reports that the kernel does
// not fit on an SM (a launch failure of the candidate). Needs rows >= 1.
LaunchPlan plan_launch(const Manifest& manifest, const CallGeometry& call, const DeviceInfo& device,
                       int blocks_per_sm);

// Launch counts per path over a run (reported as gate evidence).
struct PathCounts {
  std::int64_t candidate = 0;
  std::int64_t reference = 0;
  std::int64_t no_launch = 0;
  void add(Route route);
  nlohmann::json to_json() const; // {"candidate": n, "reference": n, "no_launch": n}
};

} // namespace kloop::rmsnorm
