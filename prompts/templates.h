// The prompt templates, embedded into the binary at build time from prompts/templates/*.txt (see
// embed_templates.cmake), and the placeholder set each one declares. Start-up validation
// (validate_templates) checks that every template uses exactly its declared placeholders, so a typo
// in a template is an error when kloop starts, never a blank in a prompt.
#pragma once

#include <set>
#include <span>
#include <string>
#include <string_view>

namespace kloop::prompts {

struct EmbeddedTemplate {
  std::string_view name; // file name without ".txt": "system", "contract", "feedback"
  std::string_view text;
};

// All embedded templates, sorted by name (generated file).
std::span<const EmbeddedTemplate> embedded_templates();

// The text of template `name`; throws PromptError naming the known templates when absent.
std::string_view template_text(std::string_view name);

// The placeholders template `name` must use, exactly (the renderer fills these names).
// Throws PromptError for a template without a declared set.
const std::set<std::string>& declared_placeholders(std::string_view name);

// Checks every embedded template against its declared set and every declared template is
// embedded. Throws PromptError listing each missing, unknown or malformed placeholder.
void validate_templates();

} // namespace kloop::prompts
