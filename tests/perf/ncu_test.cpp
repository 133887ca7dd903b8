// Measured DRAM traffic through ncu (evaluator/ncu.h): CSV parsing with ncu's unit scaling,
// the exact command, the evidence of a finished run and the run itself with a fake process runner.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/gate.h"
#include "evaluator/ncu.h"
#include "tests/support/test_files.h"

namespace kloop::evaluator::ncu {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return test_support::read_file(fs::path(KLOOP_PERF_FIXTURES) / name);
}

TEST(NcuUnitsTest, ConvertsSiByteMultiplesAndTimeUnitsToBaseUnits) {
  EXPECT_DOUBLE_EQ(*to_base_units(2, "byte"), 2);
  EXPECT_DOUBLE_EQ(*to_base_units(1.5, "Kbyte"), 1500);
  EXPECT_DOUBLE_EQ(*to_base_units(536.87, "Mbyte"), 536.87e6);
  EXPECT_DOUBLE_EQ(*to_base_units(1.07, "Gbyte"), 1.07e9);
  EXPECT_DOUBLE_EQ(*to_base_units(1, "MiB"), 1048576);
  EXPECT_DOUBLE_EQ(*to_base_units(7, "nsecond"), 7);
  EXPECT_DOUBLE_EQ(*to_base_units(2.5, "usecond"), 2500);
  EXPECT_DOUBLE_EQ(*to_base_units(0.29, "msecond"), 290000);
  EXPECT_DOUBLE_EQ(*to_base_units(1, "second"), 1e9);
  EXPECT_FALSE(to_base_units(1, "cycle").has_value());
  EXPECT_FALSE(to_base_units(1, "").has_value());
}

TEST(NcuCsvTest, AveragesThreeLaunchesWithMixedUnitsSkippingProfilerAndWorkerLines) {
  const ParseResult r = parse_csv(fixture("ncu_dram_gbyte.csv"));
  ASSERT_TRUE(r.measured.has_value()) << r.error;
  EXPECT_EQ(r.measured->launches, 3);
  EXPECT_EQ(r.measured->kernel, "rms_bf16_v8");
  EXPECT_NEAR(r.measured->read_bytes, 0.54e9, 1.0); // (0.54+0.52+0.56)/3 GB
  EXPECT_NEAR(r.measured->write_bytes, (536.87 + 536.89 + 536.84) / 3 * 1e6, 1.0);
  EXPECT_NEAR(r.measured->duration_ns, 290000, 0.01); // 290.21 us, 0.29 ms, 289.79 us
}

TEST(NcuCsvTest, ReadsThousandsSeparatorsAndSmallUnitsWithFewerColumns) {
  const ParseResult r = parse_csv(fixture("ncu_dram_small_units.csv"));
  ASSERT_TRUE(r.measured.has_value()) << r.error;
  EXPECT_EQ(r.measured->launches, 1);
  EXPECT_DOUBLE_EQ(r.measured->read_bytes, 1048580);
  EXPECT_DOUBLE_EQ(r.measured->write_bytes, 524288);
  EXPECT_DOUBLE_EQ(r.measured->duration_ns, 4384);
}

TEST(NcuCsvTest, NoProfiledKernelIsAnErrorNotAZeroFigure) {
  const ParseResult r = parse_csv(fixture("ncu_no_kernels.txt"));
  EXPECT_FALSE(r.measured.has_value());
  EXPECT_NE(r.error.find("no kernel was profiled"), std::string::npos) << r.error;
  EXPECT_FALSE(parse_csv("").measured.has_value());
  EXPECT_FALSE(parse_csv("garbage \"unterminated\n\"ID\",\"x\n").measured.has_value());
}

