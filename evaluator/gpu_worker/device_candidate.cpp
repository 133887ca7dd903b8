// The device adapter of the correctness gate (see device_candidate.h).
#include "evaluator/gpu_worker/device_candidate.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "evaluator/output_audit.h"

namespace kloop::gpu {
namespace {

using evaluator::audit::kGuardByte;
using evaluator::audit::kPoisonFinite;
using evaluator::audit::kPoisonNan;
constexpr std::int64_t kSmallCase = 1 << 16; // elements: repeated small_repeats times
constexpr std::int64_t kConcurrentMax = 1 << 22;

// Device buffer of `bytes` user bytes between two guard regions.
class Guarded {
public:
  Guarded(std::size_t bytes, std::size_t guard)
      : guard_(guard), bytes_(bytes), buf_(bytes + 2 * guard) {
    if (guard > 0) {
      check(cudaMemset(buf_.data(), kGuardByte, guard), "cudaMemset(guard)");
      check(cudaMemset(buf_.data() + guard + bytes, kGuardByte, guard), "cudaMemset(guard)");
    }
  }
  std::byte* user() const { return buf_.data() + guard_; }
  std::size_t bytes() const { return bytes_; }
  // Empty when both guards hold their pattern, else a description of the first damaged byte.
  std::string check_guards(const std::string& name) const {
    if (guard_ == 0) return {};
    std::vector<unsigned char> host(guard_);
    for (int side = 0; side < 2; ++side) {
      const std::byte* src = side == 0 ? buf_.data() : buf_.data() + guard_ + bytes_;
      check(cudaMemcpy(host.data(), src, guard_, cudaMemcpyDeviceToHost), "cudaMemcpy(guard)");
      if (std::string d = evaluator::audit::guard_damage(host, side == 0, name); !d.empty())
        return d;
    }
    return {};
  }

private:
  std::size_t guard_;
  std::size_t bytes_;
  DeviceBuffer buf_;
};

std::vector<std::byte> to_host(const Guarded& g) {
  std::vector<std::byte> out(g.bytes());
  if (!out.empty())
    check(cudaMemcpy(out.data(), g.user(), g.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy(D2H)");
  return out;
}

void upload(const Guarded& g, std::span<const std::byte> src, const std::string& name) {
  if (!src.empty())
    check(cudaMemcpy(g.user(), src.data(), src.size(), cudaMemcpyHostToDevice),
          ("copy " + name).c_str());
}

// The device side of one validated call: every passed tensor's storage in a guarded buffer, and
// one or more sets of fresh guarded outputs (one buffer per role-output tensor).
struct DeviceCall {
  const op::Declaration& d;
  std::vector<int> passed, outputs;      // declaration indices
  std::vector<std::span<std::byte>> src; // host storage of each passed tensor
  std::vector<Guarded> in;               // per passed tensor
  std::vector<std::uintptr_t> addr;      // per declared tensor (outputs: set 0)
  std::vector<std::size_t> out_bytes, out_es;
  std::vector<std::vector<Guarded>> sets; // output sets
  std::size_t guard = 0;

  DeviceCall(const op::Declaration& decl, const op::CallArgs& call, const op::Validated& v,
             std::size_t guard_bytes)
      : d(decl), passed(op::passed_tensors(decl)), addr(decl.tensors.size(), 0),
        guard(guard_bytes) {
    const DType dtype = call.tensors.front().dtype();
    for (std::size_t p = 0; p < passed.size(); ++p) {
      const HostTensor& h = call.tensors[p];
      src.push_back(h.storage_bytes());
      in.emplace_back(src.back().size(), guard);
      upload(in.back(), src.back(), d.tensors[passed[p]].name);
      addr[passed[p]] = reinterpret_cast<std::uintptr_t>(in.back().user()) +
                        static_cast<std::uintptr_t>(h.offset()) * h.element_bytes();
    }
    for (int t : op::written_tensors(decl)) {
      if (decl.tensors[t].role != op::Role::kOutput) continue;
      outputs.push_back(t);
      std::int64_t n = 1;
      for (std::int64_t s : op::tensor_shape(decl, v, t))
        n *= s;
      out_es.push_back(element_bytes(decl.tensors[t], dtype));
      out_bytes.push_back(static_cast<std::size_t>(n) * out_es.back());
    }
  }
  bool has_input_output() const {
    return std::any_of(passed.begin(), passed.end(),
                       [&](int t) { return d.tensors[t].role == op::Role::kInputOutput; });
  }
  std::size_t add_set() {
    sets.emplace_back();
    for (std::size_t b : out_bytes)
      sets.back().emplace_back(b, guard);
    return sets.size() - 1;
  }
  std::vector<std::uintptr_t> addresses(std::size_t set) const {
    std::vector<std::uintptr_t> a = addr;
    for (std::size_t k = 0; k < outputs.size(); ++k)
      a[outputs[k]] = reinterpret_cast<std::uintptr_t>(sets[set][k].user());
    return a;
  }
  // Poisons a set's outputs and restores every input-output tensor's initial bytes.
  void prepare(std::size_t set, unsigned char pattern) const {
    for (const Guarded& g : sets[set])
      check(cudaMemset(g.user(), pattern, g.bytes()), "cudaMemset(poison)");
    for (std::size_t p = 0; p < passed.size(); ++p)
      if (d.tensors[passed[p]].role == op::Role::kInputOutput)
        upload(in[p], src[p], d.tensors[passed[p]].name);
    check(cudaDeviceSynchronize(), "synchronize before launch");
  }
  // What the call wrote: each output of `set`, then each input-output tensor's storage.
  std::vector<std::vector<std::byte>> written(std::size_t set) const {
    std::vector<std::vector<std::byte>> out;
    for (const Guarded& g : sets[set])
      out.push_back(to_host(g));
    for (std::size_t p = 0; p < passed.size(); ++p)
      if (d.tensors[passed[p]].role == op::Role::kInputOutput) out.push_back(to_host(in[p]));
    return out;
  }
  std::string written_name(std::size_t k) const {
    if (k < outputs.size()) return d.tensors[outputs[k]].name;
    std::size_t io = k - outputs.size();
    for (std::size_t p = 0; p < passed.size(); ++p)
      if (d.tensors[passed[p]].role == op::Role::kInputOutput && io-- == 0)
        return d.tensors[passed[p]].name;
    return "?";
  }
  // Guard damage of the inputs (when `inputs`) and of a set's outputs.
  void check_guards(std::size_t set, bool inputs, const std::string& suffix,
                    std::vector<std::string>& fails) const {
    if (inputs)
      for (std::size_t p = 0; p < passed.size(); ++p)
        if (std::string g = in[p].check_guards(d.tensors[passed[p]].name); !g.empty())
          fails.push_back(g);
    for (std::size_t k = 0; k < outputs.size(); ++k)
      if (std::string g = sets[set][k].check_guards(d.tensors[outputs[k]].name + suffix);
          !g.empty())
        fails.push_back(g);
  }
};

// Why a repeated call's bytes differ from the first call's (unwritten elements or a race): the
// first written buffer that differs (evaluator::audit::repeat_mismatch), named when the call
// writes more than one. An input-output tensor is restored, not poisoned, before each call, so any
// difference in it is nondeterminism.
std::string repeat_difference(const DeviceCall& dc, const std::vector<std::vector<std::byte>>& a,
                              const std::vector<std::vector<std::byte>>& first, int call_number) {
  for (std::size_t k = 0; k < a.size(); ++k) {
    const bool output = k < dc.outputs.size();
    const std::string m =
        evaluator::audit::repeat_mismatch(first[k], a[k], output ? dc.out_es[k] : 1, call_number,
                                          /*poisoned=*/output);
    if (!m.empty()) return (a.size() > 1 ? dc.written_name(k) + ": " : "") + m;
  }
  return {};
}

} // namespace

AdapterOptions AdapterOptions::from_json(const nlohmann::json& j) {
  AdapterOptions o;
  if (!j.is_object()) return o;
  o.guard_bytes = j.value("guard_bytes", o.guard_bytes);
  o.repeats = std::max(1, j.value("repeats", o.repeats));
  o.small_repeats = std::max(1, j.value("small_repeats", o.small_repeats));
  o.concurrency = j.value("concurrency", o.concurrency);
  return o;
}

nlohmann::json AdapterOptions::to_json() const {
  return {{"guard_bytes", guard_bytes},
          {"repeats", repeats},
          {"small_repeats", small_repeats},
          {"concurrency", concurrency}};
}

DeviceAdapter::DeviceAdapter(const op::Operator& op, LoadedCandidate candidate,
                             op::DeviceInfo device, AdapterOptions options)
    : op_(op), cand_(std::move(candidate)), device_(device), opt_(options) {}

evaluator::CandidateFn DeviceAdapter::as_candidate() {
  return [this](const op::CallArgs& args) { return call(args); };
}

nlohmann::json DeviceAdapter::evidence() const {
  return {{"path_counts", counts_.to_json()},
          {"reference_reasons",
           std::vector<std::string>(reference_reasons_.begin(), reference_reasons_.end())},
          {"launch_plans", plans_},
          {"launch_errors", launch_errors_},
          {"options", opt_.to_json()}};
}

evaluator::CandidateCall DeviceAdapter::call(const op::CallArgs& args) {
  if (sticky_) { // never touch the device again after a sticky fault
    evaluator::CandidateCall refused;
    refused.error = evaluator::RaisedError{std::nullopt, "not run: the worker already faulted"};
    return refused;
  }
  try {
    return call_impl(args);
  } catch (const StickyFault& f) {
    sticky_ = f;
    evaluator::CandidateCall crashed;
    crashed.error = evaluator::RaisedError{std::nullopt, "sticky CUDA fault in " + f.where + ": " +
                                                             cuda_error_text(f.error)};
    return crashed;
  }
}

evaluator::CandidateCall DeviceAdapter::call_impl(const op::CallArgs& args) {
  evaluator::CandidateCall result;
  const op::Declaration& d = op_.declaration();
  const op::Validated v = op_.validate(args);
  if (!v.ok()) { // declared error, raised before any allocation or launch
    result.error = evaluator::RaisedError{v.error, {}};
    return result;
  }
  const DType dtype = args.tensors.front().dtype();
  std::vector<HostTensor> outs;
  std::int64_t elements = 0; // of the largest written tensor
  for (int t : op::written_tensors(d)) {
    std::vector<std::int64_t> shape = op::tensor_shape(d, v, t);
    std::int64_t n = 1;
    for (std::int64_t s : shape)
      n *= s;
    elements = std::max(elements, n);
    if (d.tensors[t].role != op::Role::kOutput) continue;
    const DType dt = d.tensors[t].dtype == op::DTypeRule::kFloat32 ? DType::kFloat32 : dtype;
    outs.push_back(HostTensor::zeros(std::move(shape), dt).with_device(args.tensors[0].device()));
  }
  if (v.empty()) {
    counts_.add(op::Route::kNoLaunch);
    result.route = std::string(op::route_name(op::Route::kNoLaunch));
    result.outputs = std::move(outs);
    return result;
  }
  DeviceCall dc(d, args, v, opt_.guard_bytes);
  const std::size_t s0 = dc.add_set();
  // Dispatch on the addresses of the first output set (all sets share its alignment).
  const op::CallGeometry geom = op::call_geometry(d, args, v, dc.addresses(s0));
  const CallLauncher launcher(op_, &cand_, device_, geom, v, exact_layout(d, args, v));
  const op::Route route = launcher.route();
  result.route = std::string(op::route_name(route));
  result.variant = launcher.variant();
  if (route != op::Route::kCandidate) reference_reasons_.insert(launcher.why());
  if (route == op::Route::kCandidate && plans_.size() < 8)
    plans_.push_back({{"call", geom.to_json(d)},
                      {"variant", launcher.variant()},
                      {"plan", launcher.plan().to_json()}});
  if (!launcher.failure().empty()) {
    ++launch_errors_;
    counts_.add(route, launcher.variant());
    result.error = evaluator::RaisedError{std::nullopt, "launch failed: " + launcher.failure()};
    return result;
  }
  // Launches one call into output set `set` on `stream`; returns the launch error text.
  auto launch = [&](std::size_t set, cudaStream_t stream) -> std::string {
    counts_.add(route, launcher.variant());
    const cudaError_t e = launcher.launch(dc.addresses(set), stream);
    if (e == cudaSuccess) return {};
    if (is_sticky(e)) throw StickyFault{e, "launch of " + launcher.entry()};
    ++launch_errors_;
    const op::LaunchPlan& plan = launcher.plan();
    return fmt::format("launch of {} failed: {} (grid {}, block {}, dynamic smem {} bytes)",
                       launcher.entry(), cuda_error_text(e), plan.grid, plan.block,
                       plan.dynamic_smem);
  };
  const std::string kernel_name = "kernel " + launcher.entry();

  Stream s1, s2;
  dc.prepare(s0, kPoisonNan);
  if (std::string err = launch(s0, s1.get()); !err.empty()) {
    result.error = evaluator::RaisedError{std::nullopt, err};
    return result;
  }
  check(cudaStreamSynchronize(s1.get()), kernel_name.c_str());
  const std::vector<std::vector<std::byte>> first = dc.written(s0);

  auto& fails = result.audit_failures;
  dc.check_guards(s0, true, "", fails);
  for (std::size_t p = 0; p < dc.passed.size(); ++p)
    if (d.tensors[dc.passed[p]].role == op::Role::kInput)
      if (std::string c = evaluator::audit::input_changed(dc.src[p], to_host(dc.in[p]),
                                                          d.tensors[dc.passed[p]].name);
          !c.empty())
        fails.push_back(c);

  // Repeats with the finite poison: identical bits, and no element still holding both poisons.
  const int repeats = elements <= kSmallCase ? opt_.small_repeats : opt_.repeats;
  for (int r = 1; r < repeats && fails.empty(); ++r) {
    dc.prepare(s0, kPoisonFinite);
    if (std::string err = launch(s0, s1.get()); !err.empty()) {
      result.error = evaluator::RaisedError{std::nullopt, "repeat call: " + err};
      return result;
    }
    check(cudaStreamSynchronize(s1.get()), kernel_name.c_str());
    if (std::string diff = repeat_difference(dc, dc.written(s0), first, r + 1); !diff.empty())
      fails.push_back(diff);
  }
  // Two concurrent calls (not for input-output tensors, which one storage holds).
  if (opt_.concurrency && fails.empty() && route == op::Route::kCandidate &&
      elements <= kConcurrentMax && !dc.has_input_output()) {
    const std::size_t sa = dc.add_set(), sb = dc.add_set();
    for (const Guarded& g : dc.sets[sa])
      check(cudaMemset(g.user(), kPoisonNan, g.bytes()), "cudaMemset(poison)");
    dc.prepare(sb, kPoisonFinite);
    std::string err = launch(sa, s1.get());
    if (err.empty()) err = launch(sb, s2.get());
    if (!err.empty()) {
      result.error = evaluator::RaisedError{std::nullopt, "concurrent call: " + err};
      return result;
    }
    check(cudaStreamSynchronize(s1.get()), kernel_name.c_str());
    check(cudaStreamSynchronize(s2.get()), kernel_name.c_str());
    if (dc.written(sa) != first || dc.written(sb) != first)
      fails.push_back("two concurrent calls on two streams did not both reproduce the output of "
                      "a lone call");
    dc.check_guards(sa, false, " (concurrent call)", fails);
    dc.check_guards(sb, false, " (concurrent call)", fails);
  }
  for (std::size_t k = 0; k < outs.size(); ++k) {
    auto dst = outs[k].storage_bytes();
    std::memcpy(dst.data(), first[k].data(), std::min(dst.size(), first[k].size()));
  }
  for (std::size_t k = outs.size(), p = 0; p < dc.passed.size(); ++p) {
    if (d.tensors[dc.passed[p]].role != op::Role::kInputOutput) continue;
    std::memcpy(dc.src[p].data(), first[k].data(), std::min(dc.src[p].size(), first[k].size()));
    ++k;
  }
  result.outputs = std::move(outs);
  return result;
}

} // namespace kloop::gpu
