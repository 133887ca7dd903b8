// Unit tests of the benchmark and roofline gates (evaluator/perf_gates.h) on canned worker
// benchmark results with synthetic samples.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "evaluator/perf_gates.h"
#include "kernels/rmsnorm/operator.h"
#include "tests/support/bench_result.h"

namespace kloop::evaluator::perf {
namespace {

using nlohmann::json;

// Synthetic worker results (tests/support/bench_result.h).
json shape(std::int64_t rows, std::int64_t h, const char* dtype, double cand_ms, double base_ms) {
  return test_support::synthetic_bench_shape(rows, h, dtype, cand_ms, base_ms);
}
// A vector, not a json: `json shapes = {one_json}` is an array under gcc but a copy of the one
// element under clang (CWG 1467), and the gate reads "shapes" as an array.
json result(const std::vector<json>& shapes) {
  return test_support::synthetic_bench_result(json(shapes));
}

TEST(PerfGatesTest, FasterCandidateIsDecidedFasterWithNoiseFloorAndClasses) {
  // 65536x4096 bf16: 1 GiB unique bytes; 0.30 ms cold is 3.58 TB/s (plausible), baseline 0.36 ms.
  const json r = result({shape(65536, 4096, "bfloat16", 0.30, 0.36)});
  const GateResult g = benchmark_gate(rmsnorm::declaration(), r);
  ASSERT_EQ(g.status, GateStatus::kPass) << g.reason;
  const json& s = g.evidence["shapes"][0]["states"][0];
  EXPECT_EQ(s["decision"], "faster");
  EXPECT_NEAR(s["vs_baseline"]["ratio"].get<double>(), 0.30 / 0.36, 0.01);
  EXPECT_LT(s["noise_floor"].get<double>(), 0.05);
  EXPECT_EQ(s["throttled_batches"], 1);
  EXPECT_TRUE(s.contains("candidate_wrapper_median_ms"));
  EXPECT_EQ(g.evidence["summary"]["faster"], 1);
  EXPECT_EQ(g.evidence["shapes"][0]["shape_class"], "streaming");
}

// The gate records what its A/A floor was measured against and how slots were ordered, so reports
// from workers before and after each protocol change can be told apart.
TEST(PerfGatesTest, EvidenceNamesTheAaPartnerAndTheSlotOrders) {
  json r = result({shape(65536, 4096, "bfloat16", 0.30, 0.36)});
  EXPECT_EQ(benchmark_gate(rmsnorm::declaration(), r).evidence["aa_partner"],
            "the baseline's own functions");
  r["aa_partner"] = "the baseline cubin loaded a second time (own library)";
  EXPECT_EQ(benchmark_gate(rmsnorm::declaration(), r).evidence["aa_partner"],
            "the baseline cubin loaded a second time (own library)");
  // Likewise the slot order: results without the field came from the fixed order.
  EXPECT_EQ(benchmark_gate(rmsnorm::declaration(), r)
                .evidence["slot_orders"]
                .get<std::string>()
                .rfind("fixed (", 0),
            0u);
  r["slot_orders"] = "rotated: six orders";
  EXPECT_EQ(benchmark_gate(rmsnorm::declaration(), r).evidence["slot_orders"],
            "rotated: six orders");
}

TEST(PerfGatesTest, SummaryCarriesTheGeometricMeanSpeedupWithAnInterval) {
  // Two shapes, 1.2x and 1.0x: geometric mean sqrt(1.2) = 1.095, inside its own interval, and the
  // interval is what loop_record stores as the candidate's speedup_lo / speedup_hi.
  const json r = result(
      {shape(65536, 4096, "bfloat16", 0.30, 0.36), shape(16384, 4096, "bfloat16", 0.09, 0.09)});
  const GateResult g = benchmark_gate(rmsnorm::declaration(), r);
  ASSERT_EQ(g.status, GateStatus::kPass) << g.reason;
  const json& sum = g.evidence["summary"];
  const double gm = sum["geomean_speedup_vs_baseline"].get<double>();
  EXPECT_NEAR(gm, std::sqrt(1.2), 0.02);
  const double lo = sum["geomean_ci_lo"].get<double>(), hi = sum["geomean_ci_hi"].get<double>();
  EXPECT_LT(lo, gm);
  EXPECT_GT(hi, gm);
  EXPECT_LT(hi - lo, 0.05); // 1 % noise per sample, 80 samples per path
}

TEST(PerfGatesTest, TimedOutputMismatchFailsTheBenchmark) {
  json r = result({shape(8, 4096, "float32", 0.004, 0.004)});
  r["shapes"][0]["states"][0]["output_checks"] = {
      {{"round", 5}, {"pass", false}, {"detail", "max_abs_err 3.2"}}};
  const GateResult g = benchmark_gate(rmsnorm::declaration(), r);
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_NE(g.reason.find("round 5"), std::string::npos) << g.reason;
  EXPECT_EQ(g.reason.find("poison"), std::string::npos) << g.reason; // nothing recorded about it
}

TEST(PerfGatesTest, UnwrittenTimedOutputIsNamedInTheReason) {
  json r = result({shape(8, 4096, "float32", 0.004, 0.004)});
  r["shapes"][0]["states"][0]["output_checks"] = {{{"round", 9},
                                                   {"pass", false},
                                                   {"detail", "32768 elements outside tolerance"},
                                                   {"poison_words_left", 32768},
                                                   {"words", 32768}}};
  GateResult g = benchmark_gate(rmsnorm::declaration(), r);
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_NE(g.reason.find("32768 of 32768 4-byte words of the output still hold the poison"),
            std::string::npos)
      << g.reason;
  EXPECT_NE(g.reason.find("all of them"), std::string::npos) << g.reason;
  r["shapes"][0]["states"][0]["output_checks"][0]["poison_words_left"] = 12;
  g = benchmark_gate(rmsnorm::declaration(), r);
  EXPECT_NE(g.reason.find("12 of 32768"), std::string::npos) << g.reason;
  EXPECT_NE(g.reason.find("(some)"), std::string::npos) << g.reason;
}

// A state without a single timed output check fails the gate: nothing shows its timed launches
// computed the right thing.
TEST(PerfGatesTest, StateWithoutTimedOutputChecksFailsTheBenchmark) {
  json r = result({shape(8, 4096, "float32", 0.004, 0.004)});
  EXPECT_EQ(benchmark_gate(rmsnorm::declaration(), r).status, GateStatus::kPass);
  r["shapes"][0]["states"][0]["output_checks"] = json::array();
  const GateResult g = benchmark_gate(rmsnorm::declaration(), r);
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_NE(g.reason.find("no timed output was checked"), std::string::npos) << g.reason;
}

TEST(PerfGatesTest, MalformedWorkerResultIsInfraError) {
  EXPECT_THROW(benchmark_gate(rmsnorm::declaration(), json::object()), InfraError);
  json r = result({shape(8, 4096, "float32", 0.004, 0.004)});
  r["shapes"][0]["states"][0]["samples"].erase("baseline_kernel");
  EXPECT_THROW(benchmark_gate(rmsnorm::declaration(), r), InfraError);
  EXPECT_THROW(roofline_gate(rmsnorm::declaration(), json{{"shapes", json::array()}}), InfraError);
  // Wrong JSON types and a shape of no rows (found by the worker_result fuzz target): InfraError
  // naming the key, never a json or std::invalid_argument exception.
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"rows", 0}, {"rows", "8"}, {"h", -1}, {"dtype", 3}, {"states", "cold"}}) {
    json bad = result({shape(8, 4096, "float32", 0.004, 0.004)});
    bad["shapes"][0][key] = value;
    try {
      (void)roofline_gate(rmsnorm::declaration(), bad);
      (void)benchmark_gate(rmsnorm::declaration(), bad);
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const InfraError& e) {
      EXPECT_NE(std::string(e.what()).find("benchmark result"), std::string::npos) << e.what();
    }
  }
}

