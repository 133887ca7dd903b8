// Unit tests of the offline provider: replies carry one cuda and one json block of a family
// variant, the previous report is found in the feedback text, and replies are deterministic; it
// serves each operator's own family (weighted_rmsnorm/1 and row_softmax/1).
#include <gtest/gtest.h>

#include "agent/http_provider.h"
#include "agent/offline_provider.h"
#include "kernels/rmsnorm/family.h"
#include "kernels/rmsnorm/family_policy.h"
#include "kernels/rmsnorm/operator.h"
#include "kernels/softmax/family.h"
#include "kernels/softmax/operator.h"

namespace kloop::agent {
namespace {

ProviderRequest request(int iteration, std::string user) {
  ProviderRequest r;
  r.system = "system";
  r.messages = {{"user", std::move(user)}};
  r.iteration = iteration;
  return r;
}

TEST(OfflineProvider, FirstReplyIsTheSafeDefaultAsCudaAndJsonBlocks) {
  OfflineProvider p(rmsnorm::operator_instance(), 3);
  const ProviderResponse r = p.complete(request(0, "contract"));
  ASSERT_TRUE(r.ok());
  const auto c = rmsnorm::generate(rmsnorm::all_variants().front());
  EXPECT_NE(r.text.find("```cuda\n" + c.kernel_cu + "```"), std::string::npos);
  EXPECT_NE(r.text.find("```json\n" + c.manifest_json + "```"), std::string::npos);
  EXPECT_EQ(r.exchange.provider, "offline");
}

TEST(OfflineProvider, ReadsTheReportFromTheFeedbackText) {
  OfflineProvider p(rmsnorm::operator_instance(), 3);
  p.complete(request(0, "contract"));
  const std::string feedback =
      "Previous candidate report:\n{\"verdict\": \"pending_device_validation\", \"gates\": "
      "[{\"name\": \"build\", \"status\": \"pass\", \"reason\": \"\", \"evidence\": {}}], "
      "\"artifacts\": {}}\nImprove it.";
  const ProviderResponse r = p.complete(request(1, feedback));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(p.history().back(), rmsnorm::variant_name(rmsnorm::flagship_variant()));
  EXPECT_NE(r.text.find(rmsnorm::variant_name(rmsnorm::flagship_variant())), std::string::npos);
}

TEST(OfflineProvider, FindReportJsonIgnoresTextWithoutGates) {
  EXPECT_FALSE(find_report_json("no json {here} {\"a\": 1} {unbalanced"));
  auto r = find_report_json("x {\"gates\": [], \"verdict\": \"reject\"} y");
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["verdict"], "reject");
}

TEST(OfflineProvider, SameSeedGivesTheSameReplies) {
  OfflineProvider a(rmsnorm::operator_instance(), 9), b(rmsnorm::operator_instance(), 9);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(a.complete(request(i, "{\"gates\": []}")).text,
              b.complete(request(i, "{\"gates\": []}")).text);
}

// `--candidates-per-iteration 3`: three distinct variants per call, each reply naming its own;
// the next batch starts from the observed reports of the previous one.
TEST(OfflineProvider, ABatchOfRequestsGetsDistinctVariants) {
  OfflineProvider p(rmsnorm::operator_instance(), 3);
  std::vector<ProviderRequest> batch(3, request(0, "contract"));
  for (int k = 0; k < 3; ++k) {
    batch[k].candidate = k;
    batch[k].candidates = 3;
  }
  const auto replies = p.complete_batch(batch);
  ASSERT_EQ(replies.size(), 3u);
  ASSERT_EQ(p.history().size(), 3u);
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(replies[k].ok());
    EXPECT_NE(replies[k].text.find(p.history()[k]), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(replies[k].exchange.request_body)["candidate"], k);
  }
  EXPECT_NE(replies[0].text, replies[1].text);
  const nlohmann::json pending = {{"verdict", "pending_device_validation"},
                                  {"gates", nlohmann::json::array()}};
  for (int k = 0; k < 3; ++k)
    p.observe_public_report(pending);
  for (auto& r : batch)
    r.iteration = 1;
  const auto next = p.complete_batch(batch);
  ASSERT_EQ(p.history().size(), 6u);
  EXPECT_TRUE(nlohmann::json::parse(next[0].exchange.request_body)["report_seen"]);
}

