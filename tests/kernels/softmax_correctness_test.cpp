// The correctness core on row_softmax/1 with CPU emulations of the offline family's algorithms
// (kernels/softmax/family.h; the baseline is its member v16-b512-tauto-c6-online-pers): the
// trusted wrapper's real dispatch (op::decide_dispatch on the baseline's manifest) routes each
// public case, and a routed case runs a float32 emulation of the kernel: per-thread units in the
// kernel's order (cached vectors, streamed remainder, scalar tail), the group's butterfly and
// shared-memory merges, __expf as ex2(x * log2 e) with flush-to-zero, one rounding to T. Honest
// emulations pass the whole public suite against the float64 reference; each classic defect is
// rejected on the family of cases that exposes it, and nowhere it should not be.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include <gtest/gtest.h>

#include "evaluator/correctness.h"
#include "evaluator/device_gates.h"
#include "evaluator/gpu_runner.h"
#include "feedback/sections.h"
#include "kernels/dispatch.h"
#include "kernels/manifest.h"
#include "kernels/softmax/cases.h"
#include "kernels/softmax/contract.h"
#include "kernels/softmax/operator.h"
#include "tests/support/test_files.h"

namespace kloop::softmax {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// What the emulation changes from the family's honest algorithm.
enum class Defect {
  kNone,
  kNoMax,         // exp(x) / sum(exp(x)): no max subtraction
  kMaxFromZero,   // the running max starts at 0 instead of -inf
  kNoShiftGuard,  // exponents taken against m even while m is -inf (-inf - (-inf) = NaN)
  kBf16Sum,       // the sum accumulated in bfloat16
  kSkipLastTerm,  // the row's last element left out of the sum (still written)
  kZeroMaskedRow, // an all -inf row written as zeros (a "safe softmax"), not NaN
};

struct Emulation {
  bool online = true;
  int block = 512, cache = 6, vec_bytes = 16;
  long long grid_blocks = 264; // two 512-thread blocks per SM on 132 SMs
  Defect defect = Defect::kNone;
};

struct Stat {
  float m = kNegInf, s = 0;
};

float fast_exp(float v) { // __expf: ex2.approx.ftz of v * log2(e)
  const float r = std::exp2(v * 1.44269504f);
  return r < std::numeric_limits<float>::min() ? 0.0f : r;
}

class Kernel {
public:
  explicit Kernel(const Emulation& e) : e_(e) {}

  float shift(float m) const {
    if (e_.defect == Defect::kNoMax) return 0.0f;
    if (e_.defect == Defect::kNoShiftGuard) return m;
    return m == kNegInf ? 0.0f : m;
  }
  float rescale(float m_old, float m_new) const {
    return m_old == m_new ? 1.0f : fast_exp(m_old - shift(m_new));
  }
  float add(float s, float term) const {
    s += term;
    return e_.defect == Defect::kBf16Sum ? bf16_bits_to_float(float_to_bf16_bits(s)) : s;
  }
  Stat merge(Stat a, Stat b) const {
    const float m = std::fmax(a.m, b.m);
    return {m, add(a.s * rescale(a.m, m), b.s * rescale(b.m, m))};
  }
  Stat absorb(Stat st, const float* v, int k) const { // one unit of k values
    float cm = v[0];
    for (int i = 1; i < k; ++i)
      cm = std::fmax(cm, v[i]);
    const float m = std::fmax(st.m, cm);
    float sum = 0;
    for (int i = 0; i < k; ++i)
      sum = add(sum, fast_exp(v[i] - shift(m)));
    return {m, add(st.s * rescale(st.m, m), sum)};
  }

