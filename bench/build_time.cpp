// Median wall time of one sandboxed build (pre-scan, sandbox start, NVRTC cubin + PTX, result
// read-back) of a typical RMSNorm candidate (tests/evaluator/fixtures/good, three dtypes), over 10
// runs. Target: < 300 ms including sandbox start. Usage: build_time [RUNS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "evaluator/build.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"

int main(int argc, char** argv) {
  using namespace kloop;
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  const std::string dir = std::string(KLOOP_SOURCE_DIR) + "/tests/evaluator/fixtures/good/";
  std::stringstream src, man;
  src << std::ifstream(dir + "kernel.cu").rdbuf();
  man << std::ifstream(dir + "manifest.json").rdbuf();
  auto parsed = op::parse_manifest(rmsnorm::declaration(), man.str());
  if (!parsed.manifest) {
    std::fprintf(stderr, "fixture manifest invalid: %s\n", parsed.errors[0].message.c_str());
    return 1;
  }
  std::vector<double> wall, worker;
  std::string sandbox;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = evaluator::build_candidate(src.str(), *parsed.manifest, {});
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (r.gate.status != evaluator::GateStatus::kPass) {
      std::fprintf(stderr, "build failed: %s\n", r.gate.reason.c_str());
      return 1;
    }
    worker.push_back(r.tool_calls.at(0).wall_ms);
    sandbox = r.sandbox;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::printf("build_time: sandbox=%s runs=%d median_wall_ms=%.1f median_worker_ms=%.1f "
              "min_ms=%.1f max_ms=%.1f (target < 300 ms)\n",
              sandbox.c_str(), runs, median(wall), median(worker),
              *std::min_element(wall.begin(), wall.end()),
              *std::max_element(wall.begin(), wall.end()));
  return 0;
}
