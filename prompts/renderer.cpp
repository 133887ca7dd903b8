#include "prompts/renderer.h"

#include <vector>

#include <fmt/format.h>

namespace kloop::prompts {
namespace {

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || c == '_';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}

struct Token {
  std::size_t begin = 0; // offset of "{{"
  std::size_t end = 0;   // offset after "}}"
  std::string name;
};

std::vector<Token> scan(std::string_view text, std::string_view template_name) {
  std::vector<Token> tokens;
  for (std::size_t pos = text.find("{{"); pos != std::string_view::npos;
       pos = text.find("{{", pos)) {
    std::size_t i = pos + 2;
    std::size_t j = i;
    while (j < text.size() && name_char(text[j]))
      ++j;
    if (j == i || !name_start(text[i]) || text.substr(j, 2) != "}}")
      throw PromptError(fmt::format(
          "prompt template '{}': malformed placeholder at byte {} ('{}'); write {{{{name}}}} with "
          "a lower-case name",
          template_name, pos, text.substr(pos, std::min<std::size_t>(24, text.size() - pos))));
    tokens.push_back(Token{pos, j + 2, std::string(text.substr(i, j - i))});
    pos = j + 2;
  }
  return tokens;
}

} // namespace

std::set<std::string> placeholders_of(std::string_view text, std::string_view template_name) {
  std::set<std::string> names;
  for (const auto& t : scan(text, template_name))
    names.insert(t.name);
  return names;
}

std::string render(std::string_view text, const std::map<std::string, std::string>& values,
                   std::string_view template_name) {
  const std::vector<Token> tokens = scan(text, template_name);
  std::set<std::string> used;
  for (const auto& t : tokens) {
    if (!values.count(t.name))
      throw PromptError(fmt::format("prompt template '{}': no value for placeholder {{{{{}}}}}; "
                                    "the prompt builder must supply it",
                                    template_name, t.name));
    used.insert(t.name);
  }
  for (const auto& [name, value] : values) {
    if (!used.count(name))
      throw PromptError(fmt::format("prompt template '{}': value '{}' given but the template has "
                                    "no {{{{{}}}}} placeholder; add it or stop passing it",
                                    template_name, name, name));
  }
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  for (const auto& t : tokens) {
    out.append(text.substr(pos, t.begin - pos));
    out.append(values.at(t.name));
    pos = t.end;
  }
  out.append(text.substr(pos));
  return out;
}

} // namespace kloop::prompts
