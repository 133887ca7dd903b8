// weighted_rmsnorm/1 through the operator interface (operator.h).
#include "kernels/rmsnorm/operator.h"

#include <stdexcept>

#include <fmt/format.h>

#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/family_policy.h"
#include "kernels/rmsnorm/reference.h"

namespace kloop::rmsnorm {

const op::Declaration& declaration() {
  static const op::Declaration decl = [] {
    op::Declaration d;
    d.name = std::string(kOperatorName);
    d.version = kContractVersion;
    d.axes = {{.name = "H", .doc = "row width: x.shape[-1]"}};
    d.tensors = {
        {.name = "x", .role = op::Role::kInput, .dims = {"H"}, .doc = "the rows to normalise"},
        {.name = "weight",
         .role = op::Role::kInput,
         .batched = false,
         .dims = {"H"},
         .doc = "per-channel scale, the same for every row"},
        {.name = "y", .role = op::Role::kOutput, .dims = {"H"}, .doc = "fresh output, x's shape"},
    };
    d.scalars = {{.name = "eps", .doc = "added to the mean square, rounded to float32"}};
    return d;
  }();
  return decl;
}

namespace {

using op::specs_json;

class RmsNorm final : public op::Operator {
public:
  const op::Declaration& declaration() const override { return rmsnorm::declaration(); }
  std::string_view cli_name() const override { return "rmsnorm"; }
  std::string_view summary() const override {
    return "weighted RMSNorm over the last dimension: y = x * rsqrt(mean(x^2) + eps) * weight";
  }
  const nlohmann::json& contract() const override { return contract_json(); }
  std::vector<op::BenchShape> benchmark_shapes() const override {
    std::vector<op::BenchShape> out;
    for (const BenchShape& s : rmsnorm::benchmark_shapes())
      out.push_back({s.rows, {s.h}, s.dtype});
    return out;
  }
  // eps = 1e-6 (the GPU worker's measurement modes; the quick bench mode used 1e-5 before).
  std::vector<op::ScalarArg> benchmark_scalars() const override {
    return {op::ScalarArg::of(1e-6)};
  }

  op::Validated validate(const op::CallArgs& call) const override {
    if (call.tensors.size() != 2 || call.scalars.size() != 1)
      throw std::invalid_argument(fmt::format("weighted_rmsnorm takes (x, weight, eps); got {} "
                                              "tensors and {} scalars",
                                              call.tensors.size(), call.scalars.size()));
    const HostTensor& x = call.tensors[0];
    const Validation v = rmsnorm::validate(x, call.tensors[1], call.scalars[0]);
    op::Validated out;
    if (!v.ok()) {
      out.error = *v.error;
      return out;
    }
    out.rows = v.rows;
    out.batch_shape.assign(x.shape().begin(), x.shape().end() - 1);
    out.axes = {v.h};
    out.scalars = {v.eps32};
    return out;
  }
  std::vector<HostTensor> reference(const op::CallArgs& call,
                                    const op::Validated& v) const override {
    return {reference_compute(call.tensors[0], call.tensors[1], static_cast<float>(v.scalars[0]))};
  }
  op::Tolerance tolerance(DType dtype, int) const override { return tolerance_for(dtype); }

  std::vector<std::string> suite_names() const override {
    return {"public", "large", "cases_md", "invalid"};
  }
  std::vector<nlohmann::json> suite(std::string_view name, std::uint64_t seed) const override {
    if (name == "public") return specs_json(public_cases(seed));
    if (name == "large") return specs_json(large_cases(seed));
    if (name == "cases_md") return specs_json(cases_md_cases());
    if (name == "invalid") return specs_json(invalid_cases(seed));
    throw std::invalid_argument(fmt::format(
        "weighted_rmsnorm has no case suite '{}'; use public, large, cases_md or invalid", name));
  }
  op::CallArgs materialize(const nlohmann::json& spec) const override {
    CaseInputs in = rmsnorm::materialize(CaseSpec::from_json(spec));
    return {{std::move(in.x), std::move(in.weight)}, {in.eps}};
  }
  std::int64_t case_elements(const nlohmann::json& spec) const override {
    return CaseSpec::from_json(spec).numel();
  }

  std::string_view holdout_version() const override { return "weighted_rmsnorm-holdout/1"; }
  std::vector<nlohmann::json> holdout_suite(std::uint64_t seed, int cases,
                                            std::int64_t max_elements) const override {
    return specs_json(holdout_cases(seed, cases, max_elements));
  }
  std::vector<nlohmann::json> search_pool(std::uint64_t seed, int cases, int holdout_style_cases,
                                          std::int64_t max_case_elements) const override {
    return specs_json(search_pool_cases(seed, cases, holdout_style_cases, max_case_elements));
  }
  op::CaseDescription describe_case(const nlohmann::json& spec) const override {
    const CaseSpec s = CaseSpec::from_json(spec);
    return {s.family, s.dtype, s.h, describe_inputs(s)};
  }
  op::PromptText prompt_text() const override { return rmsnorm::prompt_text(); }
  std::unique_ptr<op::OfflineGenerator> offline_generator(std::uint64_t seed) const override {
    return std::make_unique<op::FamilyGenerator<OfflinePolicy>>(seed, [](const PolicyDecision& d) {
      GeneratedCandidate g = generate(d.variant, d.rationale);
      return op::OfflineCandidate{std::move(g.kernel_cu), std::move(g.manifest_json),
                                  std::move(g.name), std::move(g.rationale), d.rules};
    });
  }
};

} // namespace

const op::Operator& operator_instance() {
  static const RmsNorm instance;
  return instance;
}

} // namespace kloop::rmsnorm
