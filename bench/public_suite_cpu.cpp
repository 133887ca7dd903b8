// The host work of one correctness batch that does not depend on the candidate (issue 26, "do
// not repeat work whose inputs did not change"): generating the public suite's inputs
// (rmsnorm::materialize) and computing the CPU reference for them (rmsnorm::reference), per case
// family, as a GPU worker does for every candidate before it compares. On this machine the
// numbers are real host times; the H200 host runs the same code. Usage: public_suite_cpu [SEED]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/reference.h"

int main(int argc, char** argv) {
  using namespace kloop;
  using Clock = std::chrono::steady_clock;
  const std::uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const auto specs = rmsnorm::public_cases(seed);
  struct Row {
    int cases = 0;
    double materialize_ms = 0, reference_ms = 0;
    std::int64_t elements = 0;
  };
  std::map<std::string, Row> by_family;
  Row total;
  for (const auto& spec : specs) {
    const auto t0 = Clock::now();
    const rmsnorm::CaseInputs in = rmsnorm::materialize(spec);
    const auto t1 = Clock::now();
    if (spec.invalid == rmsnorm::InvalidKind::kNone)
      (void)rmsnorm::reference(in.x, in.weight, in.eps);
    const auto t2 = Clock::now();
    Row& r = by_family[std::string(rmsnorm::value_family_name(spec.values))];
    for (Row* row : {&r, &total}) {
      ++row->cases;
      row->materialize_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
      row->reference_ms += std::chrono::duration<double, std::milli>(t2 - t1).count();
      row->elements += spec.numel();
    }
  }
  std::printf("public_cases(%llu): %d cases, %.1f M elements of x\n",
              static_cast<unsigned long long>(seed), total.cases, total.elements / 1e6);
  std::printf("%-20s %6s %14s %14s\n", "value family", "cases", "materialize ms", "reference ms");
  for (const auto& [name, r] : by_family)
    std::printf("%-20s %6d %14.1f %14.1f\n", name.c_str(), r.cases, r.materialize_ms,
                r.reference_ms);
  std::printf("%-20s %6d %14.1f %14.1f  (per correctness batch, before any candidate call)\n",
              "total", total.cases, total.materialize_ms, total.reference_ms);
  return 0;
}
