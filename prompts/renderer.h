// The prompt renderer: replaces named placeholders `{{name}}` (name: [a-z_][a-z0-9_]*) with values.
// Strict by design: a placeholder without a value, a value without a placeholder, or a malformed
// `{{` is a PromptError, never a blank or a stray value in a prompt. Values are inserted verbatim
// and never re-scanned, so model output or diagnostics containing `{{` cannot inject placeholders.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kloop::prompts {

// A template or its values do not fit together. Raised at start-up (validation) or when a prompt
// is rendered; the message names the template and the placeholder.
class PromptError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The placeholder names used in `text`. Throws PromptError (naming `template_name` and the byte
// offset) when a `{{` does not open a well-formed `{{name}}`.
std::set<std::string> placeholders_of(std::string_view text, std::string_view template_name);

// `text` with every `{{name}}` replaced by values.at(name). Throws PromptError when a placeholder
// has no value or a value is not used.
std::string render(std::string_view text, const std::map<std::string, std::string>& values,
                   std::string_view template_name);

} // namespace kloop::prompts
