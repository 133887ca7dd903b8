// The static gate's PTX rules (evaluator/static_inspection.h): which module-scope data the module
// can write, and the forbidden constructs (clock and timer reads, device heap, printf, assert,
// trap, brkpt), each located at its PTX statement.
//
// Module data is rejected only where the module can write it. Per function, a flow-insensitive
// fixed point tracks which registers may hold an address derived from a module-scope symbol
// (mov/cvta of the symbol, then any arithmetic, select, shuffle or conversion of such a register;
// a load through an address of variable V yields the addresses V's initialiser names). A variable
// is writable when a store, atomic, reduction or other memory-writing instruction addresses it
// (directly, `[sym+8]`, or through such a register), when its address is itself stored to memory
// or passed to a call (the receiver could write it; __assertfail and vprintf only read their
// arguments and are rejected by their own rule), or when it is `.extern` (defined, and written,
// outside the module). Everything else — `static constexpr` members NVRTC emits as initialised
// `.global`, `__device__ const` tables, assert and printf strings — is read-only and allowed.
#include <map>
#include <regex>
#include <set>

#include <fmt/core.h>

#include "evaluator/static_inspection.h"

namespace kloop::evaluator {
namespace {

using Symbols = std::set<std::string>;
using Taint = std::map<std::string, Symbols>; // register -> module symbols it may point into

// Callees known to only read their pointer arguments (and rejected by their own rule).
bool read_only_callee(const std::string& name) {
  return name == "__assertfail" || name == "vprintf";
}

bool is_bracket(const std::string& operand) {
  return !operand.empty() && operand.front() == '[';
}

// Instructions whose bracketed operands are only read (PTX ISA: data movement, texture and
// surface loads, cache hints).
bool reads_only(const ptx::Instruction& in) {
  static const std::set<std::string> kRead = {
      "ld",   "ldu", "ldmatrix", "prefetch", "prefetchu", "applypriority", "tex",
      "tld4", "txq", "suld",     "suq",      "fence",     "istypep"};
  return kRead.contains(in.base()) ||
         (in.base() == "cp" && in.opcode.find(".prefetch") != std::string::npos);
}

bool is_load(const ptx::Instruction& in) {
  return in.base() == "ld" || in.base() == "ldu" || in.base() == "ldmatrix";
}

class DataFlow {
public:
  DataFlow(const ptx::Module& module, std::map<std::string, ModuleDataUse>& uses) : uses_(uses) {
    for (const auto& v : module.variables)
      refs_[v.name] = &v.initialiser_refs;
  }

  void analyse(const ptx::Function& f) {
    taint_.clear();
    std::vector<ptx::Instruction> code;
    std::vector<int> lines;
    std::set<std::string> call_params;
    for (const auto& st : f.body) {
      static const std::regex kParamDecl(R"(^\.param\s.*?([A-Za-z_$][\w$]*)(\[\d*\])?$)");
      std::smatch m;
      if (std::regex_match(st.text, m, kParamDecl)) call_params.insert(m[1].str());
      auto in = ptx::parse_instruction(st.text);
      if (in.opcode.empty()) continue;
      code.push_back(std::move(in));
      lines.push_back(st.line);
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& in : code)
        changed = propagate(in) || changed;
    }
    std::map<std::string, Symbols> pending; // call parameter -> symbols stored into it
    for (std::size_t i = 0; i < code.size(); ++i)
      find_writes(code[i], lines[i], call_params, pending);
  }

private:
  // Module symbols `operand` may address: named symbols plus the taint of its registers.
  Symbols symbols_of(const std::string& operand) const {
    Symbols out;
    for (const auto& id : ptx::identifiers_in(operand))
      if (refs_.contains(id)) out.insert(id);
    for (const auto& r : ptx::registers_in(operand))
      if (auto it = taint_.find(r); it != taint_.end())
        out.insert(it->second.begin(), it->second.end());
    return out;
  }

