// The offline generator's kernel family for row_softmax/1: a parameterised code generator that
// emits CUDA source text (kernel.cu, three extern "C" entries: float32, float16, bfloat16) and a
// manifest.json. Every member computes in float32 with the contract's non-finite semantics,
// rounds once with __float2half_rn / __float2bfloat16_rn, handles any row count (64-bit row
// offsets, grid-stride row loop), any row stride and any width up to 2^24 (the rest of a row past
// the register cache is streamed and re-read), and decides per call between vector and scalar
// accesses from the alignment of x, y and both row strides. The in-tree baseline
// (kernels/softmax/baseline) is the member flagship_variant() names, emitted by this code (a unit
// test compares the two byte for byte). family_policy.h picks members from public reports.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kloop::softmax {

// How a row's (max, sum) is computed.
enum class Pass {
  kOnline,  // one pass: each thread keeps a running max and a sum rescaled when the max grows;
            // the group merges (max, sum) pairs: one combine (one barrier past a warp) per row
  kTwoPass, // the max first (a combine), then the sum of exp(x - max) (a second combine); the
            // cached part is read once from memory, the streamed rest twice more
};

// Which grid the wrapper launches (manifest launch.grid).
enum class FamilyGrid {
  kPerRows,    // ceil(rows / rows_per_block) blocks; needs a fixed threads_per_row
  kPersistent, // occupancy-limited grid; the kernel loops over rows (grid stride)
};

// All parameters of one family member. validate() states the constraints.
struct Variant {
  // Bytes per vector access of x and y: 0 = scalar element accesses, 8 or 16.
  int vec_bytes = 16;
  // Threads per block: a power of two in [64, 1024]. The entries' launch bound asks for
  // 1024 / block_threads blocks per SM, i.e. at most 64 registers per thread.
  int block_threads = 512;
  // Threads cooperating on one row: a power of two in [1, block_threads]; 0 = chosen per call
  // (the fewest threads whose caches hold the row, widened while the grid still has twice as many
  // row slots as rows; needs the persistent grid).
  int threads_per_row = 0;
  // Units (vectors, or elements for vec_bytes 0) each thread keeps in registers between reading
  // and writing its part of a row, in [1, 16]; their registers (cached_units * vec_bytes / 4, or
  // cached_units) at most 28 of the 64. The rest of a row is streamed: read again for the output.
  int cached_units = 6;
  Pass pass = Pass::kOnline;
  FamilyGrid grid = FamilyGrid::kPersistent;

  int rows_per_block() const; // block_threads / threads_per_row, or 1 when chosen per call
  bool operator==(const Variant&) const = default;
};

// Why the variant is not a valid family member (the first violated constraint, naming the field
// and the allowed values), or nullopt when it is valid.
std::optional<std::string> validate(const Variant& variant);

// Canonical name, e.g. "v16-b512-tauto-c6-online-pers" or "v0-b256-t32-c8-twopass-rows".
// variant_by_name(variant_name(v)) == v for every valid v.
std::string variant_name(const Variant& variant);
// Parses a canonical name (any valid member); nullopt for any other text or an invalid member.
std::optional<Variant> variant_by_name(std::string_view name);

// The curated set, safest first: the variants the policy moves between (all_variants()[0] is the
// safe general default: scalar, two passes, a fixed warp per row on a per-rows grid).
const std::vector<Variant>& all_variants();

// The variant the in-tree baseline is: 16-byte vectors, 512-thread persistent blocks, threads
// per row chosen per call, 6 cached vectors (7 spill 8 bytes under NVRTC for 16-bit types),
// online.
Variant flagship_variant();

// One generated candidate: the two files plus a name and a one-paragraph rationale.
struct GeneratedCandidate {
  std::string kernel_cu;     // device source; entries softmax_f32, softmax_f16, softmax_bf16
  std::string manifest_json; // contract row_softmax/1 manifest, pretty-printed
  std::string name;          // variant_name(variant)
  std::string rationale;     // why this variant, for the prompt/response record
};

// Emits the candidate for a valid variant. Deterministic: the same variant gives the same bytes.
// Throws std::invalid_argument (the message of validate()) for an invalid variant.
GeneratedCandidate generate(const Variant& variant, std::string_view rationale = {});

// The kernel.cu text alone: a comment naming the variant, then emit_kernel_body().
std::string emit_kernel_source(const Variant& variant);
// Everything after the leading comment (from the first #include): what the baseline's kernel.cu
// holds after its own comment for flagship_variant().
std::string emit_kernel_body(const Variant& variant);
// The manifest.json text alone.
std::string emit_manifest(const Variant& variant);

} // namespace kloop::softmax
