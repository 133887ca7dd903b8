#include "store/jcs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "store/error.h"

namespace kloop::store {
namespace {

// UTF-8 -> UTF-16 code units; throws on invalid UTF-8.
std::u16string utf16(std::string_view s) {
  std::u16string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = 0;
    int len = 0;
    if (c < 0x80)
      cp = c, len = 1;
    else if ((c >> 5) == 0x6)
      cp = c & 0x1F, len = 2;
    else if ((c >> 4) == 0xE)
      cp = c & 0x0F, len = 3;
    else if ((c >> 3) == 0x1E)
      cp = c & 0x07, len = 4;
    else
      throw StoreError("jcs: invalid UTF-8 in a string; receipts must be valid UTF-8");
    if (i + static_cast<std::size_t>(len) > s.size())
      throw StoreError("jcs: truncated UTF-8 in a string; receipts must be valid UTF-8");
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((cc >> 6) != 0x2) throw StoreError("jcs: invalid UTF-8 continuation byte in a string");
      cp = (cp << 6) | (cc & 0x3F);
    }
    i += static_cast<std::size_t>(len);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

void put_string(std::string& out, std::string_view s) {
  (void)utf16(s); // validates
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20)
        out += fmt::format("\\u{:04x}", c);
      else
        out.push_back(ch);
    }
  }
  out.push_back('"');
}

void put(std::string& out, const nlohmann::json& v) {
  using T = nlohmann::json::value_t;
  switch (v.type()) {
  case T::null:
    out += "null";
    return;
  case T::boolean:
    out += v.get<bool>() ? "true" : "false";
    return;
  case T::string:
    put_string(out, v.get_ref<const std::string&>());
    return;
  case T::number_integer: {
    const auto i = v.get<std::int64_t>();
    if (i > (std::int64_t{1} << 53) || i < -(std::int64_t{1} << 53))
      throw StoreError(fmt::format("jcs: integer {} exceeds 2^53 and has no exact IEEE double "
                                   "form; store it as a string",
                                   i));
    out += jcs_number(static_cast<double>(i));
    return;
  }
  case T::number_unsigned: {
    const auto u = v.get<std::uint64_t>();
    if (u > (std::uint64_t{1} << 53))
      throw StoreError(fmt::format("jcs: integer {} exceeds 2^53 and has no exact IEEE double "
                                   "form; store it as a string",
                                   u));
    out += jcs_number(static_cast<double>(u));
    return;
  }
  case T::number_float:
    out += jcs_number(v.get<double>());
    return;
  case T::array: {
    out.push_back('[');
    bool first = true;
    for (const auto& e : v) {
      if (!first) out.push_back(',');
      first = false;
      put(out, e);
    }
    out.push_back(']');
    return;
  }
  case T::object: {
    std::vector<std::pair<std::u16string, const std::string*>> keys;
    for (auto it = v.begin(); it != v.end(); ++it)
      keys.emplace_back(utf16(it.key()), &it.key());
    std::sort(keys.begin(), keys.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out.push_back('{');
    bool first = true;
    for (const auto& [k16, k] : keys) {
      if (!first) out.push_back(',');
      first = false;
      put_string(out, *k);
      out.push_back(':');
      put(out, v.at(*k));
    }
    out.push_back('}');
    return;
  }
  default:
    throw StoreError("jcs: binary or discarded JSON values have no canonical form");
  }
}

} // namespace

std::string jcs_number(double v) {
  if (!std::isfinite(v))
    throw StoreError("jcs: NaN and Infinity are not valid JSON numbers (RFC 8785 3.2.2.3)");
  if (v == 0) return "0"; // also -0
  if (v < 0) return "-" + jcs_number(-v);
  // Shortest round-trip digits: "d.ddde[+-]XX" -> digits s (k of them) and n, v = 0.s * 10^n.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  const auto epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits.push_back(c);
  int exp10 = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exp10);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;
  if (k <= n && n <= 21) return digits + std::string(static_cast<std::size_t>(n - k), '0');
  if (0 < n && n <= 21)
    return digits.substr(0, static_cast<std::size_t>(n)) + "." +
           digits.substr(static_cast<std::size_t>(n));
  if (-6 < n && n <= 0) return "0." + std::string(static_cast<std::size_t>(-n), '0') + digits;
  const int e = n - 1;
  const std::string exp = fmt::format("e{}{}", e < 0 ? '-' : '+', std::abs(e));
  if (k == 1) return digits + exp;
  return digits.substr(0, 1) + "." + digits.substr(1) + exp;
}

std::string jcs_canonicalize(const nlohmann::json& value) {
  std::string out;
  put(out, value);
  return out;
}

} // namespace kloop::store
