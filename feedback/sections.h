// Internal to feedback/: one function per feedback section, each returning the section text before
// its budget is applied ("" = leave the section out). The evidence keys they read are listed in
// feedback.h.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"

namespace kloop::feedback::detail {

std::string summary_section(const evaluator::PublicReport& report);
std::string build_section(const evaluator::GateResult& gate);
std::string static_section(const evaluator::GateResult& gate);
std::string correctness_section(const evaluator::GateResult& gate);
std::string sanitizer_section(const evaluator::GateResult& gate, std::string_view kernel_source);
std::string benchmark_section(const evaluator::GateResult* benchmark,
                              const evaluator::GateResult* roofline);
std::string profile_section(const nlohmann::json& stalls, std::string_view kernel_source);

// Tolerant JSON access: the member `key` of `j` when j is an object holding it, else nullptr.
const nlohmann::json* member(const nlohmann::json& j, std::string_view key);
// Member as text: strings verbatim, numbers/bools dumped, anything else `fallback`.
std::string text_of(const nlohmann::json& j, std::string_view key, std::string fallback = "");
// Member as a number, or nullopt-like NaN when absent or not a number.
double number_of(const nlohmann::json& j, std::string_view key);
// Compact number: 3 significant digits ("1.23e-05", "0.000123", "42").
std::string num(double v);
// Line `line` (1-based) of `source`, trimmed and cut at 160 bytes; "" when out of range.
std::string source_line(std::string_view source, long line);

} // namespace kloop::feedback::detail
