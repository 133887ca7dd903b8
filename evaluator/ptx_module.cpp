// PTX statements, functions and module-scope variables (evaluator/ptx_module.h).
#include "evaluator/ptx_module.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>

namespace kloop::evaluator::ptx {
namespace {

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

// Removes leading labels ("$L__BB0_2:", "LBB1_3:"); a "::" (as in L2::evict_last) is no label.
std::string strip_labels(std::string s) {
  static const std::regex kLabel(R"(^\s*[A-Za-z_$][\w$]*\s*:(?!:)\s*)");
  std::smatch m;
  while (std::regex_search(s, m, kLabel))
    s = m.suffix().str();
  return trim(s);
}

// Directives that end at the end of their line rather than at a ';' (PTX ISA, "Directives").
bool line_terminated(const std::string& cur) {
  static const std::regex kLineDirective(R"(^\s*\.(version|target|address_size|file|loc)\b)");
  return std::regex_search(cur, kLineDirective);
}

// Whether a '{' after `cur` opens a scope (a function or section body, a bare nested scope)
// rather than an initialiser or a vector operand of the statement being read.
bool opens_scope(const std::string& cur) {
  static const std::regex kHeader(R"(^(\.(visible|extern|weak)\s+)*\.(entry|func|section)\b)");
  const std::string s = strip_labels(cur);
  return s.empty() || std::regex_search(s, kHeader);
}

// Splits at top-level commas (outside (), [] and {}), trimming each part.
std::vector<std::string> split_top_level(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  const std::string last = trim(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

// ".param .u64 .ptr .global .align 4 NAME" -> {".u64", NAME}; ".param .align 8 .b8 NAME[16]" ->
// {".b8[16]", NAME}.
Param parse_param(const std::string& text) {
  static const std::regex kType(R"(^\.(b|u|s|f)\d+$|^\.pred$)");
  static const std::regex kName(R"(^([A-Za-z_$%][\w$]*)(\[(\d*)\])?$)");
  Param p;
  std::string token;
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || std::isspace(static_cast<unsigned char>(text[i]))) {
      if (!token.empty()) tokens.push_back(token);
      token.clear();
    } else {
      token += text[i];
    }
  }
  for (const auto& t : tokens)
    if (p.type.empty() && std::regex_match(t, kType)) p.type = t;
  if (!tokens.empty()) {
    std::smatch m;
    if (std::regex_match(tokens.back(), m, kName)) {
      p.name = m[1].str();
      if (m[2].matched) p.type += "[" + m[3].str() + "]";
    }
  }
  return p;
}

// Parses a function header ("[linkage] .entry|.func [(returns)] NAME(params) [directives]").
bool parse_function_header(const Statement& st, Function& f) {
  static const std::regex kHead(
      R"(^((?:\.(?:visible|extern|weak)\s+)*)\.(entry|func)\s*(\([^)]*\)\s*)?([A-Za-z_$][\w$]*))");
  std::smatch m;
  if (!std::regex_search(st.text, m, kHead)) return false;
  f.entry = m[2].str() == "entry";
  const std::string linkage = m[1].str();
  for (const char* l : {"visible", "extern", "weak"})
    if (linkage.find(l) != std::string::npos) f.linkage = l;
  f.name = m[4].str();
  f.line = st.line;
  const std::string rest = m.suffix().str();
  const std::size_t open = rest.find('(');
  if (open != std::string::npos && trim(rest.substr(0, open)).empty()) {
    int depth = 0;
    std::size_t close = open;
    for (; close < rest.size(); ++close) {
      if (rest[close] == '(') ++depth;
      if (rest[close] == ')' && --depth == 0) break;
    }
    for (const auto& part : split_top_level(rest.substr(open + 1, close - open - 1)))
      if (!part.empty()) f.params.push_back(parse_param(part));
    // Performance-tuning directives between the parameter list and the body (PTX ISA,
    // "Performance-Tuning Directives"): .maxntid nx[, ny[, nz]] and .reqntid likewise.
    static const std::regex kThreads(
        R"(\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?)");
    const std::string tail = close < rest.size() ? rest.substr(close + 1) : std::string();
    for (auto it = std::sregex_iterator(tail.begin(), tail.end(), kThreads);
         it != std::sregex_iterator(); ++it) {
      long long n = 1;
      for (int g = 2; g <= 4; ++g)
        if ((*it)[g].matched) n *= std::stoll((*it)[g].str());
      ((*it)[1].str() == "maxntid" ? f.maxntid : f.reqntid) = n;
    }
  }
  return true;
}

// Parses a module-scope variable declaration; false when `text` is none.
bool parse_variable(const Statement& st, Variable& v) {
  static const std::regex kHead(
      R"(^((?:\.(?:visible|extern|weak|common)\s+)*)\.(global|const|shared|local|tex)\b)");
  std::smatch m;
  if (!std::regex_search(st.text, m, kHead)) return false;
  v.space = m[2].str();
  const std::string linkage = m[1].str();
  for (const char* l : {"visible", "extern", "weak", "common"})
    if (linkage.find(l) != std::string::npos) v.linkage = l;
  v.line = st.line;
  std::string decl = m.suffix().str();
  const std::size_t eq = decl.find('=');
  if (eq != std::string::npos) {
    v.initialised = true;
    for (const auto& id : identifiers_in(std::string_view(decl).substr(eq + 1)))
      v.initialiser_refs.insert(id); // filtered to module symbols by parse_module
    decl = decl.substr(0, eq);
  }
  // The name: the last identifier of the declaration part (".align 4 .b8 table[16]" -> table).
  const auto ids = identifiers_in(decl);
  if (ids.empty()) return false;
  v.name = ids.back();
  return true;
}

} // namespace

std::vector<Statement> split_statements(std::string_view ptx) {
  std::vector<Statement> out;
  std::string cur;
  int line = 1, cur_line = 0, brace = 0; // brace: depth of braces inside the current statement
  auto emit = [&](std::string text) {
    text = strip_labels(text);
    if (!text.empty()) out.push_back({cur_line ? cur_line : line, std::move(text)});
    cur.clear();
    cur_line = 0;
  };
  auto append = [&](char c) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty() && cur.back() != ' ') cur += ' ';
      return;
    }
    if (cur_line == 0) cur_line = line;
    cur += c;
  };
  for (std::size_t i = 0; i < ptx.size(); ++i) {
    const char c = ptx[i];
    if (c == '/' && i + 1 < ptx.size() && ptx[i + 1] == '/') {
      while (i + 1 < ptx.size() && ptx[i + 1] != '\n')
        ++i;
      continue;
    }
    if (c == '/' && i + 1 < ptx.size() && ptx[i + 1] == '*') {
      for (i += 2; i < ptx.size() && !(ptx[i] == '*' && i + 1 < ptx.size() && ptx[i + 1] == '/');
           ++i)
        if (ptx[i] == '\n') ++line;
      ++i;
      append(' ');
      continue;
    }
    if (c == '"') {
      append(c);
      for (++i; i < ptx.size() && ptx[i] != '"' && ptx[i] != '\n'; ++i)
        cur += ptx[i];
      if (i < ptx.size() && ptx[i] == '"') cur += '"';
      if (i < ptx.size() && ptx[i] == '\n') --i;
      continue;
    }
    if (c == '\n') {
      if (brace == 0 && line_terminated(cur)) emit(cur);
      ++line;
      append(' ');
      continue;
    }
    if (c == ';' && brace == 0) {
      emit(cur);
      continue;
    }
    // A label ("$L__BB0_2:") ends here: drop it, so the statement starts at its instruction.
    static const std::regex kLabelText(R"(^\s*[A-Za-z_$][\w$]*\s*$)");
    if (c == ':' && brace == 0 && (i + 1 >= ptx.size() || ptx[i + 1] != ':') &&
        std::regex_match(cur, kLabelText)) {
      cur.clear();
      cur_line = 0;
      continue;
    }
    if (c == '{') {
      if (brace == 0 && opens_scope(cur)) {
        const int l = line;
        emit(cur);
        out.push_back({l, "{"});
      } else {
        ++brace;
        append(c);
      }
      continue;
    }
    if (c == '}') {
      if (brace > 0) {
        --brace;
        append(c);
      } else {
        const int l = line;
        emit(cur);
        out.push_back({l, "}"});
      }
      continue;
    }
    append(c);
  }
  emit(cur);
  for (auto& s : out)
    s.text = trim(s.text);
  return out;
}

