// The row_softmax/1 contract document, its tolerance constants and its benchmark sweep.
#include "kernels/softmax/contract.h"

#include <array>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/manifest.h"
#include "kernels/softmax/operator.h"
#include "kernels/softmax/reference.h"

namespace kloop::softmax {

// Why these values (fixed before any candidate runs; part of the contract hash). The reference is
// the float64 softmax rounded to float32 and then to T (reference.h), so every bound below is an
// honest float32 kernel's own error plus the final rounding.
// - float32: an honest kernel differs by (a) the sum's reduction order: a lane adding 2048 terms
//   sequentially (a warp per row at N = 65536) can be off by ~2048 * 2^-24 / 2 ~ 6e-5 relative in
//   the worst case, the argument RMSNorm's float32 rtol rests on (kernels/rmsnorm/contract.cpp);
//   an online softmax's rescaling (s * exp(m_old - m_new), one per new running max) adds a few
//   ulps per rescale, random in sign; (b) exp: expf is within 2 ulps, __expf (ex2.approx of
//   (x - m) * log2(e)) within 2 + 1.173 |x - m| ulps (CUDA C++ Programming Guide, "Intrinsic
//   functions"), at most ~7e-6 relative where exp(x - m) is still a normal float32 (x - m >=
//   -87.3); (c) x - m rounded in float32: exact when x and m are within a factor of two
//   (Sterbenz), else |x - m| * 2^-24 relative in the result, ~6e-6 at x - m = -104; (d) the
//   division or a multiply by a reciprocal: 1-2 ulps; the log-sum-exp form exp(x - m - log(s))
//   moves (c) to |x - m - log s| * 2^-24. rtol 1e-4 covers the worst of these together; a missing
//   or doubled term of the sum changes a row by its weight (1/N for a uniform row: 2.4e-4 at
//   N = 4096) and a float16/bfloat16 accumulator by ~1e-3 or more, which fail. atol 1e-30: the
//   only absolute errors of an honest float32 kernel are below the normal range (flush-to-zero of
//   exp or of the division: at most 1.2e-38), so elements as small as 1e-26 are still judged
//   relatively; the seed's atol 1e-6 would accept zeros for every element of a peaked row below
//   1e-6. row_floor 1e-30: a softmax row's norm is at least 1/sqrt(N) (it sums to 1), so the floor
//   only serves rows of no finite entry.
// - float16: one final rounding of an fp32 value; values a few fp32 ulps apart can round to
//   neighbouring halves, so 1 half ulp (2^-10 relative at the bottom of a binade) must pass: rtol
//   2e-3 (2.05 ulps). Softmax outputs of wide rows lie in float16's subnormal range (below 6.1e-5,
//   spacing 2^-24 = 5.96e-8: every element of a uniform row at N > 16384): atol 1.2e-7 admits two
//   subnormal spacings. For the row rule an all-equal row can round every element one spacing
//   away together (1/N near a float16 rounding tie): error norm sqrt(N) * 2^-24 = 1.5e-5 at
//   N = 65536, within row_rtol * row_floor = 2e-3 * 1e-2 = 2e-5 (the floor RMSNorm's float16
//   rule uses for the same reason; it holds up to N ~ 110000, past every float16 case of the
//   suites).
// - bfloat16: the same argument with 8 significant bits: rtol 1.6e-2 (2.05 ulps at the bottom of
//   a binade); bfloat16 has float32's exponent range, so atol and row_floor are float32's.
op::Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
  case DType::kFloat32:
    return {.atol = 1e-30, .rtol = 1e-4, .row_rtol = 1e-4, .row_floor = 1e-30};
  case DType::kFloat16:
    return {.atol = 1.2e-7, .rtol = 2e-3, .row_rtol = 2e-3, .row_floor = 1e-2};
  case DType::kBFloat16:
    return {.atol = 1e-30, .rtol = 1.6e-2, .row_rtol = 1.6e-2, .row_floor = 1e-30};
  }
  throw std::invalid_argument("row_softmax tolerance_for: unknown dtype");
}

std::vector<op::BenchShape> benchmark_shapes() {
  static constexpr std::array<std::array<std::int64_t, 2>, 11> kShapes{{{16384, 32768},
                                                                        {8, 4096},
                                                                        {512, 4096},
                                                                        {65536, 128},
                                                                        {32768, 1024},
                                                                        {32768, 1009},
                                                                        {16384, 4096},
                                                                        {4096, 4099},
                                                                        {8192, 8192},
                                                                        {4096, 32768},
                                                                        {1024, 32768}}};
  std::vector<op::BenchShape> out;
  for (DType d : kAllDTypes)
    for (const auto& s : kShapes)
      out.push_back({s[0], {s[1]}, d});
  return out;
}

std::string contract_id() {
  return fmt::format("{}/{}", kOperatorName, kContractVersion);
}

