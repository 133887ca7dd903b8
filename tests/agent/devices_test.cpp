// `--devices` (agent/components.h select_devices: indices, UUIDs, kloop's own
// CUDA_VISIBLE_DEVICES, errors) and the throughput switches (evaluator/throughput.h, the
// KLOOP_THROUGHPUT value the lead's before/after measurement sets).
#include <gtest/gtest.h>

#include "agent/components.h"
#include "evaluator/throughput.h"

namespace kloop::agent {
namespace {

using Pins = std::vector<std::string>;

TEST(SelectDevicesTest, AllIsEveryVisibleDeviceAndNoneIsNone) {
  EXPECT_EQ(select_devices("all", 2, ""), (Pins{"0", "1"}));
  EXPECT_EQ(select_devices("none", 2, ""), Pins{});
  EXPECT_EQ(select_devices("all", 0, ""), Pins{}) << "a machine without a GPU uses none";
  EXPECT_EQ(select_devices("0,1", 0, ""), Pins{}) << "named devices on a machine without one";
}

TEST(SelectDevicesTest, IndicesNameKloopsOwnVisibleDevices) {
  EXPECT_EQ(select_devices("1", 2, ""), Pins{"1"});
  EXPECT_EQ(select_devices("1,0", 2, ""), (Pins{"1", "0"}));
  // A Slurm task that sees GPUs 2 and 3 as 0 and 1: the workers must get 2 and 3.
  EXPECT_EQ(select_devices("all", 2, "2,3"), (Pins{"2", "3"}));
  EXPECT_EQ(select_devices("1", 2, "2,3"), Pins{"3"});
  EXPECT_EQ(select_devices("0", 1, "GPU-abc"), Pins{"GPU-abc"});
  EXPECT_EQ(select_devices("GPU-1234-5678", 2, ""), Pins{"GPU-1234-5678"});
}

TEST(SelectDevicesTest, BadValuesAreUsageErrorsNamingTheEntry) {
  const auto message = [](const std::string& spec, int count) {
    try {
      (void)select_devices(spec, count, "");
    } catch (const DeviceSelectionError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("2", 2).find("device 2 does not exist here (2 visible devices: 0..1)"),
            std::string::npos)
      << message("2", 2);
  EXPECT_NE(message("0,0", 2).find("named twice"), std::string::npos);
  EXPECT_NE(message("x", 2).find("'x' is not a device"), std::string::npos);
  EXPECT_NE(message("0,", 2).find("'' is not a device"), std::string::npos);
  EXPECT_NE(message("-1", 2).find("'-1' is not a device"), std::string::npos);
  EXPECT_THROW(check_devices_syntax("0;1"), DeviceSelectionError);
  // Named twice is a syntax error, also where no device exists (a CPU machine).
  EXPECT_NE(message("0,0", 0).find("named twice"), std::string::npos) << message("0,0", 0);
  EXPECT_THROW(check_devices_syntax("1,01"), DeviceSelectionError);
  EXPECT_THROW(check_devices_syntax("GPU-a1b2,GPU-a1b2"), DeviceSelectionError);
  EXPECT_NO_THROW(check_devices_syntax("all"));
  EXPECT_NO_THROW(check_devices_syntax("0,1"));
}

TEST(ThroughputSwitchesTest, DefaultsLegacyAndSingleSwitches) {
  const auto d = evaluator::parse_throughput("");
  EXPECT_TRUE(d.pipeline);
  EXPECT_TRUE(d.sanitizer_fail_fast);
  EXPECT_TRUE(d.sanitizer_concurrent);
  EXPECT_TRUE(d.profile_on_demand);
  EXPECT_FALSE(d.racecheck_scrub);
  EXPECT_EQ(d.prepare_ahead, 0);
  EXPECT_EQ(d.to_json(), evaluator::parse_throughput("default").to_json());
  const auto l = evaluator::parse_throughput("legacy");
  EXPECT_FALSE(l.pipeline);
  EXPECT_FALSE(l.sanitizer_fail_fast);
  EXPECT_FALSE(l.sanitizer_concurrent);
  EXPECT_FALSE(l.profile_on_demand);
  EXPECT_TRUE(l.racecheck_scrub);
  EXPECT_EQ(l.device_candidates, 1);
  EXPECT_EQ(l.prepare_ahead, 0);
  EXPECT_EQ(evaluator::parse_throughput("prepare_ahead=2").prepare_ahead, 2);
  EXPECT_TRUE(evaluator::parse_throughput("racecheck_scrub=1").racecheck_scrub);
  const auto one = evaluator::parse_throughput("sanitizer_concurrent=0, host_jobs=3");
  EXPECT_FALSE(one.sanitizer_concurrent);
  EXPECT_TRUE(one.sanitizer_fail_fast);
  EXPECT_EQ(one.host_jobs, 3);
  const auto on_legacy = evaluator::parse_throughput("legacy,pipeline=1");
  EXPECT_TRUE(on_legacy.pipeline);
  EXPECT_FALSE(on_legacy.sanitizer_fail_fast);
}

TEST(ThroughputSwitchesTest, BadEntriesNameThemselves) {
  const auto message = [](const std::string& spec) {
    try {
      (void)evaluator::parse_throughput(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("fast=1").find("unknown switch 'fast'"), std::string::npos);
  EXPECT_NE(message("pipeline=2").find("'pipeline=2': expected 0, 1"), std::string::npos);
  EXPECT_NE(message("device_candidates=0").find("from 1 to 8"), std::string::npos);
  EXPECT_NE(message("prepare_ahead=17").find("from 0 to 16"), std::string::npos);
  EXPECT_NE(message("pipeline").find("not name=value"), std::string::npos);
}

TEST(ThroughputSwitchesTest, TheSchedulerFollowsThem) {
  const auto legacy = scheduler_options(evaluator::parse_throughput("legacy"));
  EXPECT_FALSE(legacy.pipeline);
  EXPECT_EQ(legacy.host_jobs, 1);
  EXPECT_EQ(legacy.device_candidates, 1);
  const auto fast = scheduler_options(evaluator::parse_throughput("host_jobs=5"));
  EXPECT_TRUE(fast.pipeline);
  EXPECT_EQ(fast.host_jobs, 5);
  EXPECT_EQ(fast.device_candidates, 2);
  EXPECT_EQ(fast.shared_per_device, 4);
  EXPECT_TRUE(fast.profile_on_demand);
  EXPECT_GE(scheduler_options(evaluator::parse_throughput("")).host_jobs, 1);
}

} // namespace
} // namespace kloop::agent
