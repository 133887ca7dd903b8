// The worker's "benchmark" mode (bench_run.h): per shape and cache state,
// rounds of eight kernel launches X Y R Z Z R Y X, where R is the trusted reference and (X, Y, Z)
// cycles through the six orders of (candidate, baseline, A/A partner) round by round
// (evaluator::bench::kernel_slot_order), so every path takes every position equally often and the
// A/A floor is measured at the same positions as the candidate; then C B B C wrapper calls
// (B C C B in odd rounds), each bracketed by its own CUDA events. The A/A partner is the
// baseline's cubin loaded a second time as its own library, so the A/A pair runs separately loaded
// code. The candidate, the baseline and the A/A partner write three output buffers per input set,
// buffer k going with the k-th mirrored slot pair (the reference keeps one); all three
// are poisoned before each checked round. Cold samples flush L2 first
// (flush_l2 over 2x L2: evicts evict_last lines too, then a memset); warm samples of large shapes
// rotate among input sets totalling >= 4x L2; sampling stops, after a whole cycle of orders, when
// both medians are known to 1% (or at the time cap); sampled candidate outputs are compared on the
// device with the reference kernel's output; NVML telemetry once per batch; the copy ceiling is a
// timed 1 GiB device-to-device copy. Each round is enqueued behind a blocking kernel and released
// at once, so host launch latency never lands in a timed interval (without it the first slot of
// every warm round timed the host's launch of that slot on an idle GPU); two untimed launches
// follow the release (the first launches after it ran slower).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <fmt/format.h>

#include "evaluator/bench_stats.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/gpu_worker/bench_kernels.h"
#include "evaluator/gpu_worker/bench_launch.h"
#include "evaluator/gpu_worker/bench_run.h"
#include "evaluator/gpu_worker/telemetry.h"
#include "evaluator/roofline.h"
#include "kernels/manifest.h"
#include "store/hash.h"

