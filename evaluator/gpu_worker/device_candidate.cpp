// The device adapter of the correctness gate (see device_candidate.h).
#include "evaluator/gpu_worker/device_candidate.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "evaluator/gpu_worker/reference_kernel.h"
#include "evaluator/output_audit.h"
#include "kernels/rmsnorm/reference.h"

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
  std::string check_guards(const char* name) const {
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

RefGeometry ref_geometry(const HostTensor& x, const HostTensor& w, std::int64_t rows,
                         std::int64_t h) {
  RefGeometry g;
  g.rows = rows;
  g.h = static_cast<int>(h);
  for (int d = 0; d + 1 < x.ndim(); ++d) {
    if (x.shape()[d] == 1) continue;
    if (g.outer_ndim == kRefMaxOuterDims)
      throw std::runtime_error(fmt::format("reference kernel: x has more than {} non-unit outer "
                                           "dimensions; extend kRefMaxOuterDims",
                                           kRefMaxOuterDims));
    g.outer_shape[g.outer_ndim] = x.shape()[d];
    g.outer_stride[g.outer_ndim] = x.strides()[d];
    ++g.outer_ndim;
  }
  g.x_last_stride = x.strides().back();
  g.w_stride = w.strides().back();
  g.y_row_stride = h;
  return g;
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

rmsnorm::DeviceInfo query_device_info(int device) {
  rmsnorm::DeviceInfo info;
  check(cudaDeviceGetAttribute(&info.cc_major, cudaDevAttrComputeCapabilityMajor, device), "attr");
  check(cudaDeviceGetAttribute(&info.cc_minor, cudaDevAttrComputeCapabilityMinor, device), "attr");
  check(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device), "attr");
  int optin = 0;
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "attr");
  info.max_dynamic_smem_optin = optin;
  return info;
}

DeviceAdapter::DeviceAdapter(LoadedCandidate candidate, rmsnorm::DeviceInfo device,
                             AdapterOptions options)
    : cand_(std::move(candidate)), device_(device), opt_(options) {}

evaluator::Candidate DeviceAdapter::as_candidate() {
  return [this](const HostTensor& x, const HostTensor& w, const rmsnorm::EpsScalar& eps) {
    return call(x, w, eps);
  };
}

nlohmann::json DeviceAdapter::evidence() const {
  return {{"path_counts", counts_.to_json()},
          {"reference_reasons",
           std::vector<std::string>(reference_reasons_.begin(), reference_reasons_.end())},
          {"launch_plans", plans_},
          {"launch_errors", launch_errors_},
          {"options", opt_.to_json()}};
}

evaluator::CandidateCall DeviceAdapter::call(const HostTensor& x, const HostTensor& w,
                                             const rmsnorm::EpsScalar& eps) {
  if (sticky_) { // never touch the device again after a sticky fault
    evaluator::CandidateCall refused;
    refused.error = evaluator::RaisedError{std::nullopt, "not run: the worker already faulted"};
    return refused;
  }
  try {
    return call_impl(x, w, eps);
  } catch (const StickyFault& f) {
    sticky_ = f;
    evaluator::CandidateCall crashed;
    crashed.error = evaluator::RaisedError{std::nullopt, "sticky CUDA fault in " + f.where + ": " +
                                                             cuda_error_text(f.error)};
    return crashed;
  }
}

