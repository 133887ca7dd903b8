// Static inspection (gate `static`) of a built candidate, no GPU needed. From the ptxas report in
// the NVRTC log: registers, spills, stack frame, static shared memory and barriers per entry point
// (information). From the PTX: every manifest entry point exists with exactly the contract's eight
// parameters, and no forbidden construct appears (writable module-scope .global state, %clock /
// %clock64 / %globaltimer reads, device malloc/free, printf, trap/brkpt) — each a failure naming
// the PTX line. From the SASS, when cuobjdump is installed: local-memory traffic (LDL/STL) and the
// widest global load/store per entry point (information; `not_run` when the tool is absent).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"
#include "kernels/rmsnorm/manifest.h"

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

// One `.entry` of a PTX module with its parameter types (".u64", ".u32", ".f32", ...).
struct PtxEntry {
  std::string name;
  int line = 0; // 1-based line of ".entry NAME("
  std::vector<std::string> param_types;
};
std::vector<PtxEntry> parse_ptx_entries(std::string_view ptx);

// A forbidden construct or a signature problem, located in the PTX.
struct PtxFinding {
  int line = 0;        // 1-based PTX line (0: not tied to a line, e.g. a missing entry)
  std::string kind;    // "module_state", "clock", "globaltimer", "malloc", "free", "printf",
                       // "trap", "brkpt", "missing_entry", "signature"
  std::string message; // names the construct, the PTX line and what to do instead
};

// Forbidden-construct scan plus the entry-point signature check against `manifest`.
std::vector<PtxFinding> check_ptx(std::string_view ptx, const rmsnorm::Manifest& manifest);

// Parses `cuobjdump -sass` output: per function {"local_loads", "local_stores",
// "widest_global_load_bits", "widest_global_store_bits"}.
nlohmann::json parse_sass_summary(std::string_view sass);

// Runs cuobjdump -sass on `cubin` when `<cuda_root>/bin/cuobjdump` exists; otherwise returns
// {"status":"not_run","reason":"cuobjdump not found at ..."}.
nlohmann::json inspect_sass(const std::string& cubin, const std::string& cuda_root);

// The `static` gate: fail on any PtxFinding; evidence {"resources", "findings", "sass"}.
GateResult static_gate(const std::string& nvrtc_log, const std::string& ptx,
                       const std::string& cubin, const rmsnorm::Manifest& manifest,
                       const std::string& cuda_root);

} // namespace kloop::evaluator