  // One row of n values (float32 of T) into out (float32 before the final rounding).
  void row(const std::vector<float>& x, bool vec, int esize, int G, std::vector<float>& out) const {
    const int n = static_cast<int>(x.size());
    const int k = vec ? e_.vec_bytes / esize : 1;
    const int nu = n / k;
    // Each thread's units in the kernel's order: cached, streamed, then tail elements.
    std::vector<Stat> st(G);
    std::vector<float> mx(G, e_.defect == Defect::kMaxFromZero ? 0.0f : kNegInf);
    if (e_.defect == Defect::kMaxFromZero)
      for (Stat& s : st)
        s.m = 0.0f;
    auto units_of = [&](int t, auto visit) {
      for (int i = t; i < nu; i += G)
        visit(&x[static_cast<std::size_t>(i) * k], k);
      for (int j = nu * k + t; j < n; j += G)
        visit(&x[j], 1);
    };
    for (int t = 0; t < G; ++t) {
      if (e_.online) {
        units_of(t, [&](const float* v, int kk) {
          if (e_.defect == Defect::kSkipLastTerm && v == &x.back()) {
            st[t].m = std::fmax(st[t].m, *v);
            return;
          }
          st[t] = absorb(st[t], v, kk);
        });
      } else {
        units_of(t, [&](const float* v, int kk) {
          for (int i = 0; i < kk; ++i)
            mx[t] = std::fmax(mx[t], v[i]);
        });
      }
    }
    float m = 0, s = 0;
    if (e_.online) {
      const Stat g = reduce(st, G, [&](Stat a, Stat b) { return merge(a, b); });
      m = g.m;
      s = g.s;
    } else {
      m = reduce(mx, G, [](float a, float b) { return std::fmax(a, b); });
      std::vector<float> part(G, 0.0f);
      for (int t = 0; t < G; ++t)
        units_of(t, [&](const float* v, int kk) {
          for (int i = 0; i < kk; ++i)
            if (!(e_.defect == Defect::kSkipLastTerm && v + i == &x.back()))
              part[t] = add(part[t], fast_exp(v[i] - shift(m)));
        });
      s = reduce(part, G, [&](float a, float b) { return add(a, b); });
    }
    const float inv = 1.0f / s;
    for (int j = 0; j < n; ++j)
      out[j] = fast_exp(x[j] - shift(m)) * inv;
    if (e_.defect == Defect::kZeroMaskedRow && m == kNegInf)
      std::fill(out.begin(), out.end(), 0.0f);
  }

  // The group size the kernel picks for a call (softmax_impl).
  int group(long long units, long long rows, long long grid) const {
    int g = 1;
    while (g < e_.block && static_cast<long long>(g) * e_.cache < units)
      g *= 2;
    while (g < e_.block && grid * (e_.block / g) >= 2 * rows)
      g *= 2;
    return g;
  }

private:
  // Butterfly within groups of min(G, 32) lanes (every lane ends equal), then the warps of the
  // group in order through shared memory.
  template <typename V, typename F> static V reduce(std::vector<V> v, int G, F op) {
    const int width = G < 32 ? G : 32;
    for (int o = width / 2; o > 0; o >>= 1) {
      std::vector<V> next = v;
      for (int t = 0; t < G; ++t)
        next[t] = op(v[t], v[t ^ o]);
      v = next;
    }
    V g = v[0];
    for (int w = 1; w < G / 32; ++w)
      g = op(g, v[static_cast<std::size_t>(w) * 32]);
    return g;
  }