TEST(PerfGatesTest, RooflineReportsFractionOfCeilingPerClass) {
  const json r = result(
      {shape(65536, 4096, "bfloat16", 0.30, 0.36), shape(65536, 128, "float32", 0.05, 0.06)});
  const GateResult g = roofline_gate(rmsnorm::declaration(), r);
  ASSERT_EQ(g.status, GateStatus::kPass) << g.reason;
  const double ceiling = g.evidence["copy_ceiling_tbps"].get<double>();
  EXPECT_NEAR(ceiling, 4.21, 0.01);
  const json& st = g.evidence["shapes"][0]["states"][0];
  const double unique = (2.0 * 65536 * 4096 + 4096) * 2;
  const double t_ms = st["median_ms"].get<double>();
  EXPECT_NEAR(t_ms, 0.30, 0.003);
  EXPECT_NEAR(st["effective_tbps"].get<double>(), unique / (t_ms * 1e-3) / 1e12, 1e-9);
  EXPECT_NEAR(st["fraction_of_ceiling"].get<double>(), st["effective_tbps"].get<double>() / ceiling,
              1e-9);
  EXPECT_EQ(g.evidence["by_class"]["streaming"]["shapes"], 1);
  EXPECT_EQ(g.evidence["by_class"]["narrow"]["shapes"], 1);
}

