// The digest of a public report (the JSON of evaluator::PublicReport: {"verdict",
// "gates":[{"name","status","reason","evidence"}], "artifacts"}) that the operators' offline
// policies read (kernels/<name>/family_policy.h): the verdict, the first failed gate, spills, the
// copy-ceiling fraction per shape class, the speed-up against the baseline, the dominant stall
// and the dtypes measured slower. Every missing or oddly typed key is tolerated (the rule that
// needs it does not fire); nothing here knows an operator.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace kloop::op {

// What a policy reads from one report (all fields optional in the report).
struct ReportDigest {
  bool present = false;         // a report was given
  std::string verdict;          // "pass", "reject", "pending_device_validation", "" if absent
  std::string failed_gate;      // first gate with fail/timeout/crashed, "" if none
  std::int64_t spill_bytes = 0; // largest spill store/load bytes over entries (static/build)
  std::map<std::string, double> class_fraction; // shape_class -> lowest copy-ceiling fraction
  double min_speedup = 0.0;   // lowest speed-up vs baseline over shapes (0 when absent)
  bool has_benchmark = false; // at least one class fraction or speed-up was found
  std::string dominant_stall; // top CUPTI stall reason, lower case ("" when absent)
  // dtypes ("float32", "float16", "bfloat16") of the benchmark states whose decision is "slower"
  // (slower than the baseline beyond the state's A/A noise floor, bench::decide_speed).
  std::set<std::string> slower_dtypes;
};

// Reads a public report JSON; never throws on missing or oddly typed keys.
ReportDigest digest_report(const nlohmann::json& report);

// The geometric-mean speed-up against the baseline of a report's benchmark gate
// (evidence.summary.geomean_speedup_vs_baseline); 0 when it has none.
double geomean_speedup(const nlohmann::json& report);

} // namespace kloop::op
