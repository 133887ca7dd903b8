// main() of every gpu-tier test: asks a fresh worker whether a CUDA device is usable
// (tests/support/device_probe.h). A clear no-device answer exits 77 with the worker's reason
// (CTest SKIP_RETURN_CODE); any other failed probe (a crash, a timeout, a missing worker, another
// CUDA error, or no device under KLOOP_REQUIRE_DEVICE=1) exits 1 with the reason, so a broken
// worker on a GPU machine fails the tier instead of skipping it; otherwise the tests run.
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/support/device_probe.h"

int main(int argc, char** argv) {
  using kloop::test_support::DeviceState;
  const kloop::test_support::DeviceProbe probe = kloop::test_support::probe_device();
  if (probe.state == DeviceState::kAbsent) {
    std::printf("skipped: no CUDA device: %s\n", probe.reason.c_str());
    return 77;
  }
  if (probe.state == DeviceState::kBroken) {
    std::printf("FAILED: the GPU probe failed: %s\n", probe.reason.c_str());
    return 1;
  }
  std::printf("device: %s\n", probe.reason.c_str());
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