  Emulation e_;
};

const op::Manifest& baseline_manifest() {
  static const op::Manifest m = [] {
    const std::string text = test_support::read_file(std::string(KLOOP_SOURCE_DIR) +
                                                     "/kernels/softmax/baseline/manifest.json");
    auto parsed = op::parse_manifest(declaration(), text);
    EXPECT_TRUE(parsed.errors.empty());
    return *parsed.manifest;
  }();
  return m;
}

// The emulated wrapper: validation, dispatch on the baseline's manifest (device addresses: x's
// storage at a 256-byte boundary plus its offset, y fresh), then the emulated kernel or the
// reference.
evaluator::CandidateFn emulated(const Emulation& e, int* launched = nullptr) {
  return [e, launched](const op::CallArgs& call) {
    const op::Operator& op = operator_instance();
    evaluator::CandidateCall out;
    const op::Validated v = op.validate(call);
    if (!v.ok()) {
      out.error = evaluator::RaisedError{v.error, {}};
      return out;
    }
    const HostTensor& x = call.tensors[0];
    const std::size_t esize = dtype_bytes(x.dtype());
    const std::vector<std::uintptr_t> addr{0x100000 + x.offset() * esize, 0x40000000};
    const op::CallGeometry geom = op::call_geometry(declaration(), call, v, addr);
    const op::DispatchDecision d =
        op::decide_dispatch(declaration(), baseline_manifest(), geom, op::DeviceInfo{});
    if (d.route != op::Route::kCandidate) return evaluator::reference_candidate(op)(call);
    if (launched) ++*launched;
    const std::int64_t rows = v.rows, n = v.axes[0];
    const std::int64_t xs = rows > 1 ? *geom.tensors[0].row_stride : n;
    const bool vec = geom.tensors[0].addr % e.vec_bytes == 0 &&
                     (xs * static_cast<std::int64_t>(esize)) % e.vec_bytes == 0;
    const Kernel k(e);
    const int k_units = vec ? e.vec_bytes / static_cast<int>(esize) : 1;
    const long long grid = std::min<long long>(e.grid_blocks, rows);
    const int G = k.group((n + k_units - 1) / k_units, rows, grid);
    HostTensor y = HostTensor::zeros(x.shape(), x.dl_type()).with_device(x.device());
    std::vector<float> in(static_cast<std::size_t>(n)), res(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < rows; ++r) {
      const HostTensor xr = x.as_strided({n}, {x.strides().back()}, x.row_col_offset(r, 0));
      HostTensor yr = y.as_strided({n}, {1}, r * n);
      for (std::int64_t j = 0; j < n; ++j)
        in[j] = xr.get(j);
      k.row(in, vec, static_cast<int>(esize), G, res);
      for (std::int64_t j = 0; j < n; ++j)
        yr.set(j, res[j]);
    }
    out.outputs.push_back(std::move(y));
    return out;
  };
}

std::vector<nlohmann::json> public_specs(const std::string& name_part = "") {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& j : operator_instance().suite("public", 1))
    if (j["name"].get<std::string>().find(name_part) != std::string::npos) out.push_back(j);
  return out;
}

std::set<std::string> failed_names(const evaluator::SuiteResult& r) {
  std::set<std::string> out;
  for (const auto& c : r.cases)
    if (!c.pass) out.insert(c.case_name);
  return out;
}

// The baseline's algorithm on the whole public suite; the two-pass member (same geometry) on
// every case of at most 4 rows or 2^17 elements (the many-row ones only repeat its rows; this
// keeps the test near five seconds).
TEST(SoftmaxCorrectnessTest, EmulatedBaselineAndTwoPassMemberPassThePublicSuite) {
  for (bool online : {true, false}) {
    Emulation e;
    e.online = online;
    std::vector<nlohmann::json> specs = public_specs();
    if (!online)
      std::erase_if(specs, [](const nlohmann::json& j) {
        const CaseSpec s = CaseSpec::from_json(j);
        return s.rows() > 4 && s.numel() > (1 << 17);
      });
    int launched = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = evaluator::run_suite(operator_instance(), emulated(e, &launched), specs);
    // The margin: the worst per-row error ratio over the row_rtol of the case's dtype.
    double worst = 0;
    std::string worst_case;
    for (const evaluator::CaseResult& c : r.cases) {
      if (!c.comparison) continue;
      const DType d = CaseSpec::from_json(c.case_spec).dtype;
      const double used = c.comparison->worst_row_ratio / tolerance_for(d).row_rtol;
      if (used > worst) worst = used, worst_case = c.case_name;
    }
    std::printf("%s emulation: %lld public cases passed, %d through the kernel, %.2f s; worst "
                "row error %.3f of row_rtol (%s)\n",
                online ? "online" : "two-pass", static_cast<long long>(r.passed), launched,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), worst,
                worst_case.c_str());
    EXPECT_TRUE(r.pass) << (online ? "online: " : "two-pass: ")
                        << (r.first_failure ? r.cases[*r.first_failure].to_json().dump() : "");
    EXPECT_GT(launched, online ? 300 : 250) << "most public cases reach the emulated kernel";
  }
}

struct DefectCase {
  Defect defect;
  const char* exposed_by; // a name part of the public cases that must fail
};

TEST(SoftmaxCorrectnessTest, ClassicDefectsAreRejectedWhereTheSuiteExposesThem) {
  const DefectCase defects[] = {
      {Defect::kNoMax, "large_positive"},       {Defect::kMaxFromZero, "large_negative"},
      {Defect::kNoShiftGuard, "causal_mask"},   {Defect::kBf16Sum, "width-4096-float32"},
      {Defect::kSkipLastTerm, "width-7-float"}, {Defect::kZeroMaskedRow, "all_neg_inf"},
  };
  for (const auto& [defect, part] : defects) {
    Emulation e;
    e.defect = defect;
    const auto specs = public_specs(part);
    ASSERT_FALSE(specs.empty()) << part;
    const auto r = evaluator::run_suite(operator_instance(), emulated(e), specs);
    EXPECT_FALSE(r.pass) << part;
    EXPECT_FALSE(failed_names(r).empty()) << part;
  }
  // The checks are the defects' own: the honest emulation passes the same cases.
  for (const auto& [defect, part] : defects)
    EXPECT_TRUE(
        evaluator::run_suite(operator_instance(), emulated(Emulation{}), public_specs(part)).pass)
        << part;
}

