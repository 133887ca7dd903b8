// Unit tests of the prompt renderer, the embedded templates and the prompt builder.
#include <gtest/gtest.h>

#include "kernels/manifest.h"
#include "kernels/registry.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/softmax/operator.h"
#include "prompts/prompt_builder.h"
#include "prompts/renderer.h"
#include "prompts/templates.h"

namespace kloop::prompts {
namespace {

bool has(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

TEST(Renderer, ReplacesNamedPlaceholders) {
  EXPECT_EQ(render("a {{x}} b {{y_2}} {{x}}", {{"x", "1"}, {"y_2", "two"}}, "t"), "a 1 b two 1");
  EXPECT_EQ(placeholders_of("{{a}}{{b}}{{a}}", "t"), (std::set<std::string>{"a", "b"}));
}

TEST(Renderer, MissingValueIsAnErrorNamingThePlaceholder) {
  try {
    render("hello {{name}}", {}, "greeting");
    FAIL() << "expected PromptError";
  } catch (const PromptError& e) {
    EXPECT_TRUE(has(e.what(), "{{name}}"));
    EXPECT_TRUE(has(e.what(), "greeting"));
  }
}

TEST(Renderer, UnusedValueIsAnError) {
  EXPECT_THROW(render("hello", {{"name", "x"}}, "t"), PromptError);
}

TEST(Renderer, MalformedPlaceholderIsAnError) {
  EXPECT_THROW(placeholders_of("a {{ name }}", "t"), PromptError);
  EXPECT_THROW(placeholders_of("a {{Name}}", "t"), PromptError);
  EXPECT_THROW(placeholders_of("a {{name", "t"), PromptError);
  EXPECT_THROW(placeholders_of("{{}}", "t"), PromptError);
}

TEST(Renderer, ValuesAreNotRescannedForPlaceholders) {
  EXPECT_EQ(render("{{a}}", {{"a", "{{b}} {{"}}, "t"), "{{b}} {{");
}

TEST(Templates, AllEmbeddedAndMatchTheirDeclaredPlaceholders) {
  EXPECT_NO_THROW(validate_templates());
  for (const char* name : {"system", "contract", "feedback"}) {
    EXPECT_FALSE(template_text(name).empty()) << name;
    EXPECT_EQ(placeholders_of(template_text(name), name), declared_placeholders(name)) << name;
  }
  EXPECT_THROW(template_text("nope"), PromptError);
}

TEST(PromptBuilderTest, ContractPromptStatesSemanticsSignatureSchemaAndRules) {
  const PromptBuilder b(rmsnorm::contract_json());
  const std::string& c = b.contract_prompt();
  EXPECT_TRUE(has(c, "weighted_rmsnorm/1"));
  EXPECT_TRUE(has(c, "extern \"C\" __global__ void ENTRY(const T* x, const T* weight, T* y"));
  EXPECT_TRUE(has(c, "rsqrt"));
  EXPECT_TRUE(has(c, "\"block_threads\""));
  EXPECT_TRUE(has(c, "\"build_command\""));
  EXPECT_TRUE(has(c, "\"claimed_target\""));
  EXPECT_TRUE(has(c, "Forbidden"));
  EXPECT_TRUE(has(c, "return exactly one cuda block and one json block"));
  EXPECT_FALSE(has(c, "{{"));
  EXPECT_TRUE(has(b.system_prompt(), "weighted_rmsnorm/1"));
}

TEST(PromptBuilderTest, ContractPromptCarriesNoBenchmarkOrSuiteShapes) {
  const PromptBuilder b(rmsnorm::contract_json());
  const std::string all = b.system_prompt() + b.contract_prompt();
  EXPECT_FALSE(has(all, "benchmark_shapes"));
  // Sizes of the benchmark sweep and the public suite's tail widths; small values such as 8 or
  // 1024 also occur as schema bounds (block_threads <= 1024) and are not distinctive.
  for (const char* size : {"32768", "16384", "4096", "2048", "8192", "4099", "129", "511", "513"})
    EXPECT_FALSE(has(all, size)) << size;
  EXPECT_FALSE(has(all, "1009"));
}

TEST(PromptBuilderTest, MissingContractKeyIsAStartupError) {
  nlohmann::json broken = rmsnorm::contract_json();
  broken.erase("kernel_signature");
  try {
    PromptBuilder b(broken);
    FAIL() << "expected PromptError";
  } catch (const PromptError& e) {
    EXPECT_TRUE(has(e.what(), "kernel_signature"));
  }
  nlohmann::json wrong = rmsnorm::contract_json();
  wrong["formula"] = "not a list";
  EXPECT_THROW(PromptBuilder{wrong}, PromptError);
}

TEST(PromptBuilderTest, FeedbackPromptEmbedsPayloadAndIterations) {
  const PromptBuilder b(rmsnorm::contract_json());
  feedback::FeedbackPayload p;
  p.verdict = "reject";
  p.sections = {{"build", "kernel.cu(3): error: x", false}};
  const std::string f = b.feedback_prompt(p, 1, 3);
  EXPECT_TRUE(has(f, "iteration 1"));
  EXPECT_TRUE(has(f, "verdict reject"));
  EXPECT_TRUE(has(f, "Iterations left after this one: 3"));
  EXPECT_TRUE(has(f, "## build\nkernel.cu(3): error: x"));
  EXPECT_FALSE(has(f, "{{"));
}

// Every registered operator's contract prompt: its own id, signature, input and output names,
// shared-memory rule and example manifest (which its manifest parser accepts), nothing of another
// operator, no placeholder left and no benchmark or suite size.
TEST(PromptBuilderTest, EveryOperatorGetsItsOwnContractPrompt) {
  for (const op::Operator* o : op::operators()) {
    const PromptBuilder b(*o);
    const std::string& c = b.contract_prompt();
    EXPECT_TRUE(has(c, o->contract_id())) << o->cli_name();
    EXPECT_TRUE(has(c, op::kernel_signature(o->declaration()))) << o->cli_name();
    EXPECT_FALSE(has(c, "{{")) << o->cli_name();
    const std::string example = o->prompt_text().example_manifest;
    EXPECT_TRUE(has(c, "```json\n" + example + "\n```")) << o->cli_name();
    const auto parsed = op::parse_manifest(o->declaration(), example);
    EXPECT_TRUE(parsed.errors.empty()) << o->cli_name() << ": " << parsed.errors.front().message;
    for (const op::Operator* other : op::operators()) {
      if (other == o) continue;
      EXPECT_FALSE(has(c, other->contract_id())) << o->cli_name();
    }
    for (const char* size : {"32768", "16384", "4096", "2048", "8192", "4099", "1009"})
      EXPECT_FALSE(has(c, size)) << o->cli_name() << " " << size;
  }
  const std::string sm = PromptBuilder(softmax::operator_instance()).contract_prompt();
  EXPECT_TRUE(has(sm, "never write to x, and never alias it."));
  EXPECT_TRUE(has(sm, "Write every element of y for every row"));
  EXPECT_TRUE(has(sm, "fixed_bytes + bytes_per_n * N bytes"));
  EXPECT_TRUE(has(sm, "-inf - (-inf)"));
  EXPECT_FALSE(has(sm, "weight"));
  EXPECT_FALSE(has(sm, "rsqrt"));
  const std::string rms = PromptBuilder(rmsnorm::contract_json()).contract_prompt();
  EXPECT_TRUE(has(rms, "never write to x or weight, and never alias them."));
  EXPECT_TRUE(has(rms, "fixed_bytes + bytes_per_h * H bytes"));
}

TEST(PromptBuilderTest, AContractOfNoRegisteredOperatorIsAStartupError) {
  nlohmann::json other = rmsnorm::contract_json();
  other["id"] = "layer_norm/1";
  try {
    PromptBuilder b(other);
    FAIL() << "expected PromptError";
  } catch (const PromptError& e) {
    EXPECT_TRUE(has(e.what(), "layer_norm/1"));
    EXPECT_TRUE(has(e.what(), "rmsnorm"));
  }
}

} // namespace
} // namespace kloop::prompts
