// The loop's accounting of provider usage (issue 22 item 4): usage_from_json's shape of "usage that
// makes no sense", Budget's stop when the spend can no longer be counted, recorded_usage over a
// stored session, and the reply parser's treatment of a manifest number that overflows a double.
#include <gtest/gtest.h>

#include "agent/loop_record.h"
#include "agent/openai_provider.h"
#include "agent/provider.h"
#include "agent/reply_parser.h"
#include "tests/store/fixture.h"

namespace kloop::agent {
namespace {

using nlohmann::json;

TEST(UsageTest, SaneCountsAreRead) {
  const auto u = usage_from_json(json{{"prompt_tokens", 300}, {"completion_tokens", 100}},
                                 "prompt_tokens", "completion_tokens");
  EXPECT_TRUE(u.invalid.empty());
  EXPECT_EQ(u.input_tokens, 300);
  EXPECT_EQ(u.output_tokens, 100);
  EXPECT_EQ(usage_from_json(json::object(), "a", "b").total(), 0) << "not reported: 0";
  EXPECT_TRUE(usage_from_json(json("x"), "a", "b").invalid.empty()) << "no usage object";
}

TEST(UsageTest, CountsThatMakeNoSenseAreInvalidNeverZero) {
  for (const json& bad : {json(1e30), json(-5), json(2.5), json("100"), json(nullptr),
                          json(std::uint64_t{1} << 40), json::array()}) {
    const auto u = usage_from_json(json{{"prompt_tokens", bad}, {"completion_tokens", 1}},
                                   "prompt_tokens", "completion_tokens");
    EXPECT_NE(u.invalid.find("usage.prompt_tokens is " + bad.dump()), std::string::npos)
        << u.invalid;
    EXPECT_EQ(u.total(), 0);
  }
}

TEST(UsageTest, OpenAiReplyWithAbsurdUsageIsABadResponse) {
  const auto r = openai_parse_reply(
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1e30}})");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("makes no sense"), std::string::npos) << r.error;
  EXPECT_FALSE(r.usage.invalid.empty());
}

TEST(UsageTest, BudgetStopsWhenTheSpendCannotBeCounted) {
  Budget limited(1000, std::nullopt);
  limited.charge({400, 100, ""}, {});
  EXPECT_FALSE(limited.exhausted());
  limited.charge({0, 0, "usage.prompt_tokens is -5"}, {});
  EXPECT_EQ(limited.tokens_used(), 500) << "nothing added, nothing taken away";
  ASSERT_TRUE(limited.exhausted());
  EXPECT_NE(limited.exhausted()->find("cannot be checked"), std::string::npos);
  Budget unlimited(std::nullopt, std::nullopt);
  unlimited.charge({0, 0, "usage.prompt_tokens is -5"}, {});
  EXPECT_FALSE(unlimited.exhausted()) << "no limit: nothing to stop for";
  EXPECT_FALSE(unlimited.unknown_usage().empty());
}

TEST(UsageTest, RecordedUsageSumsAStoredSessionAndNamesUnknownUsage) {
  store::testing::TempDir t;
  auto st = store::Store::open(t.path() + "/s");
  const auto id = store::testing::write_fake_session(st, 2); // 100 + 50 tokens per iteration
  auto used = recorded_usage(st.load_session(id));
  EXPECT_EQ(used.input_tokens, 200);
  EXPECT_EQ(used.output_tokens, 100);
  EXPECT_TRUE(used.invalid.empty());
  {
    auto step = st.begin_step();
    store::IterationRecord it{.session_id = id, .index = 2, .wall_ms = 1};
    it.notes = {{"usage_invalid", "usage.prompt_tokens is 1e+30"}};
    step.add_iteration(it);
    step.commit();
  }
  used = recorded_usage(st.load_session(id));
  EXPECT_EQ(used.invalid, "iteration 3: usage.prompt_tokens is 1e+30");
}

TEST(UsageTest, ReplyWhoseManifestOverflowsADoubleGoesToTheContractGate) {
  const auto p = parse_reply("```cuda\n__global__ void k() {}\n```\n```json\n{\"launch\": "
                             "{\"block_threads\": 1e999}}\n```\n");
  EXPECT_TRUE(p.ok) << p.error;
  const auto not_object = parse_reply("```cuda\nx\n```\n```json\n[1e999]\n```\n");
  EXPECT_FALSE(not_object.ok);
  EXPECT_NE(not_object.error.find("not a JSON object"), std::string::npos) << not_object.error;
}

} // namespace
} // namespace kloop::agent