namespace {

nlohmann::json build_contract() {
  using nlohmann::json;
  json errors = json::array();
  for (int c = 1; c <= kErrorCodes; ++c)
    errors.push_back(error_code_name(static_cast<ErrorCode>(c)));
  json tolerances = json::object();
  for (DType d : kAllDTypes)
    tolerances[std::string(dtype_name(d))] = tolerance_for(d).to_json();
  json bench = json::array();
  for (const auto& s : benchmark_shapes())
    bench.push_back(s.to_json(declaration()));
  return json{
      {"operator", kOperatorName},
      {"version", kContractVersion},
      {"id", contract_id()},
      {"signature", "row_softmax(x: Tensor[..., N]) -> Tensor[..., N]  (torch.softmax(x, dim=-1))"},
      {"dtypes", {"float16", "bfloat16", "float32"}},
      {"inputs",
       {{"x", "strided tensor [..., N], rank >= 1, N >= 0, any strides (views, expanded and "
              "transposed tensors); outer dims may be empty"}}},
      {"formula",
       {"xf = float32(x)", "m = max(xf, dim=-1)",
        "e = exp(xf - m) (float32; exp of -inf is exactly 0)",
        "s = sum(e, dim=-1) (float32, any summation order)",
        "u = e / s (float32; e * (1 / s) is the same rule)",
        "y = cast(u, x.dtype), round to nearest even, once"}},
      {"output", "fresh tensor of x's shape and dtype; never mutates or aliases x; N == 0 or an "
                 "empty batch gives an empty output"},
      {"non_finite",
       "PyTorch's semantics, row by row: a NaN anywhere makes every output of the row NaN; a +inf "
       "(and no NaN) makes every output NaN (max = +inf, inf - inf is NaN in the sum); a row whose "
       "every element is -inf gives NaN everywhere (-inf - (-inf) is NaN), as torch.softmax does; "
       "a -inf element of a row with a finite max gives exactly 0 and the other elements the "
       "softmax of the finite ones; finite rows never overflow (x - max <= 0 at any magnitude up "
       "to the dtype's largest value)"},
      {"errors", errors},
      {"tolerance",
       {{"rule", "finite expected: |a-e| <= atol + rtol*|e|; NaN positions equal; signed Inf "
                 "equal; finite expected needs finite actual; per row: ||a-e||_2 <= row_rtol * "
                 "max(||e||_2, row_floor) over finite-expected entries"},
        {"per_dtype", tolerances},
        {"accepted_differences",
         {"any float32 or wider summation order of the sum, two passes or an online "
          "(running max, rescaled sum) pass",
          "expf or __expf / ex2.approx.f32 of (x - m) * log2(e)",
          "the division or a multiply by the reciprocal of the sum",
          "the log-sum-exp form exp(x - m - log(s))",
          "flush-to-zero of results below float32's normal range"}},
        {"bounds_in_output_ulps",
         {{"float16", "2 ulps always pass (rtol 2e-3 is 2.05 ulps at the bottom of a binade; atol "
                      "1.2e-7 is 2 subnormal spacings); 3 fail at the bottom of a binade"},
          {"bfloat16", "2 ulps always pass (rtol 1.6e-2 is 2.05 ulps at the bottom of a binade); "
                       "3 fail there"},
          {"float32", "838 ulps always pass (rtol 1e-4 is 838.9 ulps at the bottom of a binade)"}}},
        {"rejected_differences",
         {"a float16 or bfloat16 accumulator or exponent", "no max subtraction (exp overflows)",
          "a running max initialised to 0 instead of -inf (rows of large negative values "
          "underflow to 0 / 0)",
          "a missing, doubled or stale term of the sum", "any other formula"}}}},
      {"kernel_signature", op::kernel_signature(declaration())},
      {"manifest_schema", op::format1_schema(declaration())},
      {"benchmark_shapes", bench},
  };
}

} // namespace

// The contract prompt's row_softmax/1 paragraphs (kernels/operator.h, PromptText).
op::PromptText prompt_text() {
  op::PromptText t;
  t.accuracy_intro =
      R"(outputs are compared against a float64 reference rounded to the output dtype, with a
tolerance declared before any candidate runs:)";
  t.accuracy_notes =
      R"(The tolerance accepts what honest kernels do differently: any float32 (or wider) summation
order, one online pass (a running max and a sum rescaled when it grows) or separate max and sum
passes, expf or __expf, a multiply by 1 / sum instead of the division, and the log-sum-exp form
exp(x - max - log(sum)). These stay within 2 ulps of a float16/bfloat16 output and within 1e-4
relative for float32; a float16 or bfloat16 accumulator, a missing max subtraction, a running max
started at 0, or a row that is not NaN where the non-finite rules say so, does not. A row that
starts with -inf elements must not turn into NaN: an online pass that subtracts a running max of
-inf from -inf poisons the sum. A failure names the element (row, column), the expected and
actual values, the error in ulps of the output dtype and the bound.)";
  t.example_manifest = R"({
  "contract": "row_softmax/1",
  "entry_points": {"float32": "sm_f32", "float16": "sm_f16", "bfloat16": "sm_bf16"},
  "launch": {"block_threads": 512, "rows_per_block": 1, "grid": "persistent",
             "dynamic_smem": {"fixed_bytes": 0, "bytes_per_n": 0}},
  "dispatch": {"n_min": 1, "n_max": 16777216, "n_multiple_of": 1,
               "x_rows": "any_stride", "alignment_bytes": 2},
  "target": "sm_90",
  "known_limits": "what the fast path does not cover, in one or two sentences",
  "build_command": "the nvcc or NVRTC command line you expect, for the record",
  "claimed_target": "the hardware you tuned for, e.g. H100 SXM"
})";
  return t;
}

const nlohmann::json& contract_json() {
  static const nlohmann::json contract = build_contract();
  return contract;
}

} // namespace kloop::softmax
