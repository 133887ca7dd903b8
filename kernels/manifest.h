// The candidate manifest of any registered operator (DESIGN.md "Candidate format";
// docs/CANDIDATE-FORMAT.md), read against the operator's declaration. Format 1 is one entry point
// per dtype, one launch rule and one dispatch predicate; format 2 is an ordered list of up to
// kMaxVariants variants, each with a `when` (dtypes, axis ranges and multiples, row layouts,
// alignment, a bound on rows or elements for kernels with 32-bit indexing), its entry points and
// its launch rule: the first variant whose `when` holds serves a call, the trusted reference
// serves the rest. A format-1 manifest is read as one variant. The dispatch keys follow the
// declaration's names: `<axis>_min`, `<axis>_max`, `<axis>_multiple_of` for each variable axis
// (lower case: h_min for RMSNorm's H), `<tensor>_rows` for each batched input tensor (x_rows),
// and launch.dynamic_smem.bytes_per_<row axis> (bytes_per_h). Every error names the JSON path of
// the field, the value found and the allowed values; all problems are collected, so one feedback
// round fixes them all. Whether each entry point exists with the declared parameters is decided
// from the compiled module by the static gate, not here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/declaration.h"
#include "kernels/dtype.h"

namespace kloop::op {

inline constexpr std::size_t kMaxSourceBytes = 256 * 1024;  // kernel.cu size limit
inline constexpr std::size_t kMaxManifestBytes = 16 * 1024; // manifest.json size limit
// Largest dynamic shared memory a block may opt into on sm_90: 227 KiB
// (CUDA C++ Programming Guide, "Compute capability 9.0", max shared memory per block, opt-in).
inline constexpr std::int64_t kMaxDynamicSmemBytes = 227 * 1024;
// Variants of a format-2 manifest: at most 8 (issue 25).
inline constexpr int kMaxVariants = 8;

enum class GridKind { kPerRows, kPersistent };
enum class RowLayout { kAnyStride, kContiguous };

struct LaunchRule {
  int block_threads = 256; // multiple of 32, 32..1024
  int rows_per_block = 1;  // >= 1
  GridKind grid = GridKind::kPerRows;
  std::int64_t smem_fixed_bytes = 0; // dynamic smem = fixed + per_unit * (row axis value), bytes
  std::int64_t smem_bytes_per_unit = 0;
  std::int64_t dynamic_smem_bytes(std::int64_t width) const {
    return smem_fixed_bytes + smem_bytes_per_unit * width;
  }
};

// Inclusive range and step of one variable axis.
struct AxisRange {
  std::int64_t min = 1;
  std::int64_t max = 2147483647;
  std::int64_t multiple_of = 1;
};

// When a variant serves a call (every clause must hold).
struct When {
  std::vector<DType> dtypes;     // empty: every dtype the variant has an entry point for
  std::vector<AxisRange> axes;   // indexed like Declaration::axes (fixed axes: unused)
  std::map<int, RowLayout> rows; // batched input tensor index -> row layout (default any)
  int alignment_bytes = 4;       // power of two in [1, 16]: every pointer and row stride
  std::optional<std::int64_t> max_rows;
  // Bound for 32-bit indexing: every batched tensor spans at most this many elements, counted
  // from its element 0 to its last element ((rows - 1) * row stride + row elements).
  std::optional<std::int64_t> max_elements;
};

struct Variant {
  std::string name; // format 2: "name" or "variant<i>"; format 1: "default"
  When when;
  std::map<DType, std::string> entry_points; // dtype -> extern "C" __global__ symbol
  LaunchRule launch;
};

struct Manifest {
  int format = 1;
  std::vector<Variant> variants; // at least one
  std::string target = "sm_90";  // "sm_90" or "sm_90a"
  std::string known_limits;      // free text from the generator
  std::string build_command;     // optional free text: the generator's declared build command
  std::string claimed_target;    // optional free text: the generator's claimed hardware target
  // Every entry point of every variant, each once, in variant order.
  std::vector<std::string> entry_names() const;
};

struct ManifestError {
  std::string field;   // JSON path of the offending key, e.g. "launch.block_threads"
  std::string message; // names the field, the value and the allowed values
};

struct ManifestParse {
  std::optional<Manifest> manifest;
  std::vector<ManifestError> errors; // empty iff manifest is set
};

// Parses and validates manifest.json text against the operator's declaration and contract id.
ManifestParse parse_manifest(const Declaration& decl, std::string_view manifest_text);

// Human-readable dispatch predicate. Format 1: "dtype in {float32,float16,bfloat16} &&
// 1<=H<=65536 && H%1==0 && any row stride && pointers and row stride 2-byte aligned"; format 2:
// one such clause per variant, "v0 <name>: ...; v1 <name>: ...", then "else reference".
std::string dispatch_predicate_text(const Declaration& decl, const Manifest& manifest);

// The manifest schema of format 1 for the declaration, as the contract documents it (the
// weighted_rmsnorm/1 contract's "manifest_schema").
nlohmann::json format1_schema(const Declaration& decl);

// Lower-case name of an axis as manifest keys spell it ("h" for H).
std::string key_name(std::string_view axis_name);

} // namespace kloop::op