// row_softmax/1: the softmax family's safe default first, its flagship (the in-tree baseline's
// member) after a pass, and batches of distinct members.
TEST(OfflineProvider, ServesTheSoftmaxFamilyForSoftmax) {
  OfflineProvider p(softmax::operator_instance(), 3);
  const ProviderResponse first = p.complete(request(0, "contract"));
  ASSERT_TRUE(first.ok());
  const auto c = softmax::generate(softmax::all_variants().front());
  EXPECT_NE(first.text.find("```cuda\n" + c.kernel_cu + "```"), std::string::npos);
  EXPECT_NE(first.text.find("```json\n" + c.manifest_json + "```"), std::string::npos);
  EXPECT_NE(first.text.find("row_softmax/1"), std::string::npos);
  p.observe_public_report(
      {{"verdict", "pending_device_validation"}, {"gates", nlohmann::json::array()}});
  p.complete(request(1, "feedback"));
  EXPECT_EQ(p.history().back(), softmax::variant_name(softmax::flagship_variant()));
  OfflineProvider q(softmax::operator_instance(), 3);
  std::vector<ProviderRequest> batch(3, request(0, "contract"));
  for (int k = 0; k < 3; ++k) {
    batch[k].candidate = k;
    batch[k].candidates = 3;
  }
  const auto replies = q.complete_batch(batch);
  ASSERT_EQ(q.history().size(), 3u);
  EXPECT_EQ(q.history()[0], softmax::variant_name(softmax::all_variants().front()));
  EXPECT_EQ(q.history()[1], softmax::variant_name(softmax::flagship_variant()));
  EXPECT_NE(q.history()[1], q.history()[2]);
}

// An operator without an offline family is a configuration error naming it (a stand-in operator
// that keeps the base class's offline_generator).
TEST(OfflineProvider, AnOperatorWithoutAFamilyIsAConfigurationError) {
  struct NoFamily : op::Operator {
    const op::Operator& base = softmax::operator_instance();
    const op::Declaration& declaration() const override { return base.declaration(); }
    std::string_view cli_name() const override { return "nofamily"; }
    std::string_view summary() const override { return ""; }
    const nlohmann::json& contract() const override { return base.contract(); }
    std::vector<op::BenchShape> benchmark_shapes() const override { return {}; }
    std::vector<op::ScalarArg> benchmark_scalars() const override { return {}; }
    op::Validated validate(const op::CallArgs& c) const override { return base.validate(c); }
    std::vector<HostTensor> reference(const op::CallArgs& c,
                                      const op::Validated& v) const override {
      return base.reference(c, v);
    }
    op::Tolerance tolerance(DType d, int t) const override { return base.tolerance(d, t); }
    std::vector<std::string> suite_names() const override { return {}; }
    std::vector<nlohmann::json> suite(std::string_view, std::uint64_t) const override { return {}; }
    op::CallArgs materialize(const nlohmann::json& s) const override { return base.materialize(s); }
    std::int64_t case_elements(const nlohmann::json& s) const override {
      return base.case_elements(s);
    }
    std::string_view holdout_version() const override { return ""; }
    std::vector<nlohmann::json> holdout_suite(std::uint64_t, int, std::int64_t) const override {
      return {};
    }
    std::vector<nlohmann::json> search_pool(std::uint64_t, int, int, std::int64_t) const override {
      return {};
    }
    op::PromptText prompt_text() const override { return base.prompt_text(); }
    op::CaseDescription describe_case(const nlohmann::json& s) const override {
      return base.describe_case(s);
    }
  };
  const NoFamily op;
  try {
    OfflineProvider p(op, 1);
    FAIL() << "an operator without a family was served";
  } catch (const ProviderConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("nofamily"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace kloop::agent
