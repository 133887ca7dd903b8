// Host-side judgements of the device audit (output_audit.h).
#include "evaluator/output_audit.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace kloop::evaluator::audit {

std::string guard_damage(std::span<const unsigned char> guard, bool before, std::string_view name) {
  const std::size_t n = guard.size();
  for (std::size_t i = 0; i < n; ++i)
    if (guard[i] != kGuardByte)
      return fmt::format(
          "guard bytes {} {} were overwritten ({} byte {} of the guard): an "
          "out-of-bounds write",
          before ? "before" : "after", name,
          before ? "offset -" + std::to_string(n - i) : "offset +" + std::to_string(i), i);
  return {};
}

std::string input_changed(std::span<const std::byte> before, std::span<const std::byte> after,
                          std::string_view name) {
  const bool same =
      before.size() == after.size() &&
      (before.empty() || std::memcmp(before.data(), after.data(), before.size()) == 0);
  if (same) return {};
  return fmt::format("{}'s device storage changed during the call: inputs must stay "
                     "byte-identical",
                     name);
}

std::string repeat_mismatch(std::span<const std::byte> first, std::span<const std::byte> again,
                            std::size_t element_bytes, int call_number, bool poisoned) {
  if (first.size() == again.size() &&
      (first.empty() || std::memcmp(first.data(), again.data(), first.size()) == 0))
    return {};
  const std::size_t es = std::max<std::size_t>(element_bytes, 1);
  const std::size_t bytes = std::min(first.size(), again.size());
  std::size_t unwritten = 0, differ = 0, first_bad = bytes / es;
  for (std::size_t e = 0; e + es <= bytes; e += es) {
    if (std::memcmp(&again[e], &first[e], es) == 0) continue;
    ++differ;
    first_bad = std::min(first_bad, e / es);
    bool both = poisoned;
    for (std::size_t b = 0; b < es && both; ++b)
      both = both && static_cast<unsigned char>(first[e + b]) == kPoisonNan &&
             static_cast<unsigned char>(again[e + b]) == kPoisonFinite;
    unwritten += both;
  }
  if (unwritten > 0)
    return fmt::format("{} output elements were never written (the poison survived the call; "
                       "first at flat index {})",
                       unwritten, first_bad);
  return fmt::format("repeated call {} gave different bits in {} elements (first at flat index "
                     "{}): nondeterministic output, a race?",
                     call_number, differ, first_bad);
}

} // namespace kloop::evaluator::audit
