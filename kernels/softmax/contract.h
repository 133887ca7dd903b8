// The machine-readable contract of row_softmax version 1: signature, dtypes, the formula as
// ordered steps, the non-finite semantics (PyTorch's, reference.h), declared errors, the per-dtype
// tolerance policy, the kernel signature and manifest schema from the declaration, and the
// benchmark sweep. The tolerance constants live here so that they are fixed before any candidate
// runs and are covered by the contract hash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/call.h"
#include "kernels/dtype.h"
#include "kernels/operator.h"

namespace kloop::softmax {

inline constexpr std::string_view kOperatorName = "row_softmax";
inline constexpr int kContractVersion = 1;

// The declared tolerance of `dtype` (the rule is kernels/call.h's; constants justified in
// contract.cpp).
op::Tolerance tolerance_for(DType dtype);

// The benchmark sweep: the target shape 16384 x 32768, N in {128, 1009, 1024, 4096, 4099, 8192,
// 32768} at about 2^22 to 2^29 elements, and two launch-bound shapes (8 and 512 rows x 4096), for
// all three dtypes.
std::vector<op::BenchShape> benchmark_shapes();

// The contract document (stable key order from nlohmann's sorted object keys); its canonical dump
// is what the contract hash covers.
const nlohmann::json& contract_json();
// "row_softmax/1".
std::string contract_id();

// The contract prompt's row_softmax/1 paragraphs (kernels/operator.h, PromptText).
op::PromptText prompt_text();

} // namespace kloop::softmax
