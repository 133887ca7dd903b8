// The candidate manifest of contract weighted_rmsnorm/1 (../shared/docs/DESIGN.md, "Candidate
// format"): entry points per dtype, launch rule, dispatch predicate, target. Parsing validates
// every key against the contract; an error names the field and the allowed values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace kloop::rmsnorm {

inline constexpr std::string_view kContractId = "weighted_rmsnorm/1";
inline constexpr std::size_t kMaxSourceBytes = 256 * 1024;  // kernel.cu size limit
inline constexpr std::size_t kMaxManifestBytes = 16 * 1024; // manifest.json size limit
// Largest dynamic shared memory a block may opt into on sm_90: 227 KiB
// (CUDA C++ Programming Guide, "Compute capability 9.0", max shared memory per block, opt-in).
inline constexpr std::int64_t kMaxDynamicSmemBytes = 227 * 1024;

enum class GridKind { kPerRows, kPersistent };
enum class RowLayout { kAnyStride, kContiguous };

struct LaunchRule {
  int block_threads = 256; // multiple of 32, 32..1024
  int rows_per_block = 1;  // >= 1
  GridKind grid = GridKind::kPerRows;
  std::int64_t smem_fixed_bytes = 0; // dynamic smem = fixed + per_h * H, bytes
  std::int64_t smem_bytes_per_h = 0;
  std::int64_t dynamic_smem_bytes(std::int64_t h) const {
    return smem_fixed_bytes + smem_bytes_per_h * h;
  }
};

struct Dispatch {
  std::int64_t h_min = 1;
  std::int64_t h_max = 65536;
  std::int64_t h_multiple_of = 1;
  RowLayout x_rows = RowLayout::kAnyStride;
  int alignment_bytes = 4; // power of two in [1, 16]
};

struct Manifest {
  std::map<DType, std::string> entry_points; // dtype -> extern "C" __global__ symbol
  LaunchRule launch;
  Dispatch dispatch;
  std::string target = "sm_90"; // "sm_90" or "sm_90a"
  std::string known_limits;     // free text from the generator
  std::string build_command;    // optional free text: the generator's declared build command
  std::string claimed_target;   // optional free text: the generator's claimed hardware target
};

struct ManifestError {
  std::string field;   // JSON path of the offending key, e.g. "launch.block_threads"
  std::string message; // names the field, the value and the allowed values
};

// Parses and validates manifest.json text against the contract and the kernel source (every entry
// point must be defined in `source`). Returns the manifest or the first error found.
struct ManifestParse {
  std::optional<Manifest> manifest;
  std::vector<ManifestError> errors; // empty iff manifest is set
};
ManifestParse parse_manifest(std::string_view manifest_text, std::string_view kernel_source);

// True when `kernel_source` defines `extern "C" __global__ void NAME(` (whitespace, newlines and
// __launch_bounds__(...) tolerated; commented-out code ignored).
bool source_defines_entry_point(std::string_view kernel_source, const std::string& name);

// Human-readable dispatch predicate, e.g. "dtype in {float16,bfloat16} && 1<=H<=65536 && ...".
std::string dispatch_predicate_text(const Manifest& manifest);

} // namespace kloop::rmsnorm