evaluator::CandidateCall DeviceAdapter::call_impl(const HostTensor& x, const HostTensor& w,
                                                  const rmsnorm::EpsScalar& eps) {
  evaluator::CandidateCall result;
  const rmsnorm::Validation v = rmsnorm::validate(x, w, eps);
  if (!v.ok()) { // declared error, raised before any allocation or launch
    result.error = evaluator::RaisedError{v.error, {}};
    return result;
  }
  const DType dtype = x.dtype();
  const std::size_t es = dtype_bytes(dtype);
  HostTensor out = HostTensor::zeros(x.shape(), dtype).with_device(x.device());
  if (v.rows == 0) {
    counts_.add(rmsnorm::Route::kNoLaunch);
    result.output = out;
    return result;
  }
  const std::size_t out_bytes = static_cast<std::size_t>(v.rows * v.h) * es;
  const auto x_src = x.storage_bytes();
  const auto w_src = w.storage_bytes();
  Guarded xd(x_src.size(), opt_.guard_bytes), wd(w_src.size(), opt_.guard_bytes);
  check(cudaMemcpy(xd.user(), x_src.data(), x_src.size(), cudaMemcpyHostToDevice), "copy x");
  check(cudaMemcpy(wd.user(), w_src.data(), w_src.size(), cudaMemcpyHostToDevice), "copy weight");
  const std::byte* x0 = xd.user() + x.offset() * static_cast<std::int64_t>(es);
  const std::byte* w0 = wd.user() + w.offset() * static_cast<std::int64_t>(es);

  // Dispatch on the addresses of the first output buffer (all outputs share its alignment).
  Guarded y1(out_bytes, opt_.guard_bytes);
  const rmsnorm::CallGeometry geom = rmsnorm::call_geometry(
      x, w, reinterpret_cast<std::uintptr_t>(x0), reinterpret_cast<std::uintptr_t>(w0),
      reinterpret_cast<std::uintptr_t>(y1.user()));
  rmsnorm::DispatchDecision route =
      cand_.manifest ? rmsnorm::decide_dispatch(*cand_.manifest, geom, device_)
                     : rmsnorm::DispatchDecision{rmsnorm::Route::kReference, "no candidate cubin"};
  if (route.route != rmsnorm::Route::kCandidate) reference_reasons_.insert(route.why);

  cudaKernel_t kernel = nullptr;
  rmsnorm::LaunchPlan plan;
  if (route.route == rmsnorm::Route::kCandidate) {
    kernel = cand_.kernels.at(dtype);
    const void* fn = reinterpret_cast<const void*>(kernel);
    const rmsnorm::Manifest& m = *cand_.manifest;
    const std::int64_t smem = m.launch.dynamic_smem_bytes(v.h);
    std::string failure;
    if (smem > rmsnorm::kDefaultDynamicSmemBytes) {
      const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem));
      if (e != cudaSuccess)
        failure = fmt::format("cudaFuncSetAttribute(MaxDynamicSharedMemorySize={} bytes) failed: "
                              "{} (the device allows {} bytes per block)",
                              smem, cuda_error_text(e), device_.max_dynamic_smem_optin);
    }
    int per_sm = 0;
    if (failure.empty() && m.launch.grid == rmsnorm::GridKind::kPersistent) {
      const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, fn, m.launch.block_threads, static_cast<std::size_t>(smem));
      if (e != cudaSuccess)
        failure = "cudaOccupancyMaxActiveBlocksPerMultiprocessor failed: " + cuda_error_text(e);
      else if (per_sm <= 0)
        failure = fmt::format("no block of {} threads with {} bytes of dynamic shared memory fits "
                              "on an SM (occupancy 0)",
                              m.launch.block_threads, smem);
    }
    plan = rmsnorm::plan_launch(m, geom, device_, per_sm);
    if (plans_.size() < 8) plans_.push_back({{"call", geom.to_json()}, {"plan", plan.to_json()}});
    if (!failure.empty()) {
      ++launch_errors_;
      cudaGetLastError(); // clear a non-sticky error
      result.error = evaluator::RaisedError{std::nullopt, "launch failed: " + failure};
      counts_.add(rmsnorm::Route::kCandidate);
      return result;
    }
  }
  const RefGeometry rg = ref_geometry(x, w, v.rows, v.h);
  const std::string entry =
      kernel ? cand_.manifest->entry_points.at(dtype) : std::string("reference");

  // Launches one call into `y` on `stream`; returns the launch error text (empty on success).
  auto launch = [&](const Guarded& y, cudaStream_t stream) -> std::string {
    counts_.add(route.route);
    cudaError_t e;
    if (kernel) {
      const void* xp = x0;
      const void* wp = w0;
      void* yp = y.user();
      long long rows = v.rows, xs = *geom.x_row_stride, ys = v.h;
      int h = static_cast<int>(v.h);
      float epsf = v.eps32;
      void* args[] = {&xp, &wp, &yp, &rows, &h, &xs, &ys, &epsf};
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel),
                       dim3(static_cast<unsigned>(plan.grid)),
                       dim3(static_cast<unsigned>(plan.block)), args,
                       static_cast<std::size_t>(plan.dynamic_smem), stream);
      e = cudaGetLastError(); // checked at the call (CASES.md P13)
    } else {
      e = launch_reference(dtype, x0, w0, y.user(), rg, v.eps32, stream);
    }
    if (e == cudaSuccess) return {};
    if (is_sticky(e)) throw StickyFault{e, "launch of " + entry};
    ++launch_errors_;
    return fmt::format("launch of {} failed: {} (grid {}, block {}, dynamic smem {} bytes)", entry,
                       cuda_error_text(e), plan.grid, plan.block, plan.dynamic_smem);
  };
  auto poison = [&](const Guarded& y, unsigned char pattern) {
    check(cudaMemset(y.user(), pattern, y.bytes()), "cudaMemset(poison)");
  };

  Stream s1, s2;
  poison(y1, kPoisonNan);
  check(cudaDeviceSynchronize(), "synchronize before launch");
  if (std::string err = launch(y1, s1.get()); !err.empty()) {
    result.error = evaluator::RaisedError{std::nullopt, err};
    return result;
  }
  check(cudaStreamSynchronize(s1.get()), ("kernel " + entry).c_str());
  const std::vector<std::byte> first = to_host(y1);

  auto& fails = result.audit_failures;
  for (const auto* item : {&xd, &wd, &y1}) {
    const char* name = item == &xd ? "x" : item == &wd ? "weight" : "y";
    if (std::string g = item->check_guards(name); !g.empty()) fails.push_back(g);
  }
  for (auto [name, device, host] : {std::tuple{"x", &xd, x_src}, std::tuple{"weight", &wd, w_src}})
    if (std::string c = evaluator::audit::input_changed(host, to_host(*device), name); !c.empty())
      fails.push_back(c);

  // Repeats with the finite poison: identical bits, and no element still holding both poisons.
  const int repeats = v.rows * v.h <= kSmallCase ? opt_.small_repeats : opt_.repeats;
  for (int r = 1; r < repeats && fails.empty(); ++r) {
    poison(y1, kPoisonFinite);
    check(cudaDeviceSynchronize(), "synchronize");
    if (std::string err = launch(y1, s1.get()); !err.empty()) {
      result.error = evaluator::RaisedError{std::nullopt, "repeat call: " + err};
      return result;
    }
    check(cudaStreamSynchronize(s1.get()), ("kernel " + entry).c_str());
    const std::vector<std::byte> again = to_host(y1);
    if (std::string m = evaluator::audit::repeat_mismatch(first, again, es, r + 1); !m.empty())
      fails.push_back(m);
  }
  if (opt_.concurrency && fails.empty() && route.route == rmsnorm::Route::kCandidate &&
      v.rows * v.h <= kConcurrentMax) {
    Guarded ya(out_bytes, opt_.guard_bytes), yb(out_bytes, opt_.guard_bytes);
    poison(ya, kPoisonNan);
    poison(yb, kPoisonFinite);
    check(cudaDeviceSynchronize(), "synchronize");
    std::string err = launch(ya, s1.get());
    if (err.empty()) err = launch(yb, s2.get());
    if (!err.empty()) {
      result.error = evaluator::RaisedError{std::nullopt, "concurrent call: " + err};
      return result;
    }
    check(cudaStreamSynchronize(s1.get()), ("kernel " + entry).c_str());
    check(cudaStreamSynchronize(s2.get()), ("kernel " + entry).c_str());
    if (to_host(ya) != first || to_host(yb) != first)
      fails.push_back("two concurrent calls on two streams did not both reproduce the output of "
                      "a lone call");
    for (const auto* item : {&ya, &yb})
      if (std::string g = item->check_guards("y (concurrent call)"); !g.empty()) fails.push_back(g);
  }
  auto dst = out.storage_bytes();
  std::memcpy(dst.data(), first.data(), std::min(dst.size(), first.size()));
  result.output = out;
  return result;
}

} // namespace kloop::gpu
