// main() of every gpu-tier test: asks a fresh worker whether a CUDA device is usable and exits 77
// with the worker's reason when not (CTest SKIP_RETURN_CODE), otherwise runs the tests.
#include <cstdio>

#include <gtest/gtest.h>

#include "evaluator/gpu_runner.h"

int main(int argc, char** argv) {
  kloop::evaluator::GpuRunRequest probe;
  probe.mode = "probe";
  const kloop::evaluator::GpuRunResult r = kloop::evaluator::run_gpu_worker(probe);
  if (r.status != kloop::evaluator::GateStatus::kPass) {
    std::printf("skipped: no usable CUDA device (%s): %s\n",
                std::string(kloop::evaluator::gate_status_name(r.status)).c_str(),
                r.reason.c_str());
    return 77;
  }
  std::printf("device: %s; network isolation: %s\n",
              r.result.value("device", nlohmann::json()).dump().c_str(),
              r.network_isolated ? "unshare -n" : "not applied");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
