// Unit tests of the compute-sanitizer report parser (evaluator/sanitizer.h) on canned reports in
// the format of the CUDA 13.0 compute-sanitizer (tests/perf/fixtures).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "evaluator/sanitizer.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator::sanitizer {
namespace {

std::string fixture(const std::string& name) {
  return test_support::read_file(std::string(KLOOP_PERF_FIXTURES) + "/" + name);
}

TEST(SanitizerReportTest, MemcheckOutOfBoundsReadsKindSizeSymbolAndLine) {
  const Report r = parse_report("memcheck", fixture("memcheck_oob.txt"));
  ASSERT_EQ(r.hazards.size(), 3u);
  EXPECT_EQ(r.error_summary, 3);
  const Hazard& a = r.hazards[0];
  EXPECT_EQ(a.kind, "invalid_global_read");
  EXPECT_EQ(a.access_size, 2);
  EXPECT_EQ(a.function, "rms_bf16");
  EXPECT_EQ(a.file, "/tmp/kloop-build-1234/kernel.cu");
  EXPECT_EQ(a.line, 42);
  const Hazard& b = r.hazards[1];
  EXPECT_EQ(b.kind, "invalid_shared_write");
  EXPECT_EQ(b.access_size, 4);
  EXPECT_EQ(b.function, "rms_bf16");
  EXPECT_EQ(b.file, "kernel.cu");
  EXPECT_EQ(b.line, 57);
  EXPECT_EQ(r.hazards[2].kind, "api_error");
  EXPECT_EQ(r.kind_counts()["invalid_global_read"], 1);
  EXPECT_TRUE(r.tool_errors.empty());
}

TEST(SanitizerReportTest, RacecheckNamesBothAccessesAcrossOneOrTwoLines) {
  const Report r = parse_report("racecheck", fixture("racecheck_missing_barrier.txt"));
  ASSERT_EQ(r.hazards.size(), 2u);
  EXPECT_EQ(r.error_summary, 2);
  EXPECT_EQ(r.hazards[0].kind, "race_write_read");
  EXPECT_EQ(r.hazards[0].function, "rms_f32");
  EXPECT_EQ(r.hazards[0].line, 30);
  EXPECT_EQ(r.hazards[0].line2, 35);
  EXPECT_EQ(r.hazards[0].file2, "/tmp/kloop-build-77/kernel.cu");
  EXPECT_EQ(r.hazards[1].kind, "race_read_write");
  EXPECT_EQ(r.hazards[1].line, 36);
  EXPECT_EQ(r.hazards[1].line2, 30);
  EXPECT_TRUE(r.tool_errors.empty()); // "Error: Race ..." is a hazard, not a tool error
}

TEST(SanitizerReportTest, InitcheckOldFrameFormatPutsSymbolAfterLine) {
  const Report r = parse_report("initcheck", fixture("initcheck_uninit_global.txt"));
  ASSERT_EQ(r.hazards.size(), 1u);
  EXPECT_EQ(r.hazards[0].kind, "uninitialized_global_read");
  EXPECT_EQ(r.hazards[0].function, "rms_f32");
  EXPECT_EQ(r.hazards[0].line, 12);
  EXPECT_EQ(r.hazards[0].access_size, 4);
}

TEST(SanitizerReportTest, SynccheckDivergentBarrier) {
  const Report r = parse_report("synccheck", fixture("synccheck_divergent.txt"));
  ASSERT_EQ(r.hazards.size(), 1u);
  EXPECT_EQ(r.hazards[0].kind, "barrier_divergent_block");
  EXPECT_EQ(r.hazards[0].function, "rms_f16");
  EXPECT_EQ(r.hazards[0].line, 25);
}

TEST(SanitizerReportTest, CleanReportHasZeroSummaryAndIgnoresWorkerOutput) {
  const Report r = parse_report("memcheck", fixture("clean.txt"));
  EXPECT_TRUE(r.hazards.empty());
  EXPECT_EQ(r.error_summary, 0);
  EXPECT_TRUE(r.tool_errors.empty());
}

TEST(SanitizerReportTest, WithoutLineInfoKeepsSymbolAndLeavesLineZero) {
  const Report r = parse_report("memcheck", fixture("no_lineinfo.txt"));
  ASSERT_EQ(r.hazards.size(), 1u);
  EXPECT_EQ(r.hazards[0].kind, "invalid_global_write");
  EXPECT_EQ(r.hazards[0].function, "rms_f32");
  EXPECT_EQ(r.hazards[0].line, 0);
  EXPECT_EQ(r.hazards[0].access_size, 16);
}

TEST(SanitizerReportTest, UnknownHeadlineLeavesSummaryWithoutHazards) {
  const Report r = parse_report("memcheck", fixture("unknown_kind.txt"));
  EXPECT_TRUE(r.hazards.empty());
  EXPECT_EQ(r.error_summary, 1);
}

TEST(SanitizerReportTest, ToolErrorsAreNotHazards) {
  const Report r = parse_report(
      "memcheck", "========= Error: Target application terminated before first instrumented "
                  "API call\n========= Internal Sanitizer Error: boom\n");
  EXPECT_TRUE(r.hazards.empty());
  EXPECT_EQ(r.tool_errors.size(), 2u);
}

TEST(SanitizerReportTest, OddTextNeverThrows) {
  EXPECT_NO_THROW(parse_report("memcheck", ""));
  EXPECT_NO_THROW(parse_report("memcheck", "========="));
  EXPECT_NO_THROW(parse_report("memcheck", "=========     at \n========= ERROR SUMMARY: x"));
  EXPECT_NO_THROW(
      parse_report("racecheck", "========= Error: Race reported between Write access at"));
}

TEST(SanitizerReportTest, VersionLine) {
  EXPECT_EQ(parse_version(fixture("version.txt")), "2025.3.1.0");
  EXPECT_EQ(parse_version("nothing"), "");
}

} // namespace
} // namespace kloop::evaluator::sanitizer
