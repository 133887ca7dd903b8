// Throughput switches (throughput.h).
#include "evaluator/throughput.h"

#include <cstdlib>

#include <fmt/format.h>

namespace kloop::evaluator {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool parse_bool(std::string_view entry, std::string_view v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  throw std::invalid_argument(
      fmt::format("KLOOP_THROUGHPUT: '{}': expected 0, 1, true or false", entry));
}

int parse_int(std::string_view entry, std::string_view v, int lo, int hi) {
  int n = 0;
  bool ok = !v.empty() && v.size() < 4;
  for (char c : v) {
    ok = ok && c >= '0' && c <= '9';
    n = n * 10 + (c - '0');
  }
  if (!ok || n < lo || n > hi)
    throw std::invalid_argument(
        fmt::format("KLOOP_THROUGHPUT: '{}': expected an integer from {} to {}", entry, lo, hi));
  return n;
}

ThroughputOptions legacy() {
  ThroughputOptions o;
  o.pipeline = false;
  o.host_jobs = 1;
  o.device_candidates = 1;
  o.shared_per_device = 1;
  o.sanitizer_fail_fast = false;
  o.sanitizer_concurrent = false;
  o.racecheck_scrub = true;
  o.profile_on_demand = false;
  o.copy_ceiling_once = false;
  o.prepare_ahead = 0;
  return o;
}

} // namespace

nlohmann::json ThroughputOptions::to_json() const {
  return {{"pipeline", pipeline},
          {"host_jobs", host_jobs},
          {"device_candidates", device_candidates},
          {"shared_per_device", shared_per_device},
          {"sanitizer_fail_fast", sanitizer_fail_fast},
          {"sanitizer_concurrent", sanitizer_concurrent},
          {"racecheck_scrub", racecheck_scrub},
          {"profile_on_demand", profile_on_demand},
          {"bench_stop", bench_stop},
          {"copy_ceiling_once", copy_ceiling_once},
          {"prepare_ahead", prepare_ahead}};
}

ThroughputOptions parse_throughput(std::string_view spec) {
  ThroughputOptions o;
  spec = trim(spec);
  if (spec.empty() || spec == "default") return o;
  if (spec == "legacy") return legacy();
  std::size_t pos = 0;
  bool first = true;
  while (pos <= spec.size()) {
    const std::size_t comma = spec.find(',', pos);
    const std::string_view entry =
        trim(spec.substr(pos, comma == std::string_view::npos ? spec.size() - pos : comma - pos));
    pos = comma == std::string_view::npos ? spec.size() + 1 : comma + 1;
    if (entry.empty()) continue;
    if (first && entry == "legacy") {
      o = legacy();
      first = false;
      continue;
    }
    first = false;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument(fmt::format(
          "KLOOP_THROUGHPUT: '{}' is not name=value (or 'legacy' / 'default' alone)", entry));
    const std::string_view name = trim(entry.substr(0, eq)), value = trim(entry.substr(eq + 1));
    if (name == "pipeline")
      o.pipeline = parse_bool(entry, value);
    else if (name == "host_jobs")
      o.host_jobs = parse_int(entry, value, 0, 64);
    else if (name == "device_candidates")
      o.device_candidates = parse_int(entry, value, 1, 8);
    else if (name == "shared_per_device")
      o.shared_per_device = parse_int(entry, value, 1, 8);
    else if (name == "sanitizer_fail_fast")
      o.sanitizer_fail_fast = parse_bool(entry, value);
    else if (name == "sanitizer_concurrent")
      o.sanitizer_concurrent = parse_bool(entry, value);
    else if (name == "racecheck_scrub")
      o.racecheck_scrub = parse_bool(entry, value);
    else if (name == "profile_on_demand")
      o.profile_on_demand = parse_bool(entry, value);
    else if (name == "copy_ceiling_once")
      o.copy_ceiling_once = parse_bool(entry, value);
    else if (name == "prepare_ahead")
      o.prepare_ahead = parse_int(entry, value, 0, 16);
    else if (name == "bench_stop") {
      if (value != "noise" && value != "decision")
        throw std::invalid_argument(
            fmt::format("KLOOP_THROUGHPUT: '{}': expected noise or decision", entry));
      o.bench_stop = std::string(value);
    } else
      throw std::invalid_argument(fmt::format(
          "KLOOP_THROUGHPUT: unknown switch '{}' (known: pipeline, host_jobs, "
          "device_candidates, shared_per_device, sanitizer_fail_fast, sanitizer_concurrent, "
          "racecheck_scrub, profile_on_demand, bench_stop, copy_ceiling_once, prepare_ahead)",
          name));
  }
  return o;
}

ThroughputOptions throughput_from_env() {
  const char* v = std::getenv("KLOOP_THROUGHPUT");
  return parse_throughput(v ? v : "");
}

} // namespace kloop::evaluator