TEST(NcuCsvTest, UnknownUnitAndMissingMetricAreNamed) {
  std::string text = fixture("ncu_dram_small_units.csv");
  std::string bad_unit = text;
  bad_unit.replace(bad_unit.find("\"nsecond\""), 9, "\"cycle\"");
  ParseResult r = parse_csv(bad_unit);
  EXPECT_FALSE(r.measured.has_value());
  EXPECT_NE(r.error.find("'cycle'"), std::string::npos) << r.error;
  // Drop the duration row: the launch lacks a metric.
  std::string missing = text.substr(0, text.rfind("\"0\",\"7731\""));
  r = parse_csv(missing);
  EXPECT_FALSE(r.measured.has_value());
  EXPECT_NE(r.error.find("gpu__time_duration.sum"), std::string::npos) << r.error;
  std::string na = text;
  na.replace(na.find("\"524,288\""), 9, "\"n/a\"");
  r = parse_csv(na);
  EXPECT_FALSE(r.measured.has_value());
  EXPECT_NE(r.error.find("n/a"), std::string::npos) << r.error;
}

TEST(NcuCommandTest, ProfilesOnlyTheNamedKernelWithClocksUntouchedAndALaunchCap) {
  const auto argv = command("/usr/local/cuda/bin/ncu", "rms_bf16", "/tmp/r/ncu.csv",
                            {"/bin/kloop-gpu-worker", "/tmp/r"});
  const std::vector<std::string> expected{"/usr/local/cuda/bin/ncu",
                                          "--clock-control",
                                          "none",
                                          "--metrics",
                                          std::string(kMetrics),
                                          "--csv",
                                          "--kernel-name",
                                          "rms_bf16",
                                          "--launch-count",
                                          "5",
                                          "--log-file",
                                          "/tmp/r/ncu.csv",
                                          "/bin/kloop-gpu-worker",
                                          "/tmp/r"};
  EXPECT_EQ(argv, expected);
  EXPECT_EQ(kMetrics, "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum");
}

ToolCall finished(int exit_code, bool timed_out = false) {
  ToolCall c;
  c.argv = {"/usr/local/cuda/bin/ncu", "--csv"};
  c.exit_code = exit_code;
  c.timed_out = timed_out;
  c.wall_ms = 1234;
  return c;
}

TEST(NcuEvidenceTest, SuccessReportsMeasuredBesideLogicalWithTheRatio) {
  const std::string csv = fixture("ncu_dram_small_units.csv");
  const auto ev = evidence_from_run(finished(0), csv, "2025.3.1.0", 1572864);
  EXPECT_EQ(ev["status"], "ok");
  EXPECT_DOUBLE_EQ(ev["read_bytes"].get<double>(), 1048580);
  EXPECT_DOUBLE_EQ(ev["write_bytes"].get<double>(), 524288);
  EXPECT_DOUBLE_EQ(ev["duration_ns"].get<double>(), 4384);
  EXPECT_EQ(ev["logical_unique_bytes"], 1572864);
  EXPECT_NEAR(ev["ratio_measured_over_logical"].get<double>(), (1048580.0 + 524288) / 1572864,
              1e-12);
  EXPECT_EQ(ev["tool_version"], "2025.3.1.0");
  EXPECT_EQ(ev["exit_code"], 0);
  EXPECT_EQ(ev["command"], nlohmann::json({"/usr/local/cuda/bin/ncu", "--csv"}));
  EXPECT_EQ(ev["report_sha256"].get<std::string>().size(), 64u);
}

TEST(NcuEvidenceTest, NonZeroExitTimeoutAndEmptyReportAreFailuresWithReasons) {
  const std::string csv = fixture("ncu_dram_small_units.csv");
  auto ev = evidence_from_run(finished(1), csv, "", 100);
  EXPECT_EQ(ev["status"], "failed");
  EXPECT_NE(ev["reason"].get<std::string>().find("code 1"), std::string::npos);
  ev = evidence_from_run(finished(-1, true), "", "", 100);
  EXPECT_EQ(ev["status"], "failed");
  EXPECT_NE(ev["reason"].get<std::string>().find("deadline"), std::string::npos);
  ev = evidence_from_run(finished(0), fixture("ncu_no_kernels.txt"), "", 100);
  EXPECT_EQ(ev["status"], "failed");
  EXPECT_NE(ev["reason"].get<std::string>().find("no kernel"), std::string::npos);
  EXPECT_FALSE(ev.contains("read_bytes"));
}

