// Typed reads of one member of JSON that came from a GPU worker (result.json, progress.json): the
// worker runs the candidate, so its files are untrusted. Unlike json::value(), a member of the
// wrong type gives the fallback instead of a type_error, and a floating value is never converted
// to an integer (1e41 as long long is undefined behaviour under UBSan, not an exception).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kloop::evaluator {

// j[key] when j is an object and that member a string, else `fallback`.
inline std::string string_member(const nlohmann::json& j, const char* key,
                                 const std::string& fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// j[key] when j is an object and that member an integer, else `fallback`.
inline long long int_member(const nlohmann::json& j, const char* key, long long fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<long long>() : fallback;
}

// j[key] when j is an object and that member a boolean, else `fallback`.
inline bool bool_member(const nlohmann::json& j, const char* key, bool fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// j[key] when j is an object and that member an array, else an empty array.
inline nlohmann::json array_member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nlohmann::json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : nlohmann::json::array();
}

} // namespace kloop::evaluator
