// Unit tests of the prompt renderer, the embedded templates and the prompt builder.
#include <gtest/gtest.h>

#include "kernels/rmsnorm/contract.h"
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

} // namespace
} // namespace kloop::prompts
