// The offline generator's kernel family for weighted_rmsnorm/1: a parameterised code generator
// that emits CUDA source text (kernel.cu, three extern "C" entries: float32, float16, bfloat16) and
// a manifest.json whose dispatch predicate admits exactly the calls the variant handles. Every
// variant accumulates in fp32, rounds with __float2half_rn/__float2bfloat16_rn, handles any row
// count (64-bit row offsets, grid-stride row loop) and any row stride, and keeps register use
// bounded at compile time (cached vectors + streaming remainder). docs/OFFLINE.md describes the
// parameters and the design space; family_policy.h picks variants from public reports.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kloop::rmsnorm {

// How a row's partial sums of squares are combined across the threads of that row.
enum class Reduction {
  kShuffle,    // warp xor-shuffles; rows wider than a warp add per-warp partials in shared memory
               // (two buffers alternating by row iteration: one barrier per row)
  kSharedTree, // every thread writes its partial to shared memory; barrier-separated tree
};

// Which grid the wrapper launches (manifest launch.grid).
enum class FamilyGrid {
  kPerRows,    // ceil(rows / rows_per_block) blocks
  kPersistent, // occupancy-limited grid; the kernel loops over rows (grid stride)
};

// All parameters of one family member. validate() states the constraints.
struct Variant {
  // Bytes per vector access of x/y in the row body: 0 = scalar element accesses, 8 or 16.
  int vec_bytes = 16;
  // Threads cooperating on one row: a power of two in [4, block_threads]; 0 = chosen at run time
  // per call from H (smallest power of two giving <= cached_vecs vectors per thread, at least 4,
  // at most block_threads), then widened while the grid has at least twice as many row slots as
  // rows (few rows: more threads per row, so every block has work); run-time choice needs the
  // persistent grid.
  int threads_per_row = 32;
  // Threads per block: multiple of 32 in [32, 1024]. With a fixed threads_per_row,
  // rows_per_block = block_threads / threads_per_row.
  int block_threads = 256;
  // Vectors per thread kept in registers between the sum-of-squares pass and the output pass
  // (bounded at compile time: cached_vecs * vec_bytes / 4 registers). Vectors beyond the cached
  // part are streamed: read once for the sum and re-read (L2) for the output. 0 = two passes.
  int cached_vecs = 4;
  Reduction reduction = Reduction::kShuffle;
  FamilyGrid grid = FamilyGrid::kPerRows;
  // Per-row alignment peel: a scalar head up to the next vec_bytes boundary of the x row, a vector
  // body, a scalar tail. Lets rows at any element offset (odd widths, sliced views) use vector
  // loads; the manifest then needs only element alignment (alignment_bytes 2). Without the peel
  // the manifest requires alignment_bytes = vec_bytes. Ignored for vec_bytes 0.
  bool peel = true;
  // Stage the weight in shared memory as vec_bytes/elem copies, copy p shifted by p elements, so
  // a peeled row at any phase reads its weight with aligned 16-byte shared loads (needs peel and
  // vec_bytes > 0; costs vec_bytes * H bytes of dynamic shared memory, which bounds h_max).
  bool stage_weight = false;
  // Load the register-cached part of each x row with evict-first loads (__ldcs, PTX ld.global.cs):
  // x is read once, so its lines should not push the weight or re-read data out of L2. Needs
  // cached_vecs > 0 (the streamed remainder is re-read and keeps normal loads). Name suffix "-ef".
  bool evict_first = false;
  // Per-call evict_last loads (name suffix "-el"): on calls whose x exceeds 64 MiB the
  // register-cached part of each x row is loaded under an L2 evict_last cache policy (PTX
  // createpolicy.fractional.L2::evict_last + ld.global.L1::evict_last.L2::cache_hint, the loads
  // torch.compile's Triton kernels issue for RMSNorm's first pass); smaller calls keep read-only
  // loads (__ldg). Measured on the H200 (docs/RESULTS.md, 2026-11-30 sixth session, cold, L2
  // flushed): `v16-tauto-b256-c4-shfl-pers-peel-el` bf16 65536 x 4096 272.6 us, float32 535.4 us,
  // against 290 us and 569 us without. Unlike the baseline's revision-2 rule (half precision only,
  // one cache-hinted load whose policy changes per call), it covers float32 and switches between
  // two load instructions. On a composite it applies to the variant's own path. Needs vec_bytes 8
  // or 16 and cached_vecs > 0; not with evict_first.
  bool evict_last = false;
  // Per-call store hint (name suffix "-ps"): calls whose x exceeds 64 MiB write y with ordinary
  // write-back vector stores, smaller calls keep streaming stores (__stcs, st.global.cs) so x stays
  // in L2 for warm repeated calls. The 64 MiB threshold lies between two H200 measurements
  // (docs/RESULTS.md, 2026-11-30: streaming faster warm at 32 MiB of x, write-back faster at 512
  // MiB and up). On a composite it applies to the variant's own (peeled) path only. Needs
  // vec_bytes 8 or 16.
  bool plain_stores = false;
  // Warp rows (name suffix "-wr"): with the run-time threads-per-row rule, a row of at most
  // 2 * 32 * cached_vecs vectors gets one warp (shuffle reduction only, no block barrier) instead
  // of the several warps its cache would need; the vectors beyond the cache are re-read from L1/L2
  // for the output pass. Needs threads_per_row 0, cached_vecs > 0, the shuffle reduction and
  // block_threads > 32.
  bool warp_rows = false;
  // Software-pipelined row loop (name suffix "-pf"): the register-cached part of the block's next
  // row is loaded at the top of each iteration, so those loads are in flight while the current row
  // is reduced (barrier included) and written. Doubles the cache's registers (the launch bound
  // then allows more registers per thread, see emit_entry). No gain measured on the H200 (bf16
  // 65536 x 4096: 291 us with, 290 us without). Needs cached_vecs > 0 and the persistent grid (on
  // a per_rows grid a block has no next row); not with baseline_aligned (launch bound).
  bool prefetch = false;
  // Composite variant (name suffix "-bl"): every call whose x, y and weight pointers and both row
  // strides are 16-byte aligned runs the in-tree baseline's own design (kernels/rmsnorm/baseline,
  // embedded at build time: lane groups for rows <= 2 KiB, two rows per block when half the
  // register cache holds a row, else block per row); every other call runs this variant's peeled
  // vector path, where the baseline falls back to scalar accesses. The decision is uniform per
  // launch (no divergence). Needs vec_bytes 16, peel, threads_per_row 0, block_threads 256 and the
  // persistent grid (the baseline's own launch geometry), and no staged weight.
  bool baseline_aligned = false;
  // Float32 to the baseline (name suffix "-f32bl", after "-bl"): on a composite, the float32 entry
  // is the in-tree baseline's own entry (every float32 call, aligned or not, runs bl::rms_impl
  // under the baseline's launch bound), so float32 compiles to the baseline's code; float16 and
  // bfloat16 stay composite. Why: the combined float32 entry is register-allocated as a whole (the
  // H200 run of 2026-11-30 timed its aligned float32 path 2-3 % slower than the baseline's at 64
  // and 512 rows x 4096, cold, docs/RESULTS.md). The trade: unaligned float32 calls lose the peel's
  // vector loads (the baseline's scalar path already moves 4 bytes per lane, so the peel gains
  // less there than on 2-byte types). Needs baseline_aligned.
  bool float32_baseline = false;
  // Half types to the baseline (suffixes "-f16bl", "-bf16bl", after "-f32bl"): the same as
  // float32_baseline for the float16 or bfloat16 entry. The composite's combined entry carries a
  // small penalty on launch-bound calls (the H200 runs of 2026-11-30 judged -wr-bl composites 1-3 %
  // slower than the baseline on a few 8-512 x 4096 states, in either half type, docs/RESULTS.md);
  // handing that dtype to the baseline removes it at the cost of that dtype's odd-width gains
  // (0.38-0.52 of the baseline's time at 32768 x 1009 and 4096 x 4099). Needs baseline_aligned,
  // and at least one dtype must stay composite (otherwise the variant is the baseline).
  bool float16_baseline = false;
  bool bfloat16_baseline = false;

