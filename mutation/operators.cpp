// Mutation operators: the rule table and the line-wise site finder (see operators.h).
#include "mutation/operators.h"

#include <algorithm>
#include <functional>
#include <regex>
#include <set>
#include <stdexcept>

#include <fmt/core.h>

namespace kloop::mutation {
namespace {

using Lines = std::vector<std::string>;

Lines split_lines(std::string_view source) {
  Lines out;
  std::size_t start = 0;
  while (start < source.size()) {
    const std::size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) {
      out.emplace_back(source.substr(start));
      break;
    }
    out.emplace_back(source.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// The code part of a line: text before a `//` comment; preprocessor lines have none.
std::string_view code_of(const std::string& line) {
  const std::size_t first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line[first] == '#') return {};
  const std::size_t c = line.find("//");
  return std::string_view(line).substr(0, c == std::string::npos ? line.size() : c);
}

// One regex rule: every match in a line's code part is a site, replaced by `format` ($1...).
struct Rule {
  std::regex pattern;
  std::string format;
};

using SiteFinder = std::function<std::vector<std::vector<LineEdit>>(const Lines&)>;

SiteFinder regex_sites(std::vector<std::pair<std::string, std::string>> rules) {
  std::vector<Rule> compiled;
  for (auto& [p, f] : rules)
    compiled.push_back(Rule{std::regex(p), f});
  return [compiled](const Lines& lines) {
    std::vector<std::vector<LineEdit>> sites;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string code(code_of(lines[i]));
      for (const Rule& r : compiled) {
        for (auto it = std::sregex_iterator(code.begin(), code.end(), r.pattern);
             it != std::sregex_iterator(); ++it) {
          const std::smatch& m = *it;
          const std::size_t pos = static_cast<std::size_t>(m.position(0));
          std::string after = lines[i].substr(0, pos) + m.format(r.format) +
                              lines[i].substr(pos + static_cast<std::size_t>(m.length(0)));
          sites.push_back({LineEdit{static_cast<int>(i) + 1, lines[i], std::move(after)}});
        }
      }
    }
    return sites;
  };
}

std::size_t indent_of(const std::string& line) {
  const std::size_t n = line.find_first_not_of(' ');
  return n == std::string::npos ? line.size() : n;
}

// barrier-move: the barrier goes before the previous statement at its own indentation.
std::vector<std::vector<LineEdit>> barrier_move_sites(const Lines& lines) {
  std::vector<std::vector<LineEdit>> sites;
  static const std::regex barrier(R"(__syncthreads\(\);)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string code(code_of(lines[i]));
    if (!std::regex_search(code, barrier)) continue;
    const std::size_t ind = indent_of(lines[i]);
    for (std::size_t j = i; j-- > 0;) {
      if (code_of(lines[j]).find_first_not_of(" \t") == std::string_view::npos) continue;
      if (indent_of(lines[j]) < ind) break; // left the barrier's block: nothing to move past
      if (indent_of(lines[j]) != ind) continue;
      const std::string moved = std::string(ind, ' ') + "__syncthreads(); // mutant: moved up";
      sites.push_back({LineEdit{static_cast<int>(j) + 1, lines[j], moved + "\n" + lines[j]},
                       LineEdit{static_cast<int>(i) + 1, lines[i],
                                std::regex_replace(lines[i], barrier, "/* barrier moved */")}});
      break;
    }
  }
  return sites;
}

// scrub/clamp: the `return` of each to_f conversion (one line after a line naming to_f).
SiteFinder conversion_sites(std::string format) {
  return [format](const Lines& lines) {
    static const std::regex ret(R"(^(\s*)return (__half2float\(v\)|__bfloat162float\(v\)|v);$)");
    std::vector<std::vector<LineEdit>> sites;
    for (std::size_t i = 1; i < lines.size(); ++i) {
      std::smatch m;
      if (lines[i - 1].find("to_f(") == std::string::npos || !std::regex_match(lines[i], m, ret))
        continue;
      sites.push_back({LineEdit{static_cast<int>(i) + 1, lines[i], m.format(format)}});
    }
    return sites;
  };
}

// The contract ids whose vocabularies hold a rule (kernels/<name>/ baselines it is written for).
const std::vector<std::string_view> kRms = {"weighted_rmsnorm/1"};
const std::vector<std::string_view> kSoftmax = {"row_softmax/1"};
const std::vector<std::string_view> kBoth = {"weighted_rmsnorm/1", "row_softmax/1"};

struct OperatorDef {
  OperatorInfo info;
  SiteFinder sites;
  std::vector<std::string_view> contracts;
};

const std::vector<OperatorDef>& table() {
  static const std::vector<OperatorDef> defs = {
      {{"barrier-remove", "delete one __syncthreads() (P15: race in a shared-memory reduction)"},
       regex_sites({{R"(__syncthreads\(\);)", "/* barrier removed */"}}),
       kBoth},
      {{"barrier-move", "move one __syncthreads() above the previous statement of its block, so "
                        "producers write after the barrier (P15)"},
       barrier_move_sites,
       kBoth},
      {{"relational-flip", "'<' becomes '<=' in a loop bound or mask over vectors, rows, lanes or "
                           "warps, and '<=' becomes '<' in a path-selection bound (P9, P16)"},
       regex_sites({{R"( < (nv|rows|units|nwarps|kWarp|G / kWarp)\b)", " <= $1"},
                    {R"(([\w\)]) <= )", "$1 < "}}),
       kBoth},
      {{"row-overrun", "'< H' becomes '<= H': read or write one element past the row (P16)"},
       regex_sites({{R"( < H\b)", " <= H"}}),
       kRms},
      {{"bound-plus-one", "a loop bound over vectors, rows or warps grows by one (P16)"},
       regex_sites({{R"( < (nv|rows|nwarps)\b)", " < $1 + 1"}}),
       kBoth},
      {{"bound-minus-one", "a loop bound shrinks by one, or a halving loop stops one step early "
                           "(P9: the last element, row or shuffle step is skipped)"},
       regex_sites({{R"( < (nv|H|rows|nwarps)\b)", " < $1 - 1"}, {R"(\b(\w+) > 0;)", "$1 > 1;"}}),
       kBoth},
      {{"tail-padding", "the padding of a masked tail load becomes 1 instead of the additive "
                        "identity 0 (P9)"},
       regex_sites({{R"((\?[^:;]*): 0\.f\b)", "$1: 1.f"}}),
       kRms},
      {{"stride-as-width", "one row address uses H where the row stride belongs (P7: rows that "
                           "are not contiguous)"},
       regex_sites({{R"( \* (xs|ys)\b)", " * H"}}),
       kRms},
      {{"stride-as-width-all", "every row address uses H where the row stride belongs (P7)"},
       [](const Lines& lines) {
         static const std::regex p(R"( \* (xs|ys)\b)");
         std::vector<LineEdit> edits;
         for (std::size_t i = 0; i < lines.size(); ++i) {
           const std::string code(code_of(lines[i]));
           if (!std::regex_search(code, p)) continue;
           const std::string rest = lines[i].substr(code.size());
           edits.push_back(
               {static_cast<int>(i) + 1, lines[i], std::regex_replace(code, p, " * H") + rest});
         }
         return edits.empty() ? std::vector<std::vector<LineEdit>>{}
                              : std::vector<std::vector<LineEdit>>{edits};
       },
       kRms},
      {{"narrow-offset-32", "a 64-bit row offset (row * stride) is narrowed to 32 bits "
                            "(overflows past 2^31 elements)"},
       regex_sites({{R"(\b(\w+) \* (xs|ys)\b)", "static_cast<int>($1 * $2)"}}),
       kBoth},
      {{"eps-drop", "eps is left out of rsqrt(mean + eps) (P12: all-zero rows give NaN)"},
       regex_sites({{R"( \+ eps\))", ")"}}),
       kRms},
      {{"eps-hardcode", "eps is replaced by the constant 1e-5 (P12: eps ignored)"},
       regex_sites({{R"( \+ eps\))", " + 1e-5f)"}}),
       kRms},
      {{"divide-rounded-width", "the mean divides by H rounded up to a multiple of 32 (P9)"},
       regex_sites({{R"(static_cast<float>\(H\))", "static_cast<float>((H + 31) / 32 * 32)"}}),
       kRms},
      {{"skip-weight-fp32", "one weight multiply is skipped for float32 only (P6: degenerate "
                            "weights would hide it)"},
       regex_sites({{R"((\* |= )to_f\((we?\[\w+\])\))", "$1(sizeof(T) == 4 ? 1.f : to_f($2))"}}),
       kRms},
      {{"half-accumulation", "one sum of squares is rounded to half precision at each step (P11: "
                             "fp16 accumulator overflow)"},
       regex_sites({{R"((\w+) = fmaf\(([^,]+), ([^,]+), (\w+)\);)",
                     "$1 = __half2float(__float2half_rn(fmaf($2, $3, $4)));"},
                    {R"((\w+) \+= (vec_sumsq<T>\(.*\));)",
                     "$1 = __half2float(__float2half_rn($1 + $2));"}}),
       kRms},
      {{"scrub-nonfinite", "a load conversion replaces NaN and Inf by 0 (P4)"},
       conversion_sites("$1return isfinite($2) ? ($2) : 0.f;"),
       kBoth},
      {{"clamp-nonfinite", "a load conversion clamps to +-3e38, so Inf becomes finite and NaN "
                           "becomes -3e38 (P4)"},
       conversion_sites("$1return fminf(fmaxf($2, -3.0e38f), 3.0e38f);"),
       kBoth},
      {{"module-scope-state", "an entry point counts its calls in a writable static variable "
                              "(P3: state carried across calls)"},
       regex_sites({{R"(^(\s*)((rms|softmax)_impl<.*\);)$)",
                     "$1{ static unsigned long long kloop_calls = 0; kloop_calls += 1; } $2"}}),
       kBoth},
      {{"hardcode-width", "a public width (4096) replaces H at an entry point or in the mean "
                          "(P9: incorrect shape branches)"},
       regex_sites({{R"(rows, H, x_row_stride)", "rows, 4096, x_row_stride"},
                    {R"(static_cast<float>\(H\))", "4096.f"},
                    {R"(rows, N, x_row_stride)", "rows, 4096, x_row_stride"}}),
       kBoth},
      // row_softmax/1's own idioms (kernels/softmax/family_emit.cpp, the baseline's body).
      {{"softmax-no-max", "exponents are taken against 0 instead of the row max: exp(x) / "
                          "sum(exp(x)) overflows for large logits"},
       regex_sites({{R"(return m == neg_inf\(\) \? 0\.f : m;)", "return 0.f;"}}),
       kSoftmax},
      {{"softmax-no-shift-guard", "exponents are taken against the running max even while it "
                                  "is -inf: -inf - (-inf) = NaN poisons a row that starts with "
                                  "-inf elements (masked logits)"},
       regex_sites({{R"(return m == neg_inf\(\) \? 0\.f : m;)", "return m;"}}),
       kSoftmax},
      {{"softmax-max-from-zero", "the running max starts at 0 instead of -inf: rows of large "
                                 "negative logits underflow to 0 / 0"},
       regex_sites({{R"(Stat st\{neg_inf\(\), 0\.f\};)", "Stat st{0.f, 0.f};"},
                    {R"(float m = neg_inf\(\);)", "float m = 0.f;"}}),
       kSoftmax},
      {{"softmax-no-rescale", "the running sum is not rescaled when the max grows (a stale "
                              "normaliser)"},
       regex_sites({{R"(return m_old == m_new \? 1\.f : __expf\(.*\);)", "return 1.f;"}}),
       kSoftmax},
      {{"softmax-half-sum", "one sum of exponentials is rounded to half precision at each step "
                            "(P11: a 16-bit accumulator)"},
       regex_sites(
           {{R"((\w+) \+= (__expf\(.*\));)", "$1 = __half2float(__float2half_rn($1 + $2));"}}),
       kSoftmax},
      {{"softmax-skip-tail-sum", "the scalar tail of a row is left out of the sum (P9, P16)"},
       regex_sites({{R"(absorb_one\(st, to_f\(xr\[j\]\)\);)", "/* tail not summed */;"},
                    {R"(s \+= __expf\(to_f\(xr\[j\]\) - sh\);)", "/* tail not summed */;"}}),
       kSoftmax},
      {{"softmax-zero-masked-rows", "an all -inf row is written as zeros (a \"safe softmax\"), "
                                    "not the NaN torch.softmax gives"},
       regex_sites(
           {{R"(const float inv = 1\.f / s;)", "const float inv = s > 0.f ? 1.f / s : 0.f;"}}),
       kSoftmax},
      {{"softmax-stride-as-width", "one row address uses N where the row stride belongs (P7: rows "
                                   "that are not contiguous)"},
       regex_sites({{R"(\(x \+ r \* xs(, y \+ r \* ys, n, t,))", "(x + r * n$1"},
                    {R"((, y \+ r) \* ys(, n, t,))", "$1 * n$2"}}),
       kSoftmax},
      {{"softmax-row-overrun", "'< n' becomes '<= n' in a loop over a row's tail: one element "
                               "past the row (P16)"},
       regex_sites({{R"( < n;)", " <= n;"}}),
       kSoftmax},
      {{"softmax-unit-overrun", "'< nu' becomes '<= nu' in a loop over a row's vectors: one "
                                "vector past the row (P16)"},
       regex_sites({{R"( < nu\b)", " <= nu"}}),
       kSoftmax},
  };
  return defs;
}

const OperatorDef& find_def(std::string_view op) {
  for (const OperatorDef& d : table())
    if (d.info.name == op) return d;
  throw std::invalid_argument(fmt::format("unknown mutation operator '{}'; see `kloop "
                                          "checker-coverage --help` for the list",
                                          op));
}

} // namespace

std::string Mutant::diff() const {
  std::string out;
  for (const LineEdit& e : edits) {
    out += fmt::format("L{}: -{}\n", e.line, e.before);
    std::size_t start = 0;
    do {
      const std::size_t nl = e.after.find('\n', start);
      out += fmt::format("L{}: +{}\n", e.line, e.after.substr(start, nl - start));
      start = nl == std::string::npos ? nl : nl + 1;
    } while (start != std::string::npos);
  }
  if (!out.empty()) out.pop_back();
  return out;
}

nlohmann::json Mutant::to_json() const {
  return {{"id", id}, {"op", op}, {"site", site}, {"line", line}, {"diff", diff()}};
}

const std::vector<OperatorInfo>& operators() {
  static const std::vector<OperatorInfo> infos = [] {
    std::vector<OperatorInfo> v;
    for (const OperatorDef& d : table())
      v.push_back(d.info);
    return v;
  }();
  return infos;
}

std::vector<std::string> vocabulary(std::string_view contract_id) {
  std::vector<std::string> out;
  for (const OperatorDef& d : table())
    if (std::find(d.contracts.begin(), d.contracts.end(), contract_id) != d.contracts.end())
      out.emplace_back(d.info.name);
  return out;
}

bool is_operator(std::string_view name) {
  return std::any_of(table().begin(), table().end(),
                     [&](const OperatorDef& d) { return d.info.name == name; });
}

std::string apply_edits(std::string_view source, const std::vector<LineEdit>& edits) {
  Lines lines = split_lines(source);
  for (const LineEdit& e : edits) {
    if (e.line < 1 || e.line > static_cast<int>(lines.size()))
      throw std::invalid_argument(fmt::format("mutation edit: line {} is outside the source "
                                              "(1..{})",
                                              e.line, lines.size()));
    std::string& l = lines[static_cast<std::size_t>(e.line) - 1];
    if (l != e.before)
      throw std::invalid_argument(
          fmt::format("mutation edit: line {} is '{}', expected '{}'", e.line, l, e.before));
    l = e.after;
  }
  std::string out;
  for (const std::string& l : lines)
    out += l + "\n";
  if (!source.empty() && source.back() != '\n') out.pop_back();
  return out;
}

std::vector<Mutant> mutants_of(std::string_view source, std::string_view op) {
  const OperatorDef& def = find_def(op);
  const Lines lines = split_lines(source);
  std::vector<Mutant> out;
  int site = 0;
  for (auto& edits : def.sites(lines)) {
    Mutant m;
    m.op = std::string(def.info.name);
    m.site = site++;
    m.id = fmt::format("{}#{}", m.op, m.site);
    m.line = edits.front().line;
    for (const LineEdit& e : edits)
      m.line = std::min(m.line, e.line);
    m.source = apply_edits(source, edits);
    m.edits = std::move(edits);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Mutant> select_mutants(std::string_view source, const std::vector<std::string>& ops,
                                   int max_per_operator, int max_total) {
  std::vector<std::string> names = ops;
  if (names.empty())
    for (const OperatorInfo& o : operators())
      names.emplace_back(o.name);
  std::vector<std::vector<Mutant>> per_op;
  for (const std::string& name : names) {
    std::vector<Mutant> all = mutants_of(source, name);
    const std::size_t n = all.size();
    const std::size_t k =
        max_per_operator > 0 ? std::min(n, static_cast<std::size_t>(max_per_operator)) : n;
    std::vector<Mutant> chosen;
    for (std::size_t i = 0; i < k; ++i)
      chosen.push_back(std::move(all[i * n / k]));
    per_op.push_back(std::move(chosen));
  }
  std::vector<Mutant> out;
  std::set<std::string> seen{std::string(source)};
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (auto& list : per_op) {
      if (round >= list.size()) continue;
      any = true;
      if (max_total > 0 && static_cast<int>(out.size()) >= max_total) return out;
      if (seen.insert(list[round].source).second) out.push_back(std::move(list[round]));
    }
    if (!any) return out;
  }
}

} // namespace kloop::mutation
