#include "prompts/templates.h"

#include <map>

#include <fmt/format.h>

#include "prompts/renderer.h"

namespace kloop::prompts {
namespace {

const std::map<std::string, std::set<std::string>, std::less<>>& declared_sets() {
  static const std::map<std::string, std::set<std::string>, std::less<>> kSets = {
      {"system", {"contract_id"}},
      {"contract",
       {"operator", "contract_id", "signature", "dtypes", "inputs", "semantics", "output_rules",
        "non_finite", "accuracy_intro", "tolerance", "accuracy_notes", "input_rule", "outputs",
        "kernel_signature", "manifest_schema", "example_manifest", "smem_rule",
        "format_instruction"}},
      {"feedback", {"iteration", "iterations_left", "verdict", "feedback", "format_instruction"}},
  };
  return kSets;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

} // namespace

std::string_view template_text(std::string_view name) {
  std::string known;
  for (const auto& t : embedded_templates()) {
    if (t.name == name) return t.text;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  throw PromptError(fmt::format("no prompt template named '{}' is embedded (known: {}); add "
                                "prompts/templates/{}.txt and rebuild",
                                name, known, name));
}

const std::set<std::string>& declared_placeholders(std::string_view name) {
  const auto& sets = declared_sets();
  auto it = sets.find(name);
  if (it == sets.end())
    throw PromptError(fmt::format("prompt template '{}' has no declared placeholder set; declare "
                                  "it in prompts/templates.cpp",
                                  name));
  return it->second;
}

void validate_templates() {
  std::string problems;
  for (const auto& [name, declared] : declared_sets()) {
    std::set<std::string> used;
    try {
      used = placeholders_of(template_text(name), name);
    } catch (const PromptError& e) {
      problems += std::string("\n  ") + e.what();
      continue;
    }
    std::set<std::string> missing, unknown;
    for (const auto& d : declared)
      if (!used.count(d)) missing.insert(d);
    for (const auto& u : used)
      if (!declared.count(u)) unknown.insert(u);
    if (!missing.empty())
      problems += fmt::format("\n  template '{}' does not use declared placeholder(s): {}", name,
                              join(missing));
    if (!unknown.empty())
      problems +=
          fmt::format("\n  template '{}' uses undeclared placeholder(s): {}", name, join(unknown));
  }
  for (const auto& t : embedded_templates()) {
    if (!declared_sets().count(t.name))
      problems +=
          fmt::format("\n  template '{}' is embedded but has no declared placeholder set", t.name);
  }
  if (!problems.empty())
    throw PromptError("prompt templates do not match their declared placeholders; fix "
                      "prompts/templates/*.txt or prompts/templates.cpp:" +
                      problems);
}

} // namespace kloop::prompts