  // Whether the entry for `type` ("float", "__half", "__nv_bfloat16") is the baseline's own.
  bool baseline_entry(std::string_view type) const;
  int rows_per_block() const; // block_threads / threads_per_row, or 1 when chosen at run time
  bool operator==(const Variant&) const = default;
};

// Why the variant is not a valid family member (first violated constraint, naming the field and
// the allowed values), or nullopt when it is valid.
std::optional<std::string> validate(const Variant& variant);

// Canonical name, e.g. "v16-t32-b256-c4-shfl-rows-peel" or
// "v16-tauto-b512-c4-shfl-pers-peel-ws-ef" (suffixes in the order -ws, -ef, -el, -ps, -wr, -pf,
// -bl, -f32bl, -f16bl, -bf16bl).
// variant_by_name(variant_name(v)) == v for every valid v.
std::string variant_name(const Variant& variant);

// Parses a canonical name (any valid member, not only the curated ones); nullopt when the text is
// not a canonical name or the variant it names is invalid.
std::optional<Variant> variant_by_name(std::string_view name);

// The curated set, safest first: the variants the GPU worker sweeps and the policy moves between.
// all_variants()[0] is the safe general default (scalar, two-pass, shared-memory tree).
const std::vector<Variant>& all_variants();

// One generated candidate: the two files plus a name and a one-paragraph rationale.
struct GeneratedCandidate {
  std::string kernel_cu;     // device source; entries rms_f32, rms_f16, rms_bf16
  std::string manifest_json; // contract weighted_rmsnorm/1 manifest, pretty-printed
  std::string name;          // variant_name(variant)
  std::string rationale;     // why this variant, for the prompt/response record
};

// Emits the candidate for a valid variant. Deterministic: the same variant gives the same bytes.
// Throws std::invalid_argument (message from validate()) for an invalid variant, and
// std::logic_error when a composite cannot be cut from the embedded baseline (its layout changed).
GeneratedCandidate generate(const Variant& variant, std::string_view rationale = {});

// The kernel.cu text alone (used by generate()).
std::string emit_kernel_source(const Variant& variant);
// The manifest.json text alone (used by generate()).
std::string emit_manifest(const Variant& variant);

// The in-tree baseline's kernel.cu as embedded at build time (cmake/embed_text.cmake); used by
// variants with baseline_aligned.
std::string_view embedded_baseline_source();

// Largest H the variant admits: 65536, or less where staged weight copies must fit the 227 KiB
// shared memory of an sm_90 block (op::kMaxDynamicSmemBytes in kernels/manifest.h, minus static
// smem).
int variant_h_max(const Variant& variant);

} // namespace kloop::rmsnorm
