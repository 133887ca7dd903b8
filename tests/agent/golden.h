// Golden texts for the feedback tests: tests/agent/golden/NAME.txt holds the exact feedback a model
// is shown for one gate failure class. expect_golden() compares; with KLOOP_UPDATE_GOLDEN=1 in the
// environment it rewrites the file instead (then review the diff and commit it).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "evaluator/gate.h"
#include "feedback/feedback.h"
#include "tests/support/test_files.h"

namespace kloop::testing {

inline std::string golden_path(const std::string& name) {
  return std::string(KLOOP_SOURCE_DIR) + "/tests/agent/golden/" + name + ".txt";
}

inline void expect_golden(const std::string& name, const std::string& text) {
  const std::string path = golden_path(name);
  if (const char* u = std::getenv("KLOOP_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path))
      << "no golden text " << path << " (create it with KLOOP_UPDATE_GOLDEN=1 and review it)";
  EXPECT_EQ(text, test_support::read_file(path))
      << "the feedback for " << name << " changed; if intended, rerun with "
      << "KLOOP_UPDATE_GOLDEN=1 and review the diff of " << path;
}

// A report of `gates` with the verdict the pipeline would give it.
inline evaluator::PublicReport report_of(std::vector<evaluator::GateResult> gates) {
  evaluator::PublicReport r;
  r.gates = std::move(gates);
  r.verdict = evaluator::decide_verdict(r.gates);
  return r;
}

inline evaluator::GateResult gate(std::string_view name, evaluator::GateStatus status,
                                  std::string reason = "") {
  return {std::string(name), status, std::move(reason), nlohmann::json::object()};
}

// The section named `name` of `p`, or "" when absent.
inline std::string section_text(const feedback::FeedbackPayload& p, const std::string& name) {
  for (const auto& s : p.sections)
    if (s.name == name) return s.text;
  return "";
}

} // namespace kloop::testing