std::vector<const Function*> Module::entries() const {
  std::vector<const Function*> out;
  for (const auto& f : functions)
    if (f.entry) out.push_back(&f);
  return out;
}

Module parse_module(std::string_view ptx) {
  Module mod;
  const auto statements = split_statements(ptx);
  for (std::size_t i = 0; i < statements.size(); ++i) {
    const Statement& st = statements[i];
    Function f;
    Variable v;
    if (st.text == "{") { // a module-scope block that is no function body: skip it whole
      int depth = 0;
      for (; i < statements.size(); ++i) {
        depth += statements[i].text == "{" ? 1 : statements[i].text == "}" ? -1 : 0;
        if (depth == 0) break;
      }
    } else if (parse_function_header(st, f)) {
      if (i + 1 < statements.size() && statements[i + 1].text == "{") {
        f.defined = true;
        int depth = 0;
        for (++i; i < statements.size(); ++i) {
          const std::string& t = statements[i].text;
          depth += t == "{" ? 1 : t == "}" ? -1 : 0;
          if (depth == 0) break;
          if (t != "{" && t != "}") f.body.push_back(statements[i]);
        }
      }
      // A definition that follows an earlier prototype replaces it.
      auto it = std::find_if(mod.functions.begin(), mod.functions.end(),
                             [&](const Function& g) { return g.name == f.name; });
      if (it == mod.functions.end())
        mod.functions.push_back(std::move(f));
      else if (f.defined)
        *it = std::move(f);
    } else if (parse_variable(st, v)) {
      mod.variables.push_back(std::move(v));
    }
  }
  std::set<std::string> names;
  for (const auto& v : mod.variables)
    names.insert(v.name);
  for (auto& v : mod.variables) {
    std::set<std::string> refs;
    for (const auto& r : v.initialiser_refs)
      if (names.contains(r)) refs.insert(r);
    v.initialiser_refs = std::move(refs);
  }
  return mod;
}

