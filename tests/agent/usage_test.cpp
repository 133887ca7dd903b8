// The loop's accounting of provider usage (issue 22 item 4): read_usage's shape of "usage that
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
  const json usage{{"prompt_tokens", 300}, {"completion_tokens", 100}};
  const auto u = read_usage(&usage, "prompt_tokens", "completion_tokens");
  EXPECT_TRUE(u.known());
  EXPECT_EQ(u.input_tokens, 300);
  EXPECT_EQ(u.output_tokens, 100);
  const json empty = json::object();
  const auto absent = read_usage(&empty, "a", "b");
  EXPECT_EQ(absent.status, UsageStatus::kAbsent) << "not reported: unknown, not 0";
  EXPECT_EQ(read_usage(nullptr, "a", "b").status, UsageStatus::kAbsent) << "no usage object";
}

TEST(UsageTest, CountsThatMakeNoSenseAreInvalidNeverZero) {
  for (const json& bad : {json(1e30), json(-5), json(2.5), json("100"),
                          json(std::uint64_t{1} << 40), json::array()}) {
    const json usage{{"prompt_tokens", bad}, {"completion_tokens", 1}};
    const auto u = read_usage(&usage, "prompt_tokens", "completion_tokens");
    EXPECT_EQ(u.status, UsageStatus::kInvalid) << bad.dump();
    EXPECT_NE(u.problem.find("usage.prompt_tokens"), std::string::npos) << u.problem;
    EXPECT_FALSE(u.known());
  }
}

TEST(UsageTest, OpenAiReplyWithAbsurdUsageIsNamedInvalid) {
  const auto r = openai_parse_reply(
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1e30,"completion_tokens":1}})");
  EXPECT_EQ(r.usage.status, UsageStatus::kInvalid);
  EXPECT_NE(r.usage.problem.find("prompt_tokens"), std::string::npos) << r.usage.problem;
}

TEST(UsageTest, BudgetStopsWhenTheSpendCannotBeCounted) {
  const auto usage = [](std::int64_t in, std::int64_t out, const std::string& problem) {
    TokenUsage u;
    u.input_tokens = in;
    u.output_tokens = out;
    if (!problem.empty()) {
      u.status = UsageStatus::kInvalid;
      u.problem = problem;
    }
    return u;
  };
  Budget limited(1000, std::nullopt);
  limited.charge(usage(400, 100, ""), {});
  EXPECT_FALSE(limited.exhausted());
  limited.charge(usage(0, 0, "usage.prompt_tokens is -5"), {});
  EXPECT_EQ(limited.tokens_used(), 500) << "nothing added, nothing taken away";
  ASSERT_TRUE(limited.exhausted());
  EXPECT_NE(limited.exhausted()->find("cannot be checked"), std::string::npos);
  Budget unlimited(std::nullopt, std::nullopt);
  unlimited.charge(usage(0, 0, "usage.prompt_tokens is -5"), {});
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
  EXPECT_NE(used.status, UsageStatus::kInvalid);
  {
    auto step = st.begin_step();
    store::IterationRecord it{.session_id = id, .index = 2, .wall_ms = 1};
    it.notes = {{"usage_invalid", "usage.prompt_tokens is 1e+30"}};
    step.add_iteration(it);
    step.commit();
  }
  used = recorded_usage(st.load_session(id));
  EXPECT_EQ(used.status, UsageStatus::kInvalid);
  EXPECT_EQ(used.problem, "iteration 3: usage.prompt_tokens is 1e+30");
}

TEST(UsageTest, ReplyWhoseManifestOverflowsADoubleGoesToTheContractGate) {
  const auto p = parse_reply("```cuda\n__global__ void k() {}\n```\n```json\n{\"launch\": "
                             "{\"block_threads\": 1e999}}\n```\n");
  EXPECT_TRUE(p.ok) << p.error;
  const auto not_object =
      parse_reply("```cuda\n__global__ void k() {}\n```\n```json\n[1e999]\n```\n");
  EXPECT_FALSE(not_object.ok);
  EXPECT_NE(not_object.error.find("not a JSON object"), std::string::npos) << not_object.error;
}

} // namespace
} // namespace kloop::agent
