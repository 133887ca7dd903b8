// row_softmax/1 through the operator interface (operator.h).
#include "kernels/softmax/operator.h"

#include <stdexcept>

#include <fmt/format.h>

#include "kernels/softmax/cases.h"
#include "kernels/softmax/contract.h"
#include "kernels/softmax/family_policy.h"
#include "kernels/softmax/reference.h"

namespace kloop::softmax {

const op::Declaration& declaration() {
  static const op::Declaration decl = [] {
    op::Declaration d;
    d.name = std::string(kOperatorName);
    d.version = kContractVersion;
    d.axes = {{.name = "N", .doc = "row width: x.shape[-1], the softmax dimension"}};
    d.tensors = {
        {.name = "x", .role = op::Role::kInput, .dims = {"N"}, .doc = "the rows (logits)"},
        {.name = "y",
         .role = op::Role::kOutput,
         .dims = {"N"},
         .doc = "fresh output, x's shape and dtype: the softmax of each row"},
    };
    return d;
  }();
  return decl;
}

namespace {

using op::specs_json;

class RowSoftmax final : public op::Operator {
public:
  const op::Declaration& declaration() const override { return softmax::declaration(); }
  std::string_view cli_name() const override { return "softmax"; }
  std::string_view summary() const override {
    return "softmax over the last dimension: y = exp(x - max) / sum(exp(x - max)), float32 inside";
  }
  const nlohmann::json& contract() const override { return contract_json(); }
  std::vector<op::BenchShape> benchmark_shapes() const override {
    return softmax::benchmark_shapes();
  }
  std::vector<op::ScalarArg> benchmark_scalars() const override { return {}; }

  op::Validated validate(const op::CallArgs& call) const override {
    if (call.tensors.size() != 1 || !call.scalars.empty())
      throw std::invalid_argument(fmt::format("row_softmax takes (x); got {} tensors and {} "
                                              "scalars",
                                              call.tensors.size(), call.scalars.size()));
    const HostTensor& x = call.tensors[0];
    const Validation v = softmax::validate(x);
    op::Validated out;
    if (!v.ok()) {
      out.error = *v.error;
      return out;
    }
    out.rows = v.rows;
    out.batch_shape.assign(x.shape().begin(), x.shape().end() - 1);
    out.axes = {v.n};
    return out;
  }
  std::vector<HostTensor> reference(const op::CallArgs& call, const op::Validated&) const override {
    return {reference_compute(call.tensors[0])};
  }
  op::Tolerance tolerance(DType dtype, int) const override { return tolerance_for(dtype); }

  std::vector<std::string> suite_names() const override { return {"public", "large", "invalid"}; }
  std::vector<nlohmann::json> suite(std::string_view name, std::uint64_t seed) const override {
    if (name == "public") return specs_json(public_cases(seed));
    if (name == "large") return specs_json(large_cases(seed));
    if (name == "invalid") return specs_json(invalid_cases(seed));
    throw std::invalid_argument(
        fmt::format("row_softmax has no case suite '{}'; use public, large or invalid", name));
  }
  op::CallArgs materialize(const nlohmann::json& spec) const override {
    return softmax::materialize(CaseSpec::from_json(spec));
  }
  std::int64_t case_elements(const nlohmann::json& spec) const override {
    return CaseSpec::from_json(spec).numel();
  }

  std::string_view holdout_version() const override { return "row_softmax-holdout/1"; }
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
    return {s.family, s.dtype, s.n, describe_inputs(s)};
  }
  op::PromptText prompt_text() const override { return softmax::prompt_text(); }
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
  static const RowSoftmax instance;
  return instance;
}

} // namespace kloop::softmax
