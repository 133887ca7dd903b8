// The switchable throughput measures of issue 26. Each one is meant to keep every verdict (the
// defect and precision corpora, the checker-coverage record, the baseline's calibration decide on
// the device), and each can be turned off on its own, so the same device call can measure a
// session before and after: `KLOOP_THROUGHPUT=legacy` is the evaluator as it was before (one
// candidate at a time through every stage, the four sanitizer tools one after another on every
// case, CUPTI sampling and ncu after every passing benchmark), `KLOOP_THROUGHPUT=name=value,...`
// changes single switches from the defaults below. The session records the switches in force
// (params "throughput"), and `kloop optimize` prints them.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kloop::evaluator {

struct ThroughputOptions {
  // Scheduler (agent/scheduler.h): host stages (contract, build, static) of later candidates run
  // while the device stages of earlier ones run, and several candidates share a device (timed
  // work stays alone on it). false: one candidate at a time through every stage.
  bool pipeline = true;
  int host_jobs = 0;         // candidates in host stages at once; 0: min(batch, cores / 2, 8)
  int device_candidates = 2; // candidates in device stages at once on one device (1..8)
  // Processes of shared work (correctness, sanitizer tools) at once on one device (1..8): the
  // three concurrent narrower sanitizer tools plus another candidate's correctness batch.
  int shared_per_device = 4;
  // Sanitizer gate (evaluator/sanitizer.h): memcheck first and alone; the gate stops after the
  // first tool that reports hazards (its status and reason are then already decided).
  bool sanitizer_fail_fast = true;
  // After a clean memcheck, racecheck, initcheck and synccheck run at once, each in its own copy
  // of the request folder.
  bool sanitizer_concurrent = true;
  // The shared-memory scrub (poisoning) before each launch also in the racecheck run. racecheck
  // tracks accesses, not values, and the poisoning verdict comes from the memcheck run alone, so
  // there the scrub is pure cost: its stores to all of every SM's shared memory made racecheck
  // about 38 of a candidate's 54 s on the H200 (2026-12-02). false: memcheck, initcheck and
  // synccheck scrub, racecheck does not.
  bool racecheck_scrub = false;
  // Profiling evidence that is no gate: CUPTI stall sampling only for a candidate whose report
  // feeds a next prompt (not in the last iteration), ncu's measured DRAM traffic not per
  // candidate (the roofline evidence says it did not run and why). false: both after every
  // passing benchmark.
  bool profile_on_demand = true;
  // The benchmark's stopping rule (perf::BenchProtocol::stop_rule): "noise" (both medians known to
  // 1 %, or a cap) or "decision" (also as soon as a state's speed decision is settled,
  // bench::decision_settled). Off by default until the device runs show the baseline's
  // calibration (0 faster / 0 slower against itself) holds with it.
  std::string bench_stop = "noise";
  // The copy ceiling measured once per session and device (the first benchmark batch's), not in
  // every benchmark batch (GpuGatesOptions::copy_ceiling).
  bool copy_ceiling_once = true;
  // Correctness batches prepare this many cases ahead of the running one on other host threads
  // (inputs materialized, reference computed; SuiteRunOptions::prepare_ahead), 0..16. 0 (the
  // default): each case when it runs. Off by default: on the H200 host 4 ahead did not shorten the
  // baseline's correctness batch (3.66 / 3.24 s against 2.80 / 3.44 s, 2026-12-02), since the
  // host work there is not what the batch waits for; it may help a slow host.
  int prepare_ahead = 0;
  nlohmann::json to_json() const; // every switch by name
};

// Parses a KLOOP_THROUGHPUT value: "" or "default" (the defaults), "legacy" (every measure off),
// else comma-separated name=value entries over the defaults ("legacy," may start the list), names
// as in to_json(), booleans 0/1/true/false, integers in 0..64 (host_jobs) or 1..8, bench_stop
// noise or decision. Throws
// std::invalid_argument naming the entry and what is accepted.
ThroughputOptions parse_throughput(std::string_view spec);

// parse_throughput($KLOOP_THROUGHPUT), "" when unset.
ThroughputOptions throughput_from_env();

} // namespace kloop::evaluator
