// The CPU emulation of the GPU worker's correctness batch (cpu_device.h): adapter and suite.
#include <cstring>
#include <span>
#include <tuple>

#include "evaluator/correctness.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/output_audit.h"
#include "kernels/rmsnorm/reference.h"
#include "tests/agent/cpu_device.h"
#include "tests/kernels/rmsnorm_calls.h"

namespace kloop::testing {
namespace {

class CpuDeviceAdapter {
public:
  explicit CpuDeviceAdapter(CpuKernel kernel, std::size_t guard_bytes = 256)
      : kernel_(std::move(kernel)), guard_bytes_(guard_bytes) {}

  evaluator::rms_test::RmsCandidate as_candidate() const {
    return [this](const HostTensor& x, const HostTensor& w, const rmsnorm::EpsScalar& eps) {
      return call(x, w, eps);
    };
  }

private:
  // A copy of `t` in fresh storage with guard_bytes_ of kGuardByte on both sides.
  HostTensor guarded_copy(const HostTensor& t) const {
    const std::size_t es = t.element_bytes();
    const std::size_t g = guard_bytes_ / es;
    const std::size_t n = t.storage_bytes().size() / es;
    HostTensor d = HostTensor::strided(n + 2 * g, t.dl_type(), t.shape(), t.strides(),
                                       t.offset() + static_cast<std::int64_t>(g));
    auto bytes = d.storage_bytes();
    std::memset(bytes.data(), evaluator::audit::kGuardByte, bytes.size());
    std::memcpy(bytes.data() + g * es, t.storage_bytes().data(), n * es);
    return d;
  }

  static std::span<const unsigned char> guard(const HostTensor& t, std::size_t bytes, bool before) {
    const auto s = t.storage_bytes();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    return before ? std::span(p, bytes) : std::span(p + s.size() - bytes, bytes);
  }

  static std::span<const std::byte> user_bytes(const HostTensor& t, std::size_t guard_bytes) {
    const auto s = t.storage_bytes();
    return std::span<const std::byte>(s.data() + guard_bytes, s.size() - 2 * guard_bytes);
  }

  evaluator::CandidateCall call(const HostTensor& x, const HostTensor& w,
                                const rmsnorm::EpsScalar& eps) const {
    evaluator::CandidateCall result;
    const rmsnorm::Validation v = rmsnorm::validate(x, w, eps);
    if (!v.ok()) { // the trusted wrapper raises before any launch
      result.error = evaluator::RaisedError{v.error, {}};
      return result;
    }
    HostTensor out = HostTensor::zeros(x.shape(), x.dtype()).with_device(x.device());
    if (v.rows == 0) {
      result.outputs.push_back(out);
      return result;
    }
    const std::size_t es = x.element_bytes();
    const std::int64_t n = v.rows * v.h;
    const std::size_t g = guard_bytes_ / es;
    const HostTensor xd = guarded_copy(x), wd = guarded_copy(w);
    const std::vector<std::byte> x_src(x.storage_bytes().begin(), x.storage_bytes().end());
    const std::vector<std::byte> w_src(w.storage_bytes().begin(), w.storage_bytes().end());
    HostTensor y = HostTensor::strided(static_cast<std::size_t>(n) + 2 * g, x.dl_type(),
                                       {v.rows, v.h}, {v.h, 1}, static_cast<std::int64_t>(g));
    auto fill = [&](unsigned char poison) {
      auto b = y.storage_bytes();
      std::memset(b.data(), evaluator::audit::kGuardByte, b.size());
      std::memset(b.data() + g * es, poison, static_cast<std::size_t>(n) * es);
    };
    fill(evaluator::audit::kPoisonNan);
    kernel_(xd, wd, v.eps32, y);
    const auto first_span = user_bytes(y, g * es);
    const std::vector<std::byte> first(first_span.begin(), first_span.end());
    auto& fails = result.audit_failures;
    using Named = std::pair<const char*, const HostTensor*>;
    for (auto [name, t] : {Named{"x", &xd}, Named{"weight", &wd}, Named{"y", &y}}) {
      const std::size_t gb = g * t->element_bytes();
      for (bool before : {true, false})
        if (auto d = evaluator::audit::guard_damage(guard(*t, gb, before), before, name);
            !d.empty()) {
          fails.push_back(d);
          break;
        }
    }
    for (auto [name, t, src] : {std::tuple{"x", &xd, &x_src}, std::tuple{"weight", &wd, &w_src}})
      if (auto c = evaluator::audit::input_changed(*src, user_bytes(*t, g * es), name); !c.empty())
        fails.push_back(c);
    if (fails.empty()) { // one repeat with the finite poison
      fill(evaluator::audit::kPoisonFinite);
      kernel_(xd, wd, v.eps32, y);
      if (auto m = evaluator::audit::repeat_mismatch(first, user_bytes(y, g * es), es, 2);
          !m.empty())
        fails.push_back(m);
    }
    std::memcpy(out.storage_bytes().data(), first.data(), first.size());
    result.outputs.push_back(out);
    return result;
  }

  CpuKernel kernel_;
  std::size_t guard_bytes_;
};

WorkerFiles batch(const evaluator::rms_test::RmsCandidate& candidate,
                  const std::vector<rmsnorm::CaseSpec>& specs) {
  const evaluator::SuiteResult suite = evaluator::rms_test::run_suite(candidate, specs, true);
  WorkerFiles files;
  files.result = evaluator::correctness_batch_result(
      suite, {{"device", {{"name", "CPU emulation (tests/agent/cpu_device.h)"}}}});
  if (!suite.cases.empty()) // written by the worker before each case
    files.progress = {{"index", suite.cases.size() - 1},
                      {"name", suite.cases.back().case_name},
                      {"total", specs.size()}};
  return files;
}

} // namespace

void reference_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y) {
  const HostTensor r = rmsnorm::reference_compute(x, w, eps); // contiguous [rows, H], like y
  const std::size_t bytes = static_cast<std::size_t>(r.numel()) * r.element_bytes();
  std::memcpy(y.storage_bytes().data() + y.offset() * static_cast<std::int64_t>(y.element_bytes()),
              r.storage_bytes().data() + r.offset() * static_cast<std::int64_t>(r.element_bytes()),
              bytes);
}

void packed_rows_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y) {
  const std::int64_t rows = y.shape()[0], h = y.shape()[1];
  const auto storage = static_cast<std::int64_t>(x.storage_bytes().size() / x.element_bytes());
  const HostTensor flat = x.as_strided({storage}, {1}, 0);
  std::vector<float> values;
  for (std::int64_t i = 0; i < rows * h; ++i)
    values.push_back(flat.get(std::min(x.offset() + i, storage - 1)));
  reference_kernel(HostTensor::from_values({rows, h}, x.dtype(), values), w, eps, y);
}

WorkerFiles cpu_worker_result(const CpuKernel& kernel,
                              const std::vector<rmsnorm::CaseSpec>& specs) {
  const CpuDeviceAdapter adapter(kernel);
  return batch(adapter.as_candidate(), specs);
}

WorkerFiles cpu_callable_result(const CpuCallable& callable,
                                const std::vector<rmsnorm::CaseSpec>& specs) {
  return batch(
      [&](const HostTensor& x, const HostTensor& w, const rmsnorm::EpsScalar& eps) {
        evaluator::CandidateCall call;
        const rmsnorm::Validation v = rmsnorm::validate(x, w, eps);
        if (!v.ok())
          call.error = evaluator::RaisedError{v.error, {}};
        else
          call.outputs.push_back(callable(x, w, v.eps32));
        return call;
      },
      specs);
}

} // namespace kloop::testing
