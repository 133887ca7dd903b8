// Typed reads of one member of a JSON object that kloop did not write itself and must not trust:
// a stored row someone edited, a GPU worker's result.json or progress.json (the worker runs the
// candidate). Unlike json::value(), a member that is absent or of another type gives the
// fallback and never throws, and a floating value is never converted to an integer (1e41 as
// long long is undefined behaviour under UBSan, not an exception).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kloop::store {

// The number at `key` (integer or floating) as a double, else `fallback`.
inline double number_at(const nlohmann::json& j, std::string_view key, double fallback = 0) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// The string at `key`, else `fallback`.
inline std::string string_at(const nlohmann::json& j, std::string_view key,
                             const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The integer at `key`, else `fallback` (a floating value is not an integer here).
inline std::int64_t int_at(const nlohmann::json& j, std::string_view key,
                           std::int64_t fallback = 0) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

// The boolean at `key`, else `fallback`.
inline bool bool_at(const nlohmann::json& j, std::string_view key, bool fallback = false) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// The array at `key`, else an empty array.
inline nlohmann::json array_at(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return nlohmann::json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : nlohmann::json::array();
}

} // namespace kloop::store