  bool add_taint(const std::string& dest_operand, const Symbols& syms) {
    bool changed = false;
    if (syms.empty()) return false;
    for (const auto& r : ptx::registers_in(dest_operand)) {
      auto& t = taint_[r];
      for (const auto& s : syms)
        changed = t.insert(s).second || changed;
    }
    return changed;
  }

  bool propagate(const ptx::Instruction& in) {
    if (in.operands.empty() || in.base() == "call") return false;
    if (is_load(in)) { // the loaded value: addresses that the loaded variables' initialisers name
      Symbols loaded;
      for (const auto& op : in.operands)
        if (is_bracket(op))
          for (const auto& s : symbols_of(op))
            loaded.insert(refs_.at(s)->begin(), refs_.at(s)->end());
      return add_taint(in.operands[0], loaded);
    }
    for (const auto& op : in.operands)
      if (is_bracket(op)) return false; // memory instructions do not compute addresses
    Symbols src;
    for (std::size_t k = 1; k < in.operands.size(); ++k) {
      const auto s = symbols_of(in.operands[k]);
      src.insert(s.begin(), s.end());
    }
    return add_taint(in.operands[0], src);
  }

  // Records that `sym` can be written (the first reason wins). With `escape`, its address left
  // the module's sight, so every address stored in it escapes too (once per symbol: initialisers
  // may refer to each other in cycles).
  void mark(const std::string& sym, int line, const std::string& how, bool escape) {
    if (auto it = uses_.find(sym); it != uses_.end() && !it->second.writable) {
      it->second.writable = true;
      it->second.write_line = line;
      it->second.how = how;
    }
    if (!escape || !escaped_.insert(sym).second) return;
    if (auto r = refs_.find(sym); r != refs_.end())
      for (const auto& target : *r->second)
        mark(target, line, fmt::format("its address is stored in '{}', whose address escapes", sym),
             true);
  }

  void find_writes(const ptx::Instruction& in, int line, const std::set<std::string>& call_params,
                   std::map<std::string, Symbols>& pending) {
    if (in.base() == "call") {
      std::string callee;
      Symbols passed;
      for (const auto& op : in.operands) {
        if (!op.empty() && op.front() == '(') {
          for (const auto& id : ptx::identifiers_in(op))
            if (auto it = pending.find(id); it != pending.end())
              passed.insert(it->second.begin(), it->second.end());
          const auto s = symbols_of(op);
          passed.insert(s.begin(), s.end());
        } else if (callee.empty()) {
          callee = op;
        }
      }
      pending.clear();
      if (read_only_callee(callee)) return;
      for (const auto& s : passed)
        mark(s, line,
             fmt::format("its address is passed to '{}' at PTX line {}, which may write it", callee,
                         line),
             true);
      return;
    }
    if (reads_only(in)) return;
    std::size_t first_bracket = in.operands.size();
    for (std::size_t k = 0; k < in.operands.size(); ++k)
      if (is_bracket(in.operands[k])) {
        first_bracket = std::min(first_bracket, k);
        if (in.base() == "cp" && k != first_bracket) continue; // cp.*: only the destination
        for (const auto& s : symbols_of(in.operands[k]))
          mark(s, line, fmt::format("'{}' at PTX line {} writes it", in.opcode, line), false);
      }
    if (first_bracket == in.operands.size()) return; // no memory operand: nothing stored
    // Values stored: an address stored to memory escapes, unless it is a call argument.
    const bool to_param = in.opcode.rfind("st.param", 0) == 0;
    std::string param;
    if (to_param)
      for (const auto& id : ptx::identifiers_in(in.operands[first_bracket]))
        if (call_params.contains(id)) param = id;
    for (std::size_t k = first_bracket + 1; k < in.operands.size(); ++k) {
      if (is_bracket(in.operands[k])) continue;
      const Symbols s = symbols_of(in.operands[k]);
      if (s.empty()) continue;
      if (!param.empty()) {
        pending[param].insert(s.begin(), s.end());
        continue;
      }
      for (const auto& sym : s)
        mark(sym, line,
             fmt::format("its address is stored to memory by '{}' at PTX line {}, so the module "
                         "can write it through that copy",
                         in.opcode, line),
             true);
    }
  }