namespace kloop::gpu {

namespace {

using nlohmann::json;

class EventPair {
public:
  EventPair() {
    check(cudaEventCreate(&a_), "cudaEventCreate");
    check(cudaEventCreate(&b_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start(cudaStream_t s) { check(cudaEventRecord(a_, s), "cudaEventRecord"); }
  void stop(cudaStream_t s) { check(cudaEventRecord(b_, s), "cudaEventRecord"); }
  double ms() const {
    float v = 0;
    check(cudaEventElapsedTime(&v, a_, b_), "cudaEventElapsedTime");
    return v;
  }

private:
  cudaEvent_t a_{}, b_{};
};

// A host-pinned int mapped into the device's address space: the release flag of block_stream.
class HostFlag {
public:
  HostFlag() {
    void* host = nullptr;
    check(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped),
          "cudaHostAlloc (blocking-kernel flag)");
    host_ = static_cast<int*>(host);
    arm();
    void* dev = nullptr;
    check(cudaHostGetDevicePointer(&dev, host, 0), "cudaHostGetDevicePointer");
    dev_ = static_cast<int*>(dev);
  }
  ~HostFlag() { cudaFreeHost(host_); }
  HostFlag(const HostFlag&) = delete;
  HostFlag& operator=(const HostFlag&) = delete;
  void arm() {
    std::atomic_ref<int>(host_[0]).store(0);
    std::atomic_ref<int>(host_[1]).store(0);
  }
  void release() { std::atomic_ref<int>(host_[0]).store(1); } // seq_cst store
  bool timed_out() const { return std::atomic_ref<int>(host_[1]).load() != 0; }
  const volatile int* release_dev() const { return dev_; }
  int* timed_out_dev() const { return dev_ + 1; }

private:
  int* host_ = nullptr; // host view (written by the host, read by the GPU through dev_)
  int* dev_ = nullptr;  // device view of the same bytes
};

// Longest the blocking kernel holds a round (a host that needs longer to enqueue 12 launches is
// reported per state as blocker_timeouts; those rounds may include host latency).
constexpr unsigned long long kBlockTimeoutNs = 50'000'000ULL;
// Untimed reference launches between the release and the first timed slot of a round.
constexpr int kSpacers = 2;

// How the timed paths share slot positions and output buffers (recorded with every result).
constexpr const char* kSlotOrdersText =
    "rotated: candidate, baseline and A/A partner cycle through the six orders of X Y R Z Z R Y X, "
    "with three output buffers per input set tied to the slot pairs";

double copy_ceiling_ms(cudaStream_t s) {
  const std::size_t bytes = static_cast<std::size_t>(evaluator::roofline::kMinCopyBytes);
  DeviceBuffer src(bytes), dst(bytes);
  check(cudaMemsetAsync(src.data(), 1, bytes, s), "memset copy source");
  EventPair ev;
  std::vector<double> t;
  for (int i = 0; i < 12; ++i) {
    ev.start(s);
    check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s), "copy");
    ev.stop(s);
    check(cudaStreamSynchronize(s), "copy ceiling");
    if (i >= 2) t.push_back(ev.ms());
  }
  return evaluator::bench::median(t);
}

// Device buffers of one benchmark shape: per input set the batched inputs, three output sets
// that the candidate, the baseline and the A/A partner take with their slot pair (out_of in
// bench_shape), and the reference's outputs for the checks; the broadcast inputs once, shared by
// every set (as a deployed weight is); one scratch output set for the reference's own launches.
class BenchBuffers {
public:
  static constexpr int kRefOut = 3, kScratchOut = 4; // output-set indices beside 0, 1, 2
  BenchBuffers(const ShapePlan& plan, int sets, std::uint64_t seed, cudaStream_t s)
      : plan_(plan), inputs_(sets), outs_(sets) {
    const op::Declaration& d = plan.op->declaration();
    int broadcast = 0;
    for (int t : plan.inputs)
      if (!d.tensors[static_cast<std::size_t>(t)].batched) {
        shared_.emplace(t, DeviceBuffer(plan.bytes[static_cast<std::size_t>(t)]));
        check(fill_input(plan, t, shared_.at(t).data(), seed * 1000 + 999 - broadcast++, s),
              "fill broadcast input");
      }
    for (int i = 0; i < sets; ++i) {
      int batched = 0;
      for (int t : plan.inputs)
        if (d.tensors[static_cast<std::size_t>(t)].batched) {
          inputs_[i].emplace(t, DeviceBuffer(plan.bytes[static_cast<std::size_t>(t)]));
          check(fill_input(plan, t, inputs_[i].at(t).data(),
                           seed * 1000 + static_cast<std::uint64_t>(i) + 100 * batched++, s),
                "fill batched input");
        }
      for (int k = 0; k < 4; ++k)
        outs_[i].push_back(output_set());
    }
    scratch_ = output_set();
  }
  // Addresses of every declared tensor for input set `set` and output set `out`.
  std::vector<std::uintptr_t> addresses(int set, int out) const {
    std::vector<std::uintptr_t> a(plan_.bytes.size(), 0);
    for (const auto& [t, b] : shared_)
      a[t] = reinterpret_cast<std::uintptr_t>(b.data());
    for (const auto& [t, b] : inputs_[set])
      a[t] = reinterpret_cast<std::uintptr_t>(b.data());
    const std::vector<DeviceBuffer>& o = out == kScratchOut ? scratch_ : outs_[set][out];
    for (std::size_t k = 0; k < plan_.outputs.size(); ++k)
      a[plan_.outputs[k]] = reinterpret_cast<std::uintptr_t>(o[k].data());
    return a;
  }
  const std::vector<DeviceBuffer>& outputs(int set, int out) const { return outs_[set][out]; }
  // Bytes of one input set and its four output sets (the memory a set takes).
  static std::size_t set_bytes(const ShapePlan& plan) {
    std::size_t n = 0;
    for (int t : plan.inputs)
      if (plan.op->declaration().tensors[static_cast<std::size_t>(t)].batched)
        n += plan.bytes[static_cast<std::size_t>(t)];
    for (int t : plan.outputs)
      n += 4 * plan.bytes[static_cast<std::size_t>(t)];
    return n;
  }

private:
  const ShapePlan& plan_;
  std::map<int, DeviceBuffer> shared_;
  std::vector<std::map<int, DeviceBuffer>> inputs_;
  std::vector<std::vector<std::vector<DeviceBuffer>>> outs_;
  std::vector<DeviceBuffer> scratch_;
  std::vector<DeviceBuffer> output_set() const {
    std::vector<DeviceBuffer> o;
    for (int t : plan_.outputs)
      o.emplace_back(plan_.bytes[static_cast<std::size_t>(t)]);
    return o;
  }
};

// Input sets of a shape: one when its batched traffic is small against L2; else enough that the
// warm samples rotate through at least 4x L2, at most 64 and within 24 GiB of buffers.
int input_sets(const ShapePlan& plan, std::int64_t l2) {
  const std::size_t traffic = std::max<std::size_t>(plan.batched_traffic(), 1);
  if (traffic * 2 < static_cast<std::size_t>(l2)) return 1;
  int sets = static_cast<int>(std::clamp<std::size_t>((4 * l2 + traffic - 1) / traffic, 1, 64));
  while (sets > 1 && sets * BenchBuffers::set_bytes(plan) > (std::size_t{24} << 30))
    --sets;
  return sets;
}

// Device-side check of one output set against the reference's: {"pass", "failing_elements",
// "first_failing", "max_abs_err", "poison_words_left", "words"} summed over the outputs, each
// compared with its own tolerance.
json check_outputs(const ShapePlan& plan, const std::vector<DeviceBuffer>& got,
                   const std::vector<DeviceBuffer>& want, DeviceBuffer& cmp, cudaStream_t s) {
  const op::Declaration& d = plan.op->declaration();
  unsigned long long failing = 0, first = 0, poison_left = 0, words = 0;
  double max_err = 0;
  std::string first_tensor;
  for (std::size_t k = 0; k < plan.outputs.size(); ++k) {
    const op::Tensor& decl = d.tensors[static_cast<std::size_t>(plan.outputs[k])];
    const DType dt = decl.dtype == op::DTypeRule::kFloat32 ? DType::kFloat32 : plan.shape.dtype;
    const op::Tolerance tol = plan.op->tolerance(plan.shape.dtype, plan.outputs[k]);
    const std::size_t bytes = got[k].size();
    check(compare_outputs(dt, got[k].data(), want[k].data(),
                          static_cast<std::int64_t>(bytes / dtype_bytes(dt)), tol.atol, tol.rtol,
                          reinterpret_cast<unsigned long long*>(cmp.data()), s),
          "output check");
    unsigned long long c[3] = {};
    copy_to_host(c, cmp.data(), sizeof(c), s, "output check copy");
    double err = 0;
    std::memcpy(&err, &c[2], sizeof(double));
    max_err = std::max(max_err, err);
    if (c[0] != 0 && failing == 0) {
      first = c[1];
      first_tensor = decl.name;
    }
    failing += c[0];
    // How much of the poison survived (whole 4-byte words): all of it when the candidate's timed
    // launches wrote nothing, none when they wrote every element.
    unsigned long long left = 0;
    check(count_words(got[k].data(), bytes, 0xffffffffu,
                      reinterpret_cast<unsigned long long*>(cmp.data()), s),
          "poison count");
    copy_to_host(&left, cmp.data(), sizeof(left), s, "poison count copy");
    poison_left += left;
    words += bytes / 4;
  }
  const std::string where = plan.outputs.size() > 1 ? " of " + first_tensor : "";
  return {{"poison_words_left", poison_left},
          {"words", words},
          {"pass", failing == 0},
          {"failing_elements", failing},
          {"max_abs_err", max_err},
          {"detail", failing == 0 ? ""
                                  : fmt::format("{} elements outside tolerance, first at flat "
                                                "index {}{}",
                                                failing, first - 1, where)}};
}

// One shape: buffers, launchers, the cold and warm sample loops.
json bench_shape(const op::Operator& op, const json& shape_json, const json& protocol,
                 const LoadedCandidate& cand, const LoadedCandidate* baseline,
                 const LoadedCandidate* aa_partner, const op::DeviceInfo& device, std::int64_t l2,
                 const Telemetry& tel, cudaStream_t s, std::string* failure) {
  const auto t_setup = std::chrono::steady_clock::now(); // "setup_ms": buffers to warm-up
  const op::Declaration& d = op.declaration();
  const op::BenchShape shape = read_shape(d, shape_json);
  const std::string name = shape.label(d);
  const ShapePlan plan = plan_shape(op, shape);
  const std::uint64_t seed = protocol.value("seed", std::uint64_t{1});
  const int sets = input_sets(plan, l2);
  const BenchBuffers buf(plan, sets, seed, s);
  DeviceBuffer flush(static_cast<std::size_t>((2 * l2 + 127) / 128 * 128)), cmp(24);
  json out = shape.to_json(d);
  out["shape_class"] = evaluator::roofline::shape_class(d, shape);
  out["input_sets"] = sets;
  out["rotation_bytes"] = sets * plan.batched_traffic();
  out["output_buffers"] = "three per input set, one per mirrored slot pair (candidate, baseline "
                          "and A/A partner take them with their slots)";
  std::unique_ptr<CallLauncher> pc = plan.launcher(&cand, device, buf.addresses(0, 0));
  if (!pc->failure().empty()) {
    *failure = fmt::format("{}: launch failed: {}", name, pc->failure());
    out["error"] = "launch failed: " + pc->failure();
    return out;
  }
  std::unique_ptr<CallLauncher> pb = plan.launcher(baseline, device, buf.addresses(0, 1));
  std::unique_ptr<CallLauncher> pr =
      plan.launcher(nullptr, device, buf.addresses(0, BenchBuffers::kScratchOut));
  // Without a baseline cubin both the baseline and its A/A partner are the reference kernel.
  std::unique_ptr<CallLauncher> pa =
      plan.launcher(baseline ? aa_partner : nullptr, device, buf.addresses(0, 2));
  for (const CallLauncher* l : {pb.get(), pa.get()})
    if (!l->failure().empty())
      throw std::runtime_error(name + ": the baseline does not launch: " + l->failure());
  out["paths"] = {{"candidate", pc->to_json()},
                  {"baseline", pb->to_json()},
                  {"reference", pr->to_json()},
                  {"aa_partner", pa->to_json()}};
  for (int i = 0; i < sets; ++i) {
    check(pr->launch(buf.addresses(i, BenchBuffers::kRefOut), s), "reference launch");
  }
  // Launches path `p` on input set `set` into output set `out`.
  auto run = [&](const CallLauncher& p, bool wrapper, int set, int out) {
    const std::vector<std::uintptr_t> a = buf.addresses(set, out);
    const cudaError_t e = wrapper ? p.wrapper_call(a, s) : p.launch(a, s);
    if (e == cudaSuccess) return;
    if (is_sticky(e)) throw StickyFault{e, "timed launch"};
    throw std::runtime_error("timed launch failed: " + cuda_error_text(e));
  };
  auto launcher = [&](evaluator::bench::SlotPath path) -> const CallLauncher* {
    switch (path) {
    case evaluator::bench::SlotPath::kCandidate:
      return pc.get();
    case evaluator::bench::SlotPath::kBaseline:
      return pb.get();
    case evaluator::bench::SlotPath::kAaPartner:
      return pa.get();
    case evaluator::bench::SlotPath::kReference:
      break;
    }
    return pr.get();
  };
  // The output set of a path in round `round`: the candidate, the baseline and the A/A partner
  // write output set k of the input set, k the mirrored slot pair they hold that round (0: slots 1
  // and 8, 1: slots 2 and 7, 2: slots 4 and 5), so all three meet the same (position, buffer)
  // pairs over a cycle; the reference writes the scratch set.
  auto out_of = [&](const CallLauncher* p, int round) -> int {
    const auto order = evaluator::bench::kernel_slot_order(round);
    const int first_slot[3] = {0, 1, 3};
    for (int k = 0; k < 3; ++k)
      if (launcher(order[first_slot[k]]) == p) return k;
    return BenchBuffers::kScratchOut;
  };
  for (int i = 0; i < 3; ++i) { // warm-up: modules loaded, clocks up
    for (const CallLauncher* p : {pc.get(), pb.get(), pr.get(), pa.get()})
      run(*p, false, 0, out_of(p, 0));
  }
  check(cudaStreamSynchronize(s), "warm-up");
  const double target = protocol.value("target_rel_half_width", 0.01);
  const int min_rounds = protocol.value("min_rounds", 10);
  // Whole cycles of slot orders only: the round cap is rounded down to a multiple of six, but never
  // below min_rounds rounded up (the checked rounds are drawn from [0, min_rounds)).
  constexpr int kCycle = evaluator::bench::kSlotOrders;
  const int max_rounds = std::max((std::max(min_rounds, 1) + kCycle - 1) / kCycle * kCycle,
                                  protocol.value("max_rounds", 400) / kCycle * kCycle);
  const double cap_s = protocol.value("time_cap_s", 5.0);
  const int checks = protocol.value("output_checks", 3);
  // "decision": a state also stops once its speed decision is settled (bench::decision_settled),
  // after at least two whole cycles of orders.
  const bool decision_stop = protocol.value("stop_rule", std::string("noise")) == "decision";
  const std::size_t decision_min_rounds =
      static_cast<std::size_t>(std::max(min_rounds, 2 * kCycle));
  const int batch = std::max(1, protocol.value("telemetry_every_rounds", 8));
  out["setup_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_setup).count();
  json states = json::array();
  for (const char* state : {"cold", "warm"}) {
    const bool cold = std::string(state) == "cold";
    if (!protocol.value(state, true)) continue;
    std::set<int> check_rounds{min_rounds - 1};
    std::mt19937_64 rng(seed + (cold ? 17 : 29));
    while (static_cast<int>(check_rounds.size()) < std::min(checks, min_rounds)) {
      check_rounds.insert(static_cast<int>(rng() % static_cast<std::uint64_t>(min_rounds)));
    }
    std::map<std::string, std::vector<double>> samp;
    json batches = json::array(), checks_out = json::array();
    struct Slot {
      const char* key;
      const CallLauncher* p;
      bool wrapper;
    };
    // Round r runs orders[r % kSlotOrders]: the rotated kernel slots, then C B B C wrapper calls
    // (B C C B in odd rounds; kSlotOrders is even, so each cycle has both).
    constexpr int kSlots = 12;
    std::vector<std::array<Slot, kSlots>> orders;
    json orders_out = json::array();
    for (int o = 0; o < evaluator::bench::kSlotOrders; ++o) {
      std::array<Slot, kSlots> round{};
      const auto kernels = evaluator::bench::kernel_slot_order(o);
      for (std::size_t i = 0; i < kernels.size(); ++i) {
        round[i] = {evaluator::bench::slot_path_key(kernels[i]).data(), launcher(kernels[i]),
                    false};
      }
      const Slot c{"candidate_wrapper", pc.get(), true}, b{"baseline_wrapper", pb.get(), true};
      round[8] = o % 2 ? b : c;
      round[9] = o % 2 ? c : b;
      round[10] = o % 2 ? c : b;
      round[11] = o % 2 ? b : c;
      json keys = json::array();
      for (const Slot& sl : round)
        keys.push_back(sl.key);
      orders_out.push_back(keys);
      orders.push_back(round);
    }
    HostFlag flag;
    std::vector<std::unique_ptr<EventPair>> ev;
    for (int i = 0; i < kSlots; ++i)
      ev.push_back(std::make_unique<EventPair>());
    const auto t0 = std::chrono::steady_clock::now();
    std::string stop = "max_rounds";
    int r = 0, batch_first = 0, blocker_timeouts = 0;
    for (; r < max_rounds; ++r) {
      const int set = cold ? 0 : r % sets;
      // The whole round is enqueued behind the blocking kernel and released at once, so every
      // slot starts on a busy stream: no slot (the first one after the previous round's
      // synchronize in particular) times the host's launch latency.
      // A checked round first poisons the three output buffers of the set (0xFF bytes: NaN in
      // every dtype), so the check fails when the candidate's timed launches leave elements
      // unwritten; another path wrote correct output into its buffer in an earlier round.
      // Enqueued before the blocking kernel, it stays out of every timed interval; in a warm state
      // it changes what L2 holds for that round, for every path alike (at most `output_checks`
      // rounds of the run).
      if (check_rounds.count(r)) {
        for (int k = 0; k < 3; ++k) // all three, so the memsets leave every path's L2 state alike
          for (const DeviceBuffer& y : buf.outputs(set, k))
            check(cudaMemsetAsync(y.data(), 0xff, y.size(), s), "poison the checked output");
      }
      flag.arm();
      check(block_stream(flag.release_dev(), flag.timed_out_dev(), kBlockTimeoutNs, s),
            "blocking kernel");
      // Untimed spacer launches: the first launches after the release ran about 1 us slower
      // (H200, 8 x 4096) whatever they were, so no timed slot comes first.
      for (int k = 0; k < kSpacers; ++k)
        run(*pr, false, set, BenchBuffers::kScratchOut);
      const auto& round = orders[r % evaluator::bench::kSlotOrders];
      for (int i = 0; i < kSlots; ++i) {
        if (cold) check(flush_l2(flush.data(), flush.size(), r & 0xff, s), "L2 flush");
        ev[i]->start(s);
        run(*round[i].p, round[i].wrapper, set, out_of(round[i].p, r));
        ev[i]->stop(s);
      }
      flag.release();
      check(cudaStreamSynchronize(s), "benchmark round");
      if (flag.timed_out()) ++blocker_timeouts;
      for (int i = 0; i < kSlots; ++i)
        samp[round[i].key].push_back(ev[i]->ms());
      if (check_rounds.count(r)) {
        json c = check_outputs(plan, buf.outputs(set, out_of(pc.get(), r)),
                               buf.outputs(set, BenchBuffers::kRefOut), cmp, s);
        c["round"] = r;
        c["set"] = set;
        if (!c["pass"].get<bool>() && failure->empty()) {
          *failure = fmt::format("{} {}: timed output of round {} differs from the reference ({} "
                                 "elements)",
                                 name, state, r, c["failing_elements"].get<unsigned long long>());
        }
        checks_out.push_back(std::move(c));
      }
      if ((r + 1) % batch == 0) {
        json b = tel.read().to_json();
        b["first_round"] = batch_first;
        b["last_round"] = r;
        batches.push_back(b);
        batch_first = r + 1;
      }
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // Stop only after whole cycles of orders, so every path took every position equally often.
      const bool whole_cycle = (r + 1) % evaluator::bench::kSlotOrders == 0;
      if (r + 1 >= min_rounds && whole_cycle &&
          evaluator::bench::noise_converged(samp["candidate_kernel"], target, 2 * min_rounds) &&
          evaluator::bench::noise_converged(samp["baseline_kernel"], target, 2 * min_rounds)) {
        stop = "noise";
        ++r;
        break;
      }
      if (decision_stop && r + 1 >= min_rounds && whole_cycle &&
          evaluator::bench::decision_settled(samp["candidate_kernel"], samp["baseline_kernel"],
                                             samp["aa_kernel"], decision_min_rounds)) {
        stop = "decision";
        ++r;
        break;
      }
      if (elapsed > cap_s && r + 1 >= min_rounds && whole_cycle) {
        stop = "time_cap";
        ++r;
        break;
      }
    }
    states.push_back(
        {{"state", state},
         {"rounds", r},
         {"stop", stop},
         {"wall_ms",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()},
         {"orders", orders_out},
         {"order_rule", "round r runs orders[r % 6]"},
         {"max_rounds_whole_cycles", max_rounds},
         {"untimed_spacers", kSpacers},
         {"launch_queue", "blocking kernel per round (all slots enqueued first)"},
         {"blocker_timeouts", blocker_timeouts},
         {"input_sets", cold ? 1 : sets},
         {"samples", samp},
         {"batches", batches},
         {"output_checks", checks_out}});
  }
  out["states"] = states;
  return out;
}

} // namespace

bool load_baseline(const op::Operator& op, const json& req, const std::filesystem::path& dir,
                   Library& lib, LoadedCandidate& out, Library* aa_lib, LoadedCandidate* aa_out) {
  const json b = req.contains("baseline")
                     ? req["baseline"]
                     : req.value("options", json::object()).value("baseline", json());
  if (!b.is_object()) return false;
  auto slurp = [&](const std::string& name) {
    std::ifstream in(dir / name, std::ios::binary);
    if (!in) throw std::runtime_error("baseline: cannot read " + (dir / name).string());
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const op::ManifestParse mp = op::parse_manifest(op.declaration(), b.at("manifest").dump());
  if (!mp.manifest) throw std::runtime_error("baseline manifest: " + mp.errors.front().message);
  const std::string cubin = slurp(b.value("cubin", "baseline.cubin"));
  if (std::string why = load_candidate(*mp.manifest, cubin, lib, out); !why.empty())
    throw std::runtime_error("baseline cubin: " + why);
  if (aa_lib != nullptr && aa_out != nullptr) {
    if (std::string why = load_candidate(*mp.manifest, cubin, *aa_lib, *aa_out); !why.empty())
      throw std::runtime_error("the A/A partner's load of the baseline cubin: " + why);
    for (std::size_t v = 0; v < aa_out->kernels.size(); ++v)
      for (const auto& [dtype, k] : aa_out->kernels[v])
        if (out.kernels[v].count(dtype) && out.kernels[v].at(dtype) == k)
          throw std::runtime_error("baseline: the A/A partner's kernel handle equals the "
                                   "baseline's; the second library load did not give separate "
                                   "code");
  }
  return true;
}

ModeOutcome run_benchmark(const json& req, const op::Operator& op, const LoadedCandidate& cand,
                          const op::DeviceInfo& device, const std::filesystem::path& dir,
                          json extra) {
  const json spec = req.contains("benchmark")
                        ? req["benchmark"]
                        : req.value("options", json::object()).value("benchmark", json::object());
  const json protocol = spec.value("protocol", json::object());
  // The A/A partner: the same baseline cubin bytes in a library of their own (not the baseline's
  // functions launched twice), so the noise floor covers what separately loaded code adds.
  Library base_lib, aa_lib;
  LoadedCandidate base, aa;
  const bool have_base = load_baseline(op, req, dir, base_lib, base, &aa_lib, &aa);
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
  char pci[32] = {};
  cudaDeviceGetPCIBusId(pci, sizeof(pci), 0);
  Telemetry tel(pci);
  Stream stream;
  json result{{"device",
               {{"name", extra.value("device", json::object()).value("name", "")},
                {"l2_bytes", l2},
                {"sm_count", device.sm_count}}},
              {"protocol", protocol},
              {"baseline", have_base ? "in-tree baseline cubin" : "trusted reference kernel"},
              {"aa_partner", have_base ? "the baseline cubin loaded a second time (own library)"
                                       : "trusted reference kernel"},
              {"slot_orders", kSlotOrdersText},
              {"telemetry", tel.to_json()}};
  const std::int64_t copy_bytes = evaluator::roofline::kMinCopyBytes;
  // A ceiling measured by an earlier batch of this session on this device (issue 26: measured
  // once per session and device), passed by kloop as options.copy_ceiling_given; else measured.
  const json given = req.value("options", json::object()).value("copy_ceiling_given", json());
  json timings = json::object();
  if (given.is_object() && given.value("bytes", std::int64_t{0}) == copy_bytes &&
      given.value("time_ms", 0.0) > 0) {
    result["copy_ceiling"] = given;
    result["copy_ceiling"]["measured"] = "by an earlier benchmark batch of this session on this "
                                         "device (kloop passed it in)";
  } else {
    const auto t_copy = std::chrono::steady_clock::now();
    const double copy_ms = copy_ceiling_ms(stream.get());
    timings["copy_ceiling_ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_copy)
            .count();
    result["copy_ceiling"] = {
        {"bytes", copy_bytes},
        {"time_ms", copy_ms},
        {"tbps", evaluator::roofline::copy_ceiling_tbps(copy_bytes, copy_ms)}};
  }
  json shapes = json::array();
  std::string failure;
  json list = spec.value("shapes", json::array());
  if (list.empty()) {
    for (const op::BenchShape& s : op.benchmark_shapes())
      list.push_back(s.to_json(op.declaration()));
  }
  for (const auto& shape : list) {
    shapes.push_back(bench_shape(op, shape, protocol, cand, have_base ? &base : nullptr,
                                 have_base ? &aa : nullptr, device, l2, tel, stream.get(),
                                 &failure));
  }
  result["shapes"] = shapes;
  timings["bench_setup_ms"] = 0.0;
  timings["bench_states"] = json::array();
  for (const auto& sh : shapes) { // phase timings (evaluator/phases.h)
    timings["bench_setup_ms"] = timings["bench_setup_ms"].get<double>() + sh.value("setup_ms", 0.0);
    for (const auto& st : sh.value("states", json::array()))
      timings["bench_states"].push_back({{"shape_class", sh.value("shape_class", std::string())},
                                         {"state", st.value("state", std::string())},
                                         {"ms", st.value("wall_ms", 0.0)},
                                         {"rounds", st.value("rounds", 0)},
                                         {"stop", st.value("stop", std::string())}});
  }
  extra["timings"] = std::move(timings);
  const std::string raw = result.dump();
  const std::filesystem::path raw_path = dir / "bench_raw.json";
  std::ofstream(raw_path, std::ios::binary) << raw;
  result["raw_samples_path"] = raw_path.filename().string();
  result["raw_samples_sha256"] = store::sha256_hex(raw);
  extra["benchmark"] = std::move(result);
  ModeOutcome o;
  o.status = failure.empty() ? "pass" : "fail";
  o.reason = failure;
  o.extra = std::move(extra);
  return o;
}

bool is_perf_mode(const std::string& mode) {
  return mode == "benchmark" || mode == "sanitize" || mode == "pcsample";
}

ModeOutcome run_perf_mode(const json& req, const op::Operator& op, const LoadedCandidate& cand,
                          const op::DeviceInfo& device, const std::filesystem::path& dir,
                          json extra) {
  const std::string mode = req.value("mode", "");
  if (mode == "benchmark") return run_benchmark(req, op, cand, device, dir, std::move(extra));
  if (mode == "sanitize") return run_sanitize(req, op, cand, device, std::move(extra));
  return run_pcsample(req, op, cand, device, dir, std::move(extra));
}

} // namespace kloop::gpu