std::string Instruction::base() const {
  return opcode.substr(0, opcode.find('.'));
}

Instruction parse_instruction(const std::string& text) {
  Instruction in;
  std::string s = trim(text);
  if (s.empty() || s[0] == '.' || s == "{" || s == "}") return in;
  if (s[0] == '@') {
    const std::size_t sp = s.find(' ');
    if (sp == std::string::npos) return in;
    in.guard = s.substr(0, sp);
    s = trim(s.substr(sp + 1));
  }
  const std::size_t sp = s.find(' ');
  in.opcode = s.substr(0, sp);
  if (sp != std::string::npos) in.operands = split_top_level(std::string_view(s).substr(sp + 1));
  return in;
}

std::vector<std::string> registers_in(std::string_view operand) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != '%') continue;
    std::size_t j = i + 1;
    while (j < operand.size() && ident_char(operand[j]))
      ++j;
    // %tid.x, %ctaid.y: special registers with a component are no virtual registers.
    const bool component = j + 1 < operand.size() && operand[j] == '.' &&
                           std::isalpha(static_cast<unsigned char>(operand[j + 1]));
    if (j > i + 1 && !component) out.emplace_back(operand.substr(i, j - i));
    i = j - 1;
  }
  return out;
}

std::vector<std::string> identifiers_in(std::string_view operand) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < operand.size()) {
    const char c = operand[i];
    if (c == '%' || c == '.' || std::isdigit(static_cast<unsigned char>(c))) {
      // A register, a directive/type suffix or a number (0f3F800000, 0d..., 1e-5): skip whole.
      ++i;
      while (i < operand.size() && (ident_char(operand[i]) || operand[i] == '.'))
        ++i;
    } else if (ident_start(c)) {
      std::size_t j = i;
      while (j < operand.size() && ident_char(operand[j]))
        ++j;
      out.emplace_back(operand.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

} // namespace kloop::evaluator::ptx