  std::map<std::string, ModuleDataUse>& uses_;
  // Module variable -> the symbols its initialiser names (every module variable is a key).
  std::map<std::string, const std::set<std::string>*> refs_;
  std::set<std::string> escaped_;
  Taint taint_;
};

} // namespace

std::vector<ModuleDataUse> module_data_uses(const ptx::Module& module) {
  std::map<std::string, ModuleDataUse> uses;
  for (const auto& v : module.variables) {
    if (v.space != "global") continue; // .const cannot be written; .shared/.local are per launch
    ModuleDataUse u;
    u.name = v.name;
    u.line = v.line;
    u.linkage = v.linkage;
    if (v.linkage == "extern") {
      u.writable = true;
      u.write_line = v.line;
      u.how = "it is declared .extern: its definition, and whatever writes it, lie outside the "
              "module";
    }
    uses.emplace(v.name, std::move(u));
  }
  DataFlow flow(module, uses);
  for (const auto& f : module.functions)
    if (f.defined) flow.analyse(f);
  std::vector<ModuleDataUse> out;
  for (const auto& v : module.variables)
    if (auto it = uses.find(v.name); it != uses.end()) out.push_back(it->second);
  return out;
}

std::vector<PtxFinding> forbidden_constructs(const ptx::Module& module) {
  static const std::regex kTimer(R"(%globaltimer(_lo|_hi)?\b)");
  static const std::regex kClock(R"(%clock(64|_hi)?\b)");
  std::vector<PtxFinding> out;
  std::map<std::string, bool> defined; // function name -> has a body in this module
  for (const auto& f : module.functions)
    defined[f.name] = f.defined;
  for (const auto& f : module.functions) {
    for (const auto& st : f.body) {
      const int n = st.line;
      const auto in = ptx::parse_instruction(st.text);
      if (in.opcode.empty()) continue;
      if (std::regex_search(st.text, kTimer))
        out.push_back(
            {n, "globaltimer",
             fmt::format("PTX line {}: reads %globaltimer; timer reads are forbidden", n)});
      else if (std::regex_search(st.text, kClock))
        out.push_back(
            {n, "clock",
             fmt::format("PTX line {}: reads %clock/%clock64; clock reads are forbidden", n)});
      if (in.base() == "trap" || in.base() == "brkpt")
        out.push_back({n, in.base(),
                       fmt::format("PTX line {}: '{}' instruction (from __trap/__brkpt/asm); "
                                   "forbidden: a kernel must not abort the context",
                                   n, in.base())});
      for (const auto& op : in.operands) {
        for (const auto& id : ptx::identifiers_in(op)) {
          const auto callee = defined.find(id);
          if (callee == defined.end() || callee->second) continue; // none, or the module's own
          if (id == "__assertfail") {
            out.push_back({n, "assert",
                           fmt::format("PTX line {}: calls __assertfail (a device assert that "
                                       "survived kloop's -DNDEBUG build, e.g. an assert macro of "
                                       "the candidate's own); a failing assert aborts the CUDA "
                                       "context like trap, which a candidate must not do: use "
                                       "assert() from the toolkit, which compiles out, or drop "
                                       "the check",
                                       n)});
          } else if (id == "vprintf" || id == "malloc" || id == "free" ||
                     id == "__nv_aligned_device_malloc" || id == "__cudaCDP2Malloc" ||
                     id == "__nv_cudaMalloc") {
            const std::string kind = id == "vprintf" ? "printf" : id == "free" ? "free" : "malloc";
            out.push_back({n, kind,
                           fmt::format("PTX line {}: uses device {} ({}); device heap and printf "
                                       "are forbidden in candidates",
                                       n, kind, id)});
          }
        }
      }
    }
  }
  return out;
}

} // namespace kloop::evaluator
