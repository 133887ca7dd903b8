// family_bench: times offline-family variants against the in-tree baseline with the benchmark
// gate's own protocol (worker mode "benchmark": A-B-B-A, warm and cold L2, noise-based stopping)
// on the contract's shape sweep, without the other gates. It prints numbers; it is not a test.
//
//   family_bench prepare OUT NAME...   (build machine) emits and builds each variant (NVRTC, no
//                                      sandbox) and the in-tree baseline, and writes one worker
//                                      request folder per variant under OUT/
//   kloop-gpu-worker OUT/NAME          (GPU machine) runs one request folder
//   family_bench summarize OUT         prints, per variant, shape and L2 state, the paired ratio
//                                      baseline/candidate of median kernel times (> 1: the
//                                      variant is faster) and the geometric mean
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluator/build.h"
#include "evaluator/perf_gates.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/operator.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace kloop;

namespace {

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Builds `source` with NVRTC outside the sandbox; throws with the build reason on failure.
std::string build_cubin(const std::string& source, const std::string& manifest_text) {
  const auto parsed = op::parse_manifest(rmsnorm::declaration(), manifest_text);
  if (!parsed.manifest) throw std::runtime_error("manifest rejected");
  evaluator::BuildOptions options;
  options.sandbox = evaluator::SandboxRequest::kNoSandbox;
  const auto built = evaluator::build_candidate(source, *parsed.manifest, options);
  if (built.cubin.empty()) throw std::runtime_error("build failed: " + built.gate.reason);
  return built.cubin;
}

int prepare(const fs::path& out, const std::vector<std::string>& names) {
  const fs::path base_dir = fs::path(KLOOP_SOURCE_DIR) / "kernels/rmsnorm/baseline";
  const std::string base_src = read(base_dir / "kernel.cu");
  const std::string base_manifest = read(base_dir / "manifest.json");
  const std::string base_cubin = build_cubin(base_src, base_manifest);
  evaluator::perf::BenchProtocol protocol; // the benchmark gate's settings (device_gates.cpp)
  protocol.time_cap_s = 0.25;
  protocol.max_rounds = 200;
  for (const std::string& name : names) {
    const auto variant = rmsnorm::variant_by_name(name);
    if (!variant) {
      std::cerr << "family_bench: '" << name << "' is not a valid variant name\n";
      return 2;
    }
    const auto gen = rmsnorm::generate(*variant);
    const fs::path dir = out / name;
    fs::create_directories(dir);
    write(dir / "kernel.cu", gen.kernel_cu);
    write(dir / "manifest.json", gen.manifest_json);
    write(dir / "kernel.cubin", build_cubin(gen.kernel_cu, gen.manifest_json));
    write(dir / "baseline.cubin", base_cubin);
    write(dir / "baseline.cu", base_src);
    const op::Operator& op = rmsnorm::operator_instance();
    json req{{"mode", "benchmark"},
             {"operator", op.contract_id()},
             {"cubin", "kernel.cubin"},
             {"source", "kernel.cu"},
             {"manifest", json::parse(gen.manifest_json)},
             {"cases", json::array()}};
    req["options"]["benchmark"] = evaluator::perf::bench_request(
        op.declaration(), op.benchmark_shapes(), protocol, "bench_raw.json");
    req["options"]["baseline"] = {{"cubin", "baseline.cubin"},
                                  {"source", "baseline.cu"},
                                  {"manifest", json::parse(base_manifest)}};
    write(dir / "request.json", req.dump(2));
    std::cout << "prepared " << dir.string() << "\n";
  }
  return 0;
}

double median_of(const json& samples) {
  std::vector<double> v = samples.get<std::vector<double>>();
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int summarize(const fs::path& out) {
  for (const auto& entry : fs::directory_iterator(out)) {
    const fs::path raw = entry.path() / "bench_raw.json";
    if (!fs::exists(raw)) {
      std::cout << entry.path().filename().string() << ": no bench_raw.json (not run or failed)\n";
      continue;
    }
    const json doc = json::parse(read(raw), nullptr, false);
    if (!doc.is_object() || !doc.contains("shapes")) continue;
    double log_sum = 0;
    int n = 0, slower = 0, faster = 0;
    std::cout << "== " << entry.path().filename().string() << "\n";
    for (const auto& s : doc["shapes"]) {
      std::string line =
          fmt::format("  {:9} {:6}x{:<6} {:13}", s.value("dtype", ""), s.value("rows", 0),
                      s.value("h", 0), s.value("shape_class", ""));
      for (const auto& st : s["states"]) {
        const json& sm = st["samples"];
        if (!sm.contains("candidate_kernel") || !sm.contains("baseline_kernel")) continue;
        const double r = median_of(sm["baseline_kernel"]) / median_of(sm["candidate_kernel"]);
        log_sum += std::log(r);
        ++n;
        if (r < 0.97) ++slower;
        if (r > 1.03) ++faster;
        line += fmt::format("  {} {:5.3f} ({:6.1f} us)", st.value("state", "?"), r,
                            1e3 * median_of(sm["candidate_kernel"]));
      }
      std::cout << line << "\n";
    }
    if (n > 0)
      std::cout << fmt::format("  geomean {:.3f} over {} shape-states; {} more than 3% faster, {} "
                               "more than 3% slower\n",
                               std::exp(log_sum / n), n, faster, slower);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "prepare" && argc > 3)
      return prepare(argv[2], std::vector<std::string>(argv + 3, argv + argc));
    if (cmd == "summarize" && argc == 3) return summarize(argv[2]);
    std::cerr << "usage: family_bench prepare OUT NAME... | family_bench summarize OUT\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "family_bench: " << e.what() << "\n";
    return 1;
  }
}
