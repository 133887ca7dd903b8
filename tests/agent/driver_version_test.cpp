// nvidia_driver_version / driver_description (agent/components.h): the session's driver field.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/components.h"

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(DriverVersion, ReadsTheKernelModuleVersionFromTheProcFileForm) {
  // The H200 machine's /proc/driver/nvidia/version (open kernel module, 2026-11).
  const auto open_module = write_temp(
      "kloop-nvrm-open.txt",
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
      "(dvs-builder@U22-I3-AF03-09-1)  Tue Sep 30 2025\nGCC version:  gcc version 12.2.0\n");
  EXPECT_EQ(kloop::agent::nvidia_driver_version(open_module), "580.159.04");
  // The proprietary module's wording, a two-part version.
  const auto proprietary = write_temp(
      "kloop-nvrm-prop.txt",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54  Thu Feb 22 01:44:30 UTC 2024\n");
  EXPECT_EQ(kloop::agent::nvidia_driver_version(proprietary), "550.54");
}

TEST(DriverVersion, MissingFileOrNoVersionTokenGivesEmpty) {
  EXPECT_EQ(kloop::agent::nvidia_driver_version("/nonexistent/kloop/nvidia/version"), "");
  // x86_64, 12.2.0 on a second line, and "1.2.3.4" are not driver versions of the first line.
  const auto none = write_temp("kloop-nvrm-none.txt",
                               "NVRM version: NVIDIA UNIX x86_64 module 1.2.3.4 .5 6.\n12.2.0\n");
  EXPECT_EQ(kloop::agent::nvidia_driver_version(none), "");
}

TEST(DriverVersion, DescriptionNamesBothVersions) {
  EXPECT_EQ(kloop::agent::driver_description("580.159.04", 13000),
            "580.159.04 (CUDA driver API 13.0)");
  EXPECT_EQ(kloop::agent::driver_description("", 12080), "CUDA driver API 12.8");
}

} // namespace
