// Static inspection (gate `static`) of a built candidate, no GPU needed. From the ptxas report in
// the NVRTC log: registers, spills, stack frame, static shared memory and barriers per entry point
// (information). From the compiled module's PTX (evaluator/ptx_module.h), never from the source
// text: the kernels the module defines with their parameter lists; every entry point of every
// manifest variant must be one of them with exactly the parameter classes of the operator's
// canonical ABI (op::abi; weighted_rmsnorm/1's eight parameters) (a missing entry is rejected here,
// naming the kernels the module does define); kernels the manifest does not name (a library's
// own, such as cub's EmptyKernel) are allowed, never launched, and listed in the evidence. Then
// the forbidden constructs, each a failure naming the PTX line: module-scope data the module can
// write (ptx_rules.cpp says how that is decided; read-only data is allowed), %clock / %clock64 /
// %clock_hi / %globaltimer reads, device malloc/free, printf, assert (__assertfail), trap/brkpt.
// From the SASS, when cuobjdump is installed: local-memory traffic (LDL/STL) and the widest global
// load/store per entry point (information; `not_run` when the tool is absent).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"
#include "evaluator/ptx_module.h"
#include "kernels/declaration.h"
#include "kernels/manifest.h"

namespace kloop::evaluator {

// ptxas -v figures for one function (bytes unless named otherwise; -1 when not reported).
struct PtxasResources {
  int registers = -1;
  int barriers = 0;
  long stack_frame_bytes = -1;
  long spill_store_bytes = -1;
  long spill_load_bytes = -1;
  long smem_bytes = 0; // static shared memory
  nlohmann::json to_json() const;
};

// Function name -> resources, from the "ptxas info" lines of an NVRTC log.
std::map<std::string, PtxasResources> parse_ptxas_report(std::string_view log);

// One `.entry` of a PTX module with its parameter types (".u64", ".u32", ".f32", ...; ".b8[16]"
// for an aggregate) and, for a C++ (mangled) name, its demangled spelling.
struct PtxEntry {
  std::string name;
  int line = 0; // 1-based line of ".entry NAME("
  std::vector<std::string> param_types;
  std::string demangled; // empty for an extern "C" name
  long long maxntid = 0; // threads per block __launch_bounds__ allows (.maxntid); 0: no bound
  long long reqntid = 0; // threads per block the kernel requires (.reqntid); 0: none
};
std::vector<PtxEntry> parse_ptx_entries(std::string_view ptx);

// Why `entry` cannot be launched with the canonical kernel ABI of `decl` (op::abi: the PTX classes
// each parameter may have), or empty when its parameter classes match; the one-argument form is
// weighted_rmsnorm/1's (const T* x, const T* weight, T* y, long long rows, int H, long long
// x_row_stride, long long y_row_stride, float eps).
std::string contract_signature_problem(const PtxEntry& entry, const op::Declaration& decl);
std::string contract_signature_problem(const PtxEntry& entry);

// A forbidden construct or a signature problem, located in the PTX.
struct PtxFinding {
  int line = 0;        // 1-based PTX line (0: not tied to a line, e.g. a missing entry)
  std::string kind;    // "module_state", "clock", "globaltimer", "malloc", "free", "printf",
                       // "assert", "trap", "brkpt", "missing_entry", "signature",
                       // "launch_bounds"
  std::string message; // names the construct, the PTX line and what to do instead
};

// How the module uses one module-scope .global variable (static gate evidence).
struct ModuleDataUse {
  std::string name;
  int line = 0;        // PTX line of the declaration
  std::string linkage; // "visible", "extern", "weak", "common" or ""
  bool writable = false;
  int write_line = 0; // PTX line of the first statement that can write it (0: read-only)
  std::string how;    // why it is writable ("'atom.global.add.u64' at PTX line 40 writes it")
  nlohmann::json to_json() const;
};
// Every .global variable of `module`, in declaration order, with whether the module can write it.
std::vector<ModuleDataUse> module_data_uses(const ptx::Module& module);

// The clock/timer, heap, printf, assert and trap findings of every function body of `module`.
std::vector<PtxFinding> forbidden_constructs(const ptx::Module& module);

// Everything the PTX says: findings (sorted by line; missing entries last), the kernels the module
// defines, those the manifest does not name (never launched), and the module data uses.
struct PtxInspection {
  std::vector<PtxFinding> findings;
  std::vector<PtxEntry> entries;
  std::vector<std::string> unlisted_entries;
  std::vector<ModuleDataUse> module_data;
};
// Every (dtype, entry point) of every variant of `manifest`, in variant order.
std::vector<std::pair<DType, std::string>> entry_points_of(const op::Manifest& manifest);

// Every variant's entry points are checked in order, each name once (its launch bounds once per
// variant that launches it); findings name the manifest's own fields.
PtxInspection inspect_ptx(std::string_view ptx, const op::Declaration& decl,
                          const op::Manifest& manifest);

// inspect_ptx(ptx, decl, manifest).findings.
std::vector<PtxFinding> check_ptx(std::string_view ptx, const op::Declaration& decl,
                                  const op::Manifest& manifest);

// Parses `cuobjdump -sass` output: per function {"local_loads", "local_stores",
// "widest_global_load_bits", "widest_global_store_bits"}.
nlohmann::json parse_sass_summary(std::string_view sass);

// Runs cuobjdump -sass on `cubin` when `<cuda_root>/bin/cuobjdump` exists; otherwise returns
// {"status":"not_run","reason":"cuobjdump not found at ..."}.
nlohmann::json inspect_sass(const std::string& cubin, const std::string& cuda_root);

// The `static` gate of a candidate of `decl` with `manifest` (every variant's entry points): fail
// on any PtxFinding; evidence {"resources", "entries", "unlisted_entries", "module_data",
// "findings", "sass"}. A pass names the unlisted kernels.
GateResult static_gate(const std::string& nvrtc_log, const std::string& ptx,
                       const std::string& cubin, const op::Declaration& decl,
                       const op::Manifest& manifest, const std::string& cuda_root);

} // namespace kloop::evaluator