TEST(PerfGatesTest, FasterThanTheCopyCeilingIsAFailureNotARecord) {
  // 1 GiB of cold streaming traffic in 0.15 ms would be ~7 TB/s, above 4.2 TB/s * 1.05.
  const GateResult g =
      roofline_gate(rmsnorm::declaration(), result({shape(65536, 4096, "bfloat16", 0.15, 0.36)}));
  EXPECT_EQ(g.status, GateStatus::kFail);
  EXPECT_NE(g.reason.find("copy ceiling"), std::string::npos) << g.reason;
}

TEST(PerfGatesTest, MeasuredDramIsKeptBesideTheLogicalFigure) {
  json r = result({shape(65536, 4096, "bfloat16", 0.30, 0.36)});
  r["shapes"][0]["ncu"] = {{"dram_bytes_read", 536870912}, {"dram_bytes_write", 536870912}};
  const GateResult g = roofline_gate(rmsnorm::declaration(), r);
  EXPECT_EQ(g.evidence["shapes"][0]["measured_dram"]["dram_bytes_read"], 536870912);
  EXPECT_TRUE(g.evidence["shapes"][0]["logical_bytes"].contains("unique"));
}

TEST(PerfGatesTest, BenchRequestCarriesShapeClassesAndProtocol) {
  const json req = bench_request(rmsnorm::declaration(),
                                 {{8, {4096}, DType::kBFloat16}, {32768, {1009}, DType::kFloat16}},
                                 BenchProtocol{}, "/tmp/raw.json");
  EXPECT_EQ(req["shapes"][0]["shape_class"], "launch_bound");
  EXPECT_EQ(req["shapes"][1]["shape_class"], "odd");
  EXPECT_EQ(req["protocol"]["target_rel_half_width"], 0.01);
  EXPECT_EQ(req["copy_ceiling_bytes"], 1LL << 30);
}

TEST(PerfGatesTest, NotRunNamesBothGates) {
  const auto gates = not_run("no device");
  ASSERT_EQ(gates.size(), 2u);
  EXPECT_EQ(gates[0].name, "benchmark");
  EXPECT_EQ(gates[1].name, "roofline");
  EXPECT_EQ(gates[1].status, GateStatus::kNotRun);
}

} // namespace
} // namespace kloop::evaluator::perf
