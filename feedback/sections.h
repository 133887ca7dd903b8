// Internal to feedback/: one function per feedback section, each returning the section text before
// its budget is applied ("" = leave the section out). Evidence is read through
// evaluator/evidence.h.
#pragma once

#include <string>
#include <string_view>

#include "evaluator/evidence.h"
#include "evaluator/gate.h"

namespace kloop::feedback::detail {

std::string summary_section(const evaluator::PublicReport& report);
std::string format_section(const evaluator::GateResult& gate);
std::string contract_section(const evaluator::GateResult& gate);
std::string build_section(const evaluator::GateResult& gate);
std::string static_section(const evaluator::GateResult& gate);
std::string correctness_section(const evaluator::GateResult& gate);
std::string sanitizer_section(const evaluator::GateResult& gate, std::string_view kernel_source);
std::string benchmark_section(const evaluator::GateResult* benchmark,
                              const evaluator::GateResult* roofline);
// CUPTI stalls of the benchmark gate's evidence (the reading's problems go to the benchmark part).
std::string profile_section(const evaluator::evidence::StallEvidence& stalls,
                            std::string_view kernel_source);

// Compact number: 3 significant digits ("1.23e-05", "0.000123", "42"); "n/a" for NaN.
std::string num(double v);
// A value as the tensors hold it: up to 9 significant digits, "nan", "inf", "-inf".
std::string value_text(double v);
// Line `line` (1-based) of `source`, trimmed and cut at 160 bytes; "" when out of range.
std::string source_line(std::string_view source, long line);
// "kernel.cu:LINE `source line`" (the quote only when the source has that line).
std::string located(std::string_view kernel_source, long line);
// "\n(kloop could not read part of this gate's evidence: a; b)" for up to 3 problems, else "".
std::string problems_note(const evaluator::evidence::Problems& problems);
// Distance |actual - expected| in units in the last place of `dtype` at `expected` (the spacing
// of that dtype's values around |expected|; subnormal spacing below the normal range). NaN when
// either value is not finite.
double ulp_distance(DType dtype, double expected, double actual);

} // namespace kloop::feedback::detail
