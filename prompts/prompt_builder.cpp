#include "prompts/prompt_builder.h"

#include <fmt/format.h>

#include "kernels/manifest.h"
#include "kernels/registry.h"

#include "prompts/renderer.h"
#include "prompts/templates.h"

namespace kloop::prompts {
namespace {

// Same text as agent::kFormatInstruction (agent/ sits above prompts/, so it is repeated here).
constexpr const char* kFormatInstruction =
    "Reply with exactly one ```cuda block holding kernel.cu and exactly one ```json block holding "
    "manifest.json; return exactly one cuda block and one json block.";

const nlohmann::json& need(const nlohmann::json& contract, const char* key,
                           nlohmann::json::value_t type) {
  auto it = contract.find(key);
  if (it == contract.end())
    throw PromptError(fmt::format("contract JSON has no \"{}\"; the contract prompt needs it "
                                  "(the operator's kernels/<name>/contract.cpp)",
                                  key));
  const bool ok =
      type == nlohmann::json::value_t::number_integer ? it->is_number() : it->type() == type;
  if (!ok)
    throw PromptError(fmt::format("contract JSON key \"{}\" is a {}, expected another type; fix "
                                  "the operator's kernels/<name>/contract.cpp",
                                  key, it->type_name()));
  return *it;
}

std::string str(const nlohmann::json& c, const char* key) {
  return need(c, key, nlohmann::json::value_t::string).get<std::string>();
}

std::string bullet_lines(const nlohmann::json& items, const char* key) {
  std::string out;
  int i = 1;
  for (const auto& step : items) {
    if (!step.is_string())
      throw PromptError(fmt::format("contract JSON \"{}\" holds a non-string entry", key));
    out += fmt::format("  {}. {}\n", i++, step.get<std::string>());
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::string render_inputs(const nlohmann::json& inputs) {
  std::string out;
  for (const auto& [name, text] : inputs.items())
    out +=
        fmt::format("  {}: {}\n", name, text.is_string() ? text.get<std::string>() : text.dump());
  if (!out.empty()) out.pop_back();
  return out;
}

std::string render_tolerance(const nlohmann::json& tol) {
  std::string out = "  rule: ";
  auto rule = tol.find("rule");
  if (rule == tol.end() || !rule->is_string())
    throw PromptError("contract JSON \"tolerance\" has no string \"rule\"");
  out += rule->get<std::string>();
  if (auto per = tol.find("per_dtype"); per != tol.end() && per->is_object()) {
    for (const auto& [dtype, t] : per->items())
      out += fmt::format("\n  {}: {}", dtype, t.dump());
  }
  return out;
}

// "never write to x or weight, and never alias them." from the declaration's input tensors.
std::string input_rule(const op::Declaration& d) {
  std::vector<std::string> names;
  for (const op::Tensor& t : d.tensors)
    if (t.role == op::Role::kInput) names.push_back(t.name);
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : (i + 1 == names.size() ? " or " : ", ")) + names[i];
  if (names.empty()) return "never alias the inputs.";
  return fmt::format("never write to {}, and never alias {}.", list,
                     names.size() == 1 ? "it" : "them");
}

// "y" (the written tensors, joined with " and ").
std::string outputs_of(const op::Declaration& d) {
  std::string out;
  for (int t : op::written_tensors(d))
    out += (out.empty() ? "" : " and ") + d.tensors[static_cast<std::size_t>(t)].name;
  return out;
}

// "fixed_bytes + bytes_per_h * H": the launch rule's shared-memory formula in the declaration's
// names.
std::string smem_rule(const op::Declaration& d) {
  const int ra = d.row_axis();
  if (ra < 0) return "fixed_bytes";
  const std::string& axis = d.axes[static_cast<std::size_t>(ra)].name;
  return fmt::format("fixed_bytes + bytes_per_{} * {}", op::key_name(axis), axis);
}

const op::Operator& operator_of(const std::string& id) {
  const op::Operator* op = op::find_operator(id);
  if (!op)
    throw PromptError(fmt::format("contract JSON \"id\" = \"{}\" is no registered operator ({})",
                                  id, op::operator_names()));
  return *op;
}

} // namespace

PromptBuilder::PromptBuilder(const op::Operator& op) : PromptBuilder(op.contract()) {}

PromptBuilder::PromptBuilder(const nlohmann::json& contract) {
  validate_templates();
  if (!contract.is_object()) throw PromptError("contract JSON is not an object");
  using vt = nlohmann::json::value_t;
  const std::string id = str(contract, "id");
  std::string dtypes;
  for (const auto& d : need(contract, "dtypes", vt::array))
    dtypes += (dtypes.empty() ? "" : ", ") + (d.is_string() ? d.get<std::string>() : d.dump());
  const op::Operator& op = operator_of(id);
  const op::PromptText text = op.prompt_text();
  system_ = render(template_text("system"), {{"contract_id", id}}, "system");
  contract_ = render(template_text("contract"),
                     {{"operator", str(contract, "operator")},
                      {"contract_id", id},
                      {"signature", str(contract, "signature")},
                      {"dtypes", dtypes},
                      {"inputs", render_inputs(need(contract, "inputs", vt::object))},
                      {"semantics", bullet_lines(need(contract, "formula", vt::array), "formula")},
                      {"output_rules", str(contract, "output")},
                      {"non_finite", str(contract, "non_finite")},
                      {"accuracy_intro", text.accuracy_intro},
                      {"tolerance", render_tolerance(need(contract, "tolerance", vt::object))},
                      {"accuracy_notes", text.accuracy_notes},
                      {"input_rule", input_rule(op.declaration())},
                      {"outputs", outputs_of(op.declaration())},
                      {"kernel_signature", str(contract, "kernel_signature")},
                      {"manifest_schema", need(contract, "manifest_schema", vt::object).dump(2)},
                      {"example_manifest", text.example_manifest},
                      {"smem_rule", smem_rule(op.declaration())},
                      {"format_instruction", kFormatInstruction}},
                     "contract");
  // Render the feedback template once now so a problem surfaces at start-up.
  (void)feedback_prompt(feedback::FeedbackPayload{}, 0, 0);
}

std::string PromptBuilder::feedback_prompt(const feedback::FeedbackPayload& payload, int iteration,
                                           int iterations_left) const {
  std::string body = payload.render();
  if (body.empty()) body = "(no diagnostics)\n";
  return render(template_text("feedback"),
                {{"iteration", std::to_string(iteration)},
                 {"iterations_left", std::to_string(iterations_left)},
                 {"verdict", payload.verdict.empty() ? "unknown" : payload.verdict},
                 {"feedback", body},
                 {"format_instruction", kFormatInstruction}},
                "feedback");
}

} // namespace kloop::prompts
