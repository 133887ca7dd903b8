// Unit tests of the reply parser: one kernel block and one manifest make a candidate; anything else
// is a `format` failure value whose message asks for exactly one of each. The styles real models
// write (think blocks, reasoning fields, truncation, refusals, ...) are the reply corpus's
// (reply_corpus_test).
#include <gtest/gtest.h>

#include "agent/reply_parser.h"
#include "kernels/manifest.h"

namespace kloop::agent {
namespace {

const std::string kKernel = "extern \"C\" __global__ void rms_f32(const float* x, const float* w, "
                            "float* y, long long rows,\n"
                            "    int H, long long xs, long long ys, float eps) {}\n";
const std::string kManifest = R"({"contract": "weighted_rmsnorm/1", "target": "sm_90"})";

std::string reply(const std::string& lang = "cuda") {
  return "Here is my kernel.\n\n```" + lang + "\n" + kKernel + "```\n\nManifest:\n```json\n" +
         kManifest + "\n```\nDone.\n";
}

void expect_format_failure(const ParsedReply& p, const std::string& fragment) {
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(p.kernel_source.empty());
  EXPECT_NE(p.error.find(fragment), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("return exactly one cuda block and one json block"), std::string::npos);
}

TEST(ReplyParser, GoodReplyGivesKernelAndManifest) {
  const ParsedReply p = parse_reply(reply());
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.kernel_source, kKernel);
  EXPECT_EQ(p.manifest_text, kManifest + "\n");
  EXPECT_EQ(p.code_blocks, 1);
  EXPECT_EQ(p.json_blocks, 1);
}

TEST(ReplyParser, AcceptsCppAndCxxFencesAndCaseAndIndent) {
  for (const std::string lang : {"cpp", "c++", "CUDA", "cu"}) {
    const ParsedReply p = parse_reply(reply(lang));
    EXPECT_TRUE(p.ok) << lang << ": " << p.error;
  }
  const ParsedReply indented =
      parse_reply("  ```cuda\n" + kKernel + "  ```\n  ```json\n" + kManifest + "\n  ```\n");
  EXPECT_TRUE(indented.ok) << indented.error;
}

TEST(ReplyParser, IgnoresBlocksInOtherLanguages) {
  const ParsedReply p = parse_reply("```bash\nnvcc -arch=sm_90 kernel.cu\n```\n" + reply());
  EXPECT_TRUE(p.ok) << p.error;
}

TEST(ReplyParser, MissingBlockIsFormatFailure) {
  expect_format_failure(parse_reply("```cuda\n" + kKernel + "```\n"), "0 json blocks");
  expect_format_failure(parse_reply("I cannot help with that."), "declines the task");
  expect_format_failure(parse_reply("Use a block per row."), "0 cuda blocks");
  expect_format_failure(parse_reply(""), "the reply is empty");
}

TEST(ReplyParser, TwoDifferentKernelBlocksOrManifestsAreAmbiguous) {
  const std::string v2 = "extern \"C\" __global__ void rms_f32() { /* v2 */ }\n";
  expect_format_failure(parse_reply(reply() + "\n```cuda\n" + v2 + "```\n"),
                        "2 different cuda blocks");
  EXPECT_EQ(parse_reply(reply() + "\n```cuda\n" + v2 + "```\n").outcome, ReplyOutcome::kAmbiguous);
  expect_format_failure(parse_reply(reply() + "\n```json\n{}\n```\n"), "2 different json");
  // A code block without a kernel (a build line, a host-side example) is not a second kernel.
  EXPECT_TRUE(parse_reply(reply() + "\n```cuda\n// v2\n```\n").ok);
}

TEST(ReplyParser, UnterminatedFenceIsFormatFailure) {
  expect_format_failure(parse_reply("```json\n" + kManifest + "\n```\n```cuda\n" + kKernel),
                        "never closed");
}

TEST(ReplyParser, BrokenJsonIsFormatFailure) {
  expect_format_failure(parse_reply("```cuda\n" + kKernel + "```\n```json\n{\"contract\": \n```\n"),
                        "does not parse");
  expect_format_failure(parse_reply("```cuda\n" + kKernel + "```\n```json\n[1, 2]\n```\n"),
                        "not an object");
}

TEST(ReplyParser, EmptyKernelIsFormatFailure) {
  expect_format_failure(parse_reply("```cuda\n\n```\n```json\n{}\n```\n"), "empty");
}

TEST(ReplyParser, HugeReplyIsRejectedBySizeNotScanned) {
  std::string huge = reply();
  huge.append(kMaxReplyBytes, 'x');
  expect_format_failure(parse_reply(huge), "byte limit");
}

TEST(ReplyParser, OversizedKernelBlockIsFormatFailure) {
  std::string big = "```cuda\n__global__ void k() {}\n";
  big.append(op::kMaxSourceBytes + 10, 'a');
  big += "\n```\n```json\n{}\n```\n";
  expect_format_failure(parse_reply(big), "kernel.cu");
}

TEST(ReplyParser, BinaryGarbageNeverCrashes) {
  std::string junk;
  for (int i = 0; i < 4096; ++i)
    junk.push_back(static_cast<char>((i * 131) % 256));
  junk += "```json\n\xff\xfe\n```\n```cuda\n\x01\n```";
  const ParsedReply p = parse_reply(junk);
  EXPECT_FALSE(p.ok);
  EXPECT_FALSE(p.error.empty());
}

TEST(ReplyParser, FormatGateCarriesReasonAndCounts) {
  const std::string text = "no blocks";
  const ParsedReply p = parse_reply(text);
  const evaluator::GateResult g = format_gate_result(p, text.size());
  EXPECT_EQ(g.name, "format");
  EXPECT_EQ(g.status, evaluator::GateStatus::kFail);
  EXPECT_EQ(g.reason, p.error);
  EXPECT_EQ(g.evidence["code_blocks"], 0);
  EXPECT_EQ(format_gate_result(parse_reply(reply()), 1).status, evaluator::GateStatus::kPass);
}

} // namespace
} // namespace kloop::agent
