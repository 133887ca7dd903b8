// Benchmark and roofline gates from the worker's benchmark result (perf_gates.h).
#include "evaluator/perf_gates.h"

#include <cctype>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "evaluator/bench_stats.h"
#include "evaluator/roofline.h"
#include "store/json_at.h"

namespace kloop::evaluator::perf {

namespace {

using nlohmann::json;

const json& need(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) {
    throw InfraError(fmt::format("benchmark result: {} has no \"{}\"; the GPU worker and kloop "
                                 "disagree on the result format, rebuild both",
                                 where, key));
  }
  return j.at(key);
}

// need() of an integer >= `min` (a shape's rows and h, the copy ceiling's bytes), or InfraError
// naming the key: a worker result kloop cannot have written, never a json exception.
std::int64_t need_int(const json& j, const char* key, const std::string& where, std::int64_t min) {
  const json& v = need(j, key, where);
  if (!v.is_number_integer() || v.get<std::int64_t>() < min)
    throw InfraError(fmt::format("benchmark result: {}.{} is {}, not an integer >= {}; the GPU "
                                 "worker and kloop disagree on the result format, rebuild both",
                                 where, key, v.dump(-1, ' ', false, json::error_handler_t::replace),
                                 min));
  return v.get<std::int64_t>();
}

// need() of a number > 0 (the copy ceiling's time in ms), or InfraError naming the key.
double need_positive(const json& j, const char* key, const std::string& where) {
  const json& v = need(j, key, where);
  if (!v.is_number() || !(v.get<double>() > 0))
    throw InfraError(fmt::format("benchmark result: {}.{} is {}, not a positive number", where, key,
                                 v.dump(-1, ' ', false, json::error_handler_t::replace)));
  return v.get<double>();
}

std::vector<double> samples(const json& state, const char* key, const std::string& where) {
  const json& s = need(need(state, "samples", where), key, where + ".samples");
  if (!s.is_array())
    throw InfraError("benchmark result: " + where + ".samples." + key +
                     " is not an array of milliseconds");
  return s.get<std::vector<double>>();
}

bool has_samples(const json& state, const char* key) {
  return state.contains("samples") && state["samples"].contains(key) &&
         state["samples"][key].is_array() && !state["samples"][key].empty();
}

// The JSON key of axis `a` in a benchmark shape: its name in lower case ("h").
std::string axis_key(const op::Axis& a) {
  std::string key = a.name;
  for (char& c : key)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

// "65536x4096 bfloat16": rows, then the variable axes in declaration order (0 for a member that is
// not an integer: this names the shape in messages, parse_shape checks it).
std::string shape_name(const op::Declaration& decl, const json& shape) {
  std::string dims = std::to_string(store::int_at(shape, "rows", 0));
  for (const op::Axis& a : decl.axes)
    if (a.variable) dims += "x" + std::to_string(store::int_at(shape, axis_key(a).c_str(), 0));
  return fmt::format("{} {}", dims, store::string_at(shape, "dtype", "?"));
}

// The shape's rows, axes and dtype (op::BenchShape::from_json), InfraError naming what is missing.
op::BenchShape parse_shape(const op::Declaration& decl, const json& shape,
                           const std::string& where) {
  try {
    return op::BenchShape::from_json(decl, shape);
  } catch (const std::invalid_argument& e) {
    throw InfraError("benchmark result: " + where + ": " + e.what());
  }
}

// parse_shape() of a shape the roofline arithmetic can use: rows and every variable axis an
// integer >= 1 (need_int), else InfraError naming the key.
op::BenchShape need_shape(const op::Declaration& decl, const json& shape,
                          const std::string& where) {
  need_int(shape, "rows", where, 1);
  for (const op::Axis& a : decl.axes)
    if (a.variable) need_int(shape, axis_key(a).c_str(), where, 1);
  return parse_shape(decl, shape, where);
}

// The shape's JSON keys (rows, axes, dtype) with the shape class, for the gates' evidence.
json shape_keys(const op::Declaration& decl, const op::BenchShape& s) {
  json j = s.to_json(decl);
  j["shape_class"] = roofline::shape_class(decl, s);
  return j;
}

// Stats of one cache state of one shape.
json state_summary(const json& state, const std::string& where, bench::SpeedDecision* decision,
                   bench::PairedRatio* vs_baseline) {
  const auto cand = samples(state, "candidate_kernel", where);
  const auto base = samples(state, "baseline_kernel", where);
  json out{{"state", state.value("state", std::string("?"))},
           {"rounds", store::int_at(state, "rounds", 0)},
           {"stop", state.value("stop", std::string("?"))},
           {"candidate_kernel_median_ms", bench::median(cand)},
           {"baseline_kernel_median_ms", bench::median(base)},
           {"candidate_rel_half_width", bench::relative_half_width(cand)},
           {"baseline_rel_half_width", bench::relative_half_width(base)}};
  if (!std::isfinite(out["candidate_rel_half_width"].get<double>())) {
    out["candidate_rel_half_width"] = nullptr;
  }
  if (!std::isfinite(out["baseline_rel_half_width"].get<double>())) {
    out["baseline_rel_half_width"] = nullptr;
  }
  for (const char* key : {"candidate_wrapper", "baseline_wrapper", "reference_kernel"}) {
    if (has_samples(state, key))
      out[std::string(key) + "_median_ms"] = bench::median(samples(state, key, where));
  }
  const bench::PairedRatio vs_base = bench::paired_ratio(cand, base);
  out["vs_baseline"] = vs_base.to_json();
  if (has_samples(state, "reference_kernel")) {
    out["vs_reference"] =
        bench::paired_ratio(cand, samples(state, "reference_kernel", where)).to_json();
  }
  double floor = 0;
  if (has_samples(state, "aa_kernel")) {
    const bench::PairedRatio aa = bench::paired_ratio(samples(state, "aa_kernel", where), base);
    floor = bench::noise_floor(aa);
    out["aa"] = aa.to_json();
  } else {
    out["aa"] = nullptr;
  }
  out["noise_floor"] = floor;
  *decision = bench::decide_speed(vs_base, floor);
  *vs_baseline = vs_base;
  out["decision"] = bench::speed_decision_name(*decision);
  int throttled = 0;
  for (const auto& b : state.value("batches", json::array()))
    throttled += b.value("throttled", false);
  out["throttled_batches"] = throttled;
  out["batches"] = state.value("batches", json::array()).size();
  return out;
}

} // namespace

json BenchProtocol::to_json() const {
  json out = {{"target_rel_half_width", target_rel_half_width},
              {"min_rounds", min_rounds},
              {"max_rounds", max_rounds},
              {"time_cap_s", time_cap_s},
              {"output_checks", output_checks},
              {"telemetry_every_rounds", telemetry_every_rounds},
              {"seed", seed},
              {"warm", warm},
              {"cold", cold}};
  if (stop_rule != "noise") out["stop_rule"] = stop_rule;
  return out;
}

json bench_request(const op::Declaration& decl, const std::vector<op::BenchShape>& shapes,
                   const BenchProtocol& protocol, const std::string& raw_samples_path) {
  json list = json::array();
  for (const auto& s : shapes)
    list.push_back(shape_keys(decl, s));
  return {{"protocol", protocol.to_json()},
          {"shapes", list},
          {"copy_ceiling_bytes", roofline::kMinCopyBytes},
          {"raw_samples_path", raw_samples_path}};
}

namespace {

// A worker result of the wrong JSON types (a string where a count belongs, an array for a state)
// or of figures the roofline arithmetic refuses is one the worker never writes: an InfraError
// naming what was refused.
template <class Gate> GateResult malformed_is_infra(const char* gate, Gate&& read) {
  try {
    return read();
  } catch (const json::exception& e) {
    throw InfraError(fmt::format("benchmark result: malformed for the {} gate ({}); the GPU "
                                 "worker and kloop disagree on the result format, rebuild both",
                                 gate, e.what()));
  } catch (const std::invalid_argument& e) { // the roofline arithmetic refused a worker figure
    throw InfraError(fmt::format("benchmark result: out of range for the {} gate ({}); the GPU "
                                 "worker and kloop disagree on the result format, rebuild both",
                                 gate, e.what()));
  }
}

GateResult read_benchmark_gate(const op::Declaration& decl, const json& r) {
  GateResult g;
  g.name = std::string(kGateBenchmark);
  json shapes_out = json::array();
  int faster = 0, slower = 0, same = 0, throttled = 0;
  std::vector<bench::PairedRatio> vs_baseline; // one per measured state, for the geometric mean
  std::string first_failure;
  for (const auto& shape : need(r, "shapes", "benchmark")) {
    const std::string where = shape_name(decl, shape);
    json states = json::array();
    for (const auto& state : need(shape, "states", where)) {
      const std::string swhere = where + " " + state.value("state", std::string("?"));
      // A state whose timed outputs were never compared proves nothing about them.
      if (state.value("output_checks", json::array()).empty() && first_failure.empty())
        first_failure = swhere + ": no timed output was checked (the worker compares at least "
                                 "one round per state with the reference)";
      for (const auto& c : state.value("output_checks", json::array())) {
        if (!c.value("pass", false) && first_failure.empty()) {
          first_failure = fmt::format("{}: timed output of round {} differs from the reference: {}",
                                      swhere, store::int_at(c, "round", -1),
                                      c.value("detail", std::string("no detail")));
          // The worker poisons the checked buffers before the round (0xFF bytes): words still
          // holding it were never written by the candidate's timed launches.
          const auto left = static_cast<std::uint64_t>(store::int_at(c, "poison_words_left", 0));
          const auto words = static_cast<std::uint64_t>(store::int_at(c, "words", 0));
          if (left > 0 && words > 0)
            first_failure += fmt::format(
                "; {} of {} 4-byte words of the output still hold the poison written before the "
                "round ({}), so the timed launches left them unwritten",
                left, words, left == words ? "all of them" : "some");
        }
      }
      bench::SpeedDecision d{};
      bench::PairedRatio ratio;
      try {
        json s = state_summary(state, swhere, &d, &ratio);
        s["output_checks"] = state.value("output_checks", json::array());
        s["input_sets"] = store::int_at(state, "input_sets", 1);
        s["blocker_timeouts"] = store::int_at(state, "blocker_timeouts", 0);
        throttled += s["throttled_batches"].get<int>();
        states.push_back(std::move(s));
      } catch (const std::invalid_argument& e) {
        if (first_failure.empty()) first_failure = swhere + ": " + e.what();
        continue;
      }
      (d == bench::SpeedDecision::kFaster   ? faster
       : d == bench::SpeedDecision::kSlower ? slower
                                            : same)++;
      vs_baseline.push_back(ratio);
    }
    json out = shape_keys(decl, parse_shape(decl, shape, where));
    out["shape_class"] = shape.value("shape_class", std::string()); // as the worker measured it
    out["states"] = states;
    shapes_out.push_back(std::move(out));
  }
  const bench::GeomeanSpeedup geomean =
      vs_baseline.empty() ? bench::GeomeanSpeedup{} : bench::geomean_speedup(vs_baseline);
  g.evidence = {
      {"device", r.value("device", json::object())},
      {"telemetry", r.value("telemetry", json::object())},
      {"protocol", r.value("protocol", json::object())},
      {"raw_samples_sha256", r.value("raw_samples_sha256", std::string())},
      // What the A/A floor was measured against (absent from workers before 2026-11-30's
      // seventh session, whose partner was the baseline's own functions).
      {"aa_partner", r.value("aa_partner", std::string("the baseline's own functions"))},
      // How slots were ordered (absent before 2026-11-30's eighth session: candidate and
      // baseline alternated at the ends, the A/A partner sat in the middle slots and
      // shared the baseline's output buffer).
      {"slot_orders", r.value("slot_orders", std::string("fixed (before the rotation; each state's "
                                                         "order fields give the slots): the A/A "
                                                         "partner in the middle slots, sharing the "
                                                         "baseline's output buffer"))},
      {"timing_scope", "kernel: CUDA events around the launch; wrapper: CUDA events "
                       "around the whole trusted-wrapper call"},
      {"shapes", shapes_out},
      {"summary",
       {{"faster", faster},
        {"slower", slower},
        {"indistinguishable", same},
        {"throttled_batches", throttled},
        {"geomean_speedup_vs_baseline", geomean.speedup},
        // Approximate 95 % interval of that geometric mean from the states' bootstrap
        // intervals (bench::geomean_speedup: measurement noise of this set of states).
        {"geomean_ci_lo", geomean.ci.lo},
        {"geomean_ci_hi", geomean.ci.hi},
        // The promotion rule's speed condition: every per-state decision already
        // compares the paired ratio's interval with that state's A/A noise floor
        // (bench::decide_speed), so a claimed speed-up needs at least one shape/state
        // faster beyond the floor and none slower beyond it.
        {"clears_noise_floor", faster > 0 && slower == 0}}}};
  if (!first_failure.empty()) {
    g.status = GateStatus::kFail;
    g.reason = first_failure;
  } else if (vs_baseline.empty()) {
    g.status = GateStatus::kNotRun;
    g.reason = "the worker measured no shape";
  } else {
    g.status = GateStatus::kPass;
  }
  return g;
}

GateResult read_roofline_gate(const op::Declaration& decl, const json& r, double margin) {
  GateResult g;
  g.name = std::string(kGateRoofline);
  const json& ceiling = need(r, "copy_ceiling", "benchmark");
  const double ceiling_tbps = roofline::copy_ceiling_tbps(
      need_int(ceiling, "bytes", "copy_ceiling", roofline::kMinCopyBytes),
      need_positive(ceiling, "time_ms", "copy_ceiling"));
  const std::int64_t l2 = need_int(need(r, "device", "benchmark"), "l2_bytes", "device", 0);
  std::map<std::string, std::vector<double>> by_class;
  json shapes_out = json::array();
  std::string first_failure;
  for (const auto& shape : need(r, "shapes", "benchmark")) {
    const std::string where = shape_name(decl, shape);
    const op::BenchShape bs = need_shape(decl, shape, where);
    const auto bytes = roofline::logical_bytes(decl, bs);
    const std::string cls(roofline::shape_class(decl, bs));
    json states = json::array();
    double cold_fraction = -1, any_fraction = -1;
    for (const auto& state : need(shape, "states", where)) {
      if (!has_samples(state, "candidate_kernel")) continue;
      const bool cold = state.value("state", std::string()) == "cold";
      const double t = bench::median(samples(state, "candidate_kernel", where));
      if (!(t > 0)) {
        if (first_failure.empty()) first_failure = where + ": a non-positive kernel time";
        continue;
      }
      const double eff = roofline::effective_tbps(bytes.unique(), t);
      const auto p = roofline::check_plausible(roofline::must_reach_dram_bytes(bytes, l2, cold), t,
                                               ceiling_tbps, margin);
      if (!p.plausible && first_failure.empty()) {
        first_failure = fmt::format(
            "{} {}: {:.4f} ms implies {:.2f} TB/s of DRAM traffic, above the copy ceiling {:.2f} "
            "TB/s (+{:.0f}%): a measurement or candidate defect, not a record",
            where, cold ? "cold" : "warm", t, p.implied_tbps, ceiling_tbps, margin * 100);
      }
      const double fraction = eff / ceiling_tbps;
      if (cold) cold_fraction = fraction;
      any_fraction = fraction;
      states.push_back(
          {{"state", cold ? "cold" : "warm"},
           {"median_ms", t},
           {"effective_tbps", eff},
           {"effective_tbps_with_rereads", roofline::effective_tbps(bytes.with_rereads(), t)},
           {"fraction_of_ceiling", fraction},
           {"plausibility", p.to_json()}});
    }
    if (cold_fraction >= 0 || any_fraction >= 0) {
      by_class[cls].push_back(cold_fraction >= 0 ? cold_fraction : any_fraction);
    }
    json s = shape_keys(decl, bs);
    s["logical_bytes"] = bytes.to_json();
    s["states"] = states;
    if (shape.contains("ncu")) s["measured_dram"] = shape["ncu"];
    shapes_out.push_back(std::move(s));
  }
  json classes = json::object();
  for (auto& [cls, fractions] : by_class) {
    classes[cls] = {{"fraction_of_ceiling_median", bench::median(fractions)},
                    {"shapes", fractions.size()}};
  }
  g.evidence = {{"copy_ceiling_tbps", ceiling_tbps},
                {"copy_ceiling", ceiling},
                {"l2_bytes", l2},
                {"margin", margin},
                {"bytes_formula", roofline::bytes_formula(decl)},
                {"shapes", shapes_out},
                {"by_class", classes}};
  if (!first_failure.empty()) {
    g.status = GateStatus::kFail;
    g.reason = first_failure;
  } else if (by_class.empty()) {
    g.status = GateStatus::kNotRun;
    g.reason = "no candidate kernel time to compare with the copy ceiling";
  } else {
    g.status = GateStatus::kPass;
  }
  return g;
}

} // namespace

GateResult benchmark_gate(const op::Declaration& decl, const json& r) {
  return malformed_is_infra("benchmark", [&] { return read_benchmark_gate(decl, r); });
}

GateResult roofline_gate(const op::Declaration& decl, const json& r, double margin) {
  return malformed_is_infra("roofline", [&] { return read_roofline_gate(decl, r, margin); });
}

std::vector<GateResult> not_run(const std::string& reason) {
  GateResult b{std::string(kGateBenchmark), GateStatus::kNotRun, reason, json::object()};
  GateResult r{std::string(kGateRoofline), GateStatus::kNotRun, reason, json::object()};
  return {b, r};
}

} // namespace kloop::evaluator::perf
