// weighted_rmsnorm/1 through the operator interface (operator.h).
#include "kernels/rmsnorm/operator.h"

#include "kernels/rmsnorm/contract.h"

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
};

} // namespace

const op::Operator& operator_instance() {
  static const RmsNorm instance;
  return instance;
}

} // namespace kloop::rmsnorm
