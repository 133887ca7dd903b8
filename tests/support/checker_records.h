// The checked-in checker-coverage record of each registered operator, for the tests that hold the
// evaluator to it (CPU: tests/mutation/report_test.cpp checks the selection's mutant ids against
// the current baseline; device: tests/mutation/gpu_checker_coverage_test.cpp runs the selection and
// compares the score). RMSNorm's record keeps its first path,
// tests/gpu/checker_coverage_record.json; every other operator's is
// tests/gpu/checker_coverage_record_<name>.json (scripts/device-run.sh writes it with
// CHECKER_COVERAGE=record CC_OP=<name>).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace kloop::test_support {

struct CheckerRecord {
  const op::Operator* op = nullptr;
  std::filesystem::path path; // where the operator's record is checked in

  std::string name() const { return std::string(op->cli_name()); }
};

// gtest's printout of a parameter: the operator's name.
inline void PrintTo(const CheckerRecord& r, std::ostream* os) {
  *os << r.name();
}

// One entry per registered operator, in registry order (a missing record is the test's failure).
inline std::vector<CheckerRecord> checker_records() {
  std::vector<CheckerRecord> out;
  for (const op::Operator* o : op::operators()) {
    const std::string name(o->cli_name());
    const std::string file = name == "rmsnorm" ? "checker_coverage_record.json"
                                               : "checker_coverage_record_" + name + ".json";
    out.push_back({o, std::filesystem::path(KLOOP_SOURCE_DIR) / "tests/gpu" / file});
  }
  return out;
}

} // namespace kloop::test_support