TEST(SoftmaxCorrectnessTest, ToleranceAcceptsTwoOutputUlpsAndRejectsARelativeShiftOfTheSum) {
  const op::Operator& op = operator_instance();
  const nlohmann::json spec = public_specs("width-1009-bfloat16").at(0);
  const op::CallArgs call = op.materialize(spec);
  const HostTensor expected = op.reference(call, op.validate(call)).at(0);
  auto scaled = [&](double factor) {
    HostTensor y = expected.clone();
    for (std::int64_t i = 0; i < y.numel(); ++i)
      y.set(i, static_cast<float>(y.get(i) * factor));
    return y;
  };
  const op::Tolerance t = op.tolerance(DType::kBFloat16, 1);
  // One bfloat16 rounding step up everywhere (<= 1 ulp per element) passes; 4 % fails.
  EXPECT_TRUE(evaluator::compare(scaled(1.0 + 1.0 / 256), expected, t).pass);
  EXPECT_FALSE(evaluator::compare(scaled(1.04), expected, t).pass);
  // float32: a sum off by 5e-5 passes, by 3e-4 (a missing term of weight 1/3300) fails.
  const nlohmann::json f32 = public_specs("width-4096-float32").at(0);
  const op::CallArgs c32 = op.materialize(f32);
  const HostTensor e32 = op.reference(c32, op.validate(c32)).at(0);
  auto scaled32 = [&](double factor) {
    HostTensor y = e32.clone();
    for (std::int64_t i = 0; i < y.numel(); ++i)
      y.set(i, static_cast<float>(y.get(i) * factor));
    return y;
  };
  EXPECT_TRUE(evaluator::compare(scaled32(1 + 5e-5), e32, op.tolerance(DType::kFloat32, 1)).pass);
  EXPECT_FALSE(evaluator::compare(scaled32(1 + 3e-4), e32, op.tolerance(DType::kFloat32, 1)).pass);
}

// The feedback on a failing softmax case names the case as row_softmax/1 describes it: the
// correctness gate made from the batch result the GPU worker writes (correctness_batch_result,
// classify_gpu_run, correctness_gate_from) of a "safe softmax" (zeros for an all -inf row),
// judged by the correctness core on the public all -inf cases.
TEST(SoftmaxCorrectnessTest, FeedbackDescribesTheFailingSoftmaxCase) {
  Emulation e;
  e.defect = Defect::kZeroMaskedRow;
  const evaluator::SuiteResult suite =
      evaluator::run_suite(operator_instance(), emulated(e), public_specs("all_neg_inf-6x129"),
                           /*stop_at_first_failure=*/true);
  ASSERT_FALSE(suite.pass);
  const nlohmann::json result =
      evaluator::correctness_batch_result(suite, nlohmann::json::object());
  evaluator::GateResult gate = evaluator::correctness_gate_from(
      evaluator::classify_gpu_run(evaluator::kGpuWorkerOk, 0, false, result, nullptr));
  for (bool with_contract : {false, true}) {
    if (with_contract) gate.evidence["reference_sha256"] = operator_instance().contract_sha256();
    const std::string text = feedback::detail::correctness_section(gate);
    for (const char* fact :
         {"first failing public case: all_neg_inf-6x129-float32", "(family values)",
          "x: float32, outer shape [6], N 129, layout "
          "contiguous: shape [6, 129], strides [129, 1]",
          "values: all_neg_inf",
          "first non-finite mismatch at flat index 0 "
          "(row 0, column 0)"})
      EXPECT_NE(text.find(fact), std::string::npos) << fact << "\n" << text;
    EXPECT_EQ(text.find("evidence"), std::string::npos) << "no reading problem\n" << text;
  }
}

} // namespace
} // namespace kloop::softmax
