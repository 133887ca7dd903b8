// Unit tests of the offline provider: replies carry one cuda and one json block of a family
// variant, the previous report is found in the feedback text, and replies are deterministic.
#include <gtest/gtest.h>

#include "agent/offline_provider.h"

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
  OfflineProvider p(3);
  const ProviderResponse r = p.complete(request(0, "contract"));
  ASSERT_TRUE(r.ok());
  const auto c = rmsnorm::generate(rmsnorm::all_variants().front());
  EXPECT_NE(r.text.find("```cuda\n" + c.kernel_cu + "```"), std::string::npos);
  EXPECT_NE(r.text.find("```json\n" + c.manifest_json + "```"), std::string::npos);
  EXPECT_EQ(r.exchange.provider, "offline");
}

TEST(OfflineProvider, ReadsTheReportFromTheFeedbackText) {
  OfflineProvider p(3);
  p.complete(request(0, "contract"));
  const std::string feedback =
      "Previous candidate report:\n{\"verdict\": \"pending_device_validation\", \"gates\": "
      "[{\"name\": \"build\", \"status\": \"pass\", \"reason\": \"\", \"evidence\": {}}], "
      "\"artifacts\": {}}\nImprove it.";
  const ProviderResponse r = p.complete(request(1, feedback));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(p.policy().history().back(), rmsnorm::flagship_variant());
  EXPECT_NE(r.text.find(rmsnorm::variant_name(rmsnorm::flagship_variant())), std::string::npos);
}

TEST(OfflineProvider, FindReportJsonIgnoresTextWithoutGates) {
  EXPECT_FALSE(find_report_json("no json {here} {\"a\": 1} {unbalanced"));
  auto r = find_report_json("x {\"gates\": [], \"verdict\": \"reject\"} y");
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["verdict"], "reject");
}

TEST(OfflineProvider, SameSeedGivesTheSameReplies) {
  OfflineProvider a(9), b(9);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(a.complete(request(i, "{\"gates\": []}")).text,
              b.complete(request(i, "{\"gates\": []}")).text);
}

// `--candidates-per-iteration 3`: three distinct variants per call, each reply naming its own;
// the next batch starts from the observed reports of the previous one.
TEST(OfflineProvider, ABatchOfRequestsGetsDistinctVariants) {
  OfflineProvider p(3);
  std::vector<ProviderRequest> batch(3, request(0, "contract"));
  for (int k = 0; k < 3; ++k) {
    batch[k].candidate = k;
    batch[k].candidates = 3;
  }
  const auto replies = p.complete_batch(batch);
  ASSERT_EQ(replies.size(), 3u);
  ASSERT_EQ(p.policy().history().size(), 3u);
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(replies[k].ok());
    EXPECT_NE(replies[k].text.find(rmsnorm::variant_name(p.policy().history()[k])),
              std::string::npos);
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
  ASSERT_EQ(p.policy().history().size(), 6u);
  EXPECT_TRUE(nlohmann::json::parse(next[0].exchange.request_body)["report_seen"]);
}

} // namespace
} // namespace kloop::agent
