// Builds the three prompts of a session from the embedded templates: the system prompt, the
// contract prompt (from the operator's machine-readable contract JSON, its declaration and its
// own paragraphs, op::Operator::prompt_text()) and the
// feedback prompt (from a feedback::FeedbackPayload). Everything is validated in the constructor:
// the templates against their declared placeholders and the contract against the keys the contract
// prompt needs, so a broken template or contract is an error at start-up, not a blank in a prompt.
// Structural rules are rendered; evaluation fixtures never are: the contract's
// "benchmark_shapes" and any test-suite data are not read.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "feedback/feedback.h"
#include "kernels/operator.h"

namespace kloop::prompts {

class PromptBuilder {
public:
  // `contract`: a registered operator's contract document (its "id" names the operator, whose
  // declaration and prompt_text() fill the rest). Keys read: "operator", "id", "signature",
  // "dtypes", "inputs" (object), "formula" (array of steps), "output", "non_finite", "tolerance"
  // (object with "rule" and "per_dtype"), "kernel_signature", "manifest_schema" (object). Throws
  // PromptError naming a missing or mistyped key, an unregistered id, or a template problem.
  explicit PromptBuilder(const nlohmann::json& contract);
  // The same for `op`'s own contract document.
  explicit PromptBuilder(const op::Operator& op);

  const std::string& system_prompt() const { return system_; }
  // First user message: the contract, deliverables, forbidden constructs and reply format.
  const std::string& contract_prompt() const { return contract_; }
  // User message after an evaluation. iteration: the evaluated candidate's 0-based iteration;
  // iterations_left: how many more candidates the budget allows.
  std::string feedback_prompt(const feedback::FeedbackPayload& payload, int iteration,
                              int iterations_left) const;

private:
  std::string system_;
  std::string contract_;
};

} // namespace kloop::prompts