using test_support::TempDir;

TEST(NcuRunTest, MissingNcuIsNotRunWithTheReason) {
  RunConfig config;
  std::vector<ToolCall> calls;
  const auto ev = run_measured_dram(config, nullptr, &calls);
  EXPECT_EQ(ev, not_run("ncu not found"));
  EXPECT_TRUE(calls.empty());
}

TEST(NcuRunTest, RunsVersionThenTheProfiledWorkerAndRecordsBothProcesses) {
  TempDir dir;
  RunConfig config;
  config.ncu_path = "/opt/ncu/ncu";
  config.kernel_name = "rms_f32";
  config.worker_argv = {"/bin/kloop-gpu-worker", dir.dir().string()};
  config.work_dir = dir.dir().string();
  config.worker_result_path = (dir.dir() / "result.json").string();
  config.logical_unique_bytes = 1572864;
  std::vector<std::vector<std::string>> seen;
  std::chrono::milliseconds profiled_deadline{0};
  auto runner = [&](const std::vector<std::string>& argv, const SubprocessOptions& o) {
    seen.push_back(argv);
    ToolCall c;
    c.argv = argv;
    c.exit_code = 0;
    if (argv.size() == 2) {
      c.stdout_text = "NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 "
                      "(build 36398880) (public-release)\n";
    } else {
      profiled_deadline = o.deadline;
      std::ofstream(dir.dir() / "ncu.csv") << fixture("ncu_dram_small_units.csv");
      std::ofstream(dir.dir() / "result.json")
          << R"({"status":"pass","bench":{"shapes":[{"route":"candidate"}]},)"
             R"("device_memory":{"peak_allocated_bytes":3145728,"allocations":3}})";
    }
    return c;
  };
  std::vector<ToolCall> calls;
  const auto ev = run_measured_dram(config, runner, &calls);
  EXPECT_EQ(ev["status"], "ok") << ev.dump();
  EXPECT_EQ(ev["tool_version"], "2025.3.1.0");
  EXPECT_EQ(ev["route"], "candidate");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], command("/opt/ncu/ncu", "rms_f32", (dir.dir() / "ncu.csv").string(),
                             config.worker_argv));
  EXPECT_EQ(profiled_deadline, std::chrono::milliseconds(30000));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].detail["mode"], "version");
  EXPECT_EQ(calls[1].detail["tool"], "ncu");
  EXPECT_EQ(calls[1].detail["device_memory"]["peak_allocated_bytes"], 3145728);
}

TEST(NcuRunTest, AProcessThatCannotStartIsAFailureNotAnException) {
  RunConfig config;
  config.ncu_path = "/opt/ncu/ncu";
  config.kernel_name = "k";
  config.work_dir = "/nonexistent";
  auto runner = [](const std::vector<std::string>&, const SubprocessOptions&) -> ToolCall {
    throw InfraError("spawn failed");
  };
  const auto ev = run_measured_dram(config, runner, nullptr);
  EXPECT_EQ(ev["status"], "failed");
  EXPECT_NE(ev["reason"].get<std::string>().find("spawn failed"), std::string::npos);
}

TEST(NcuFindTest, FindsAnExecutableNcuOnPathBeforeTheToolkitFallback) {
  TempDir dir;
  const fs::path ncu = dir.dir() / "ncu";
  std::ofstream(ncu) << "#!/bin/sh\n";
  ::chmod(ncu.c_str(), 0755);
  const std::string path = "relative/bin:/nonexistent:" + dir.dir().string();
  EXPECT_EQ(find_ncu(path.c_str()), ncu.string());
  const std::string fallback =
      ::access("/usr/local/cuda/bin/ncu", X_OK) == 0 ? "/usr/local/cuda/bin/ncu" : "";
  EXPECT_EQ(find_ncu("/nonexistent"), fallback);
  EXPECT_EQ(find_ncu(nullptr), fallback);
  ::chmod(ncu.c_str(), 0644); // not executable: skipped
  EXPECT_EQ(find_ncu(path.c_str()), fallback);
}

} // namespace
} // namespace kloop::evaluator::ncu
