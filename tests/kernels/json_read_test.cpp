// read_json (kernels/json_read.h): JSON text from outside kloop read without exceptions, a number
// that overflows a double named by its path; and the manifest parser's use of it (issue 22 item
// 1: `1e999` in a manifest is a failed field, not an out_of_range exception).
#include <gtest/gtest.h>

#include "kernels/json_read.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"

namespace kloop {
namespace {

TEST(JsonReadTest, ReadsWhatJsonParseReads) {
  const auto r =
      read_json(R"({"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": 18446744073709551615})");
  ASSERT_TRUE(r.value) << r.error;
  EXPECT_EQ(*r.value, nlohmann::json::parse(R"({"a": [1, -2, 3.5, "x", null, true, {"b": {}}],
                                               "c": 18446744073709551615})"));
  EXPECT_TRUE(r.top_level_object);
  EXPECT_FALSE(r.number_overflow);
}

TEST(JsonReadTest, NamesThePathOfANumberThatOverflowsADouble) {
  for (const auto& [text, path] :
       {std::pair<const char*, const char*>{R"({"launch": {"block_threads": 1e999}})",
                                            "launch.block_threads"},
        {R"({"a": [0, {"b": [7, -1e400]}]})", "a[1].b[1]"},
        {"1e999", ""}}) {
    const auto r = read_json(text);
    EXPECT_FALSE(r.value) << text;
    EXPECT_TRUE(r.number_overflow) << text;
    EXPECT_EQ(r.path, path) << text;
    EXPECT_NE(r.error.find("number overflow"), std::string::npos) << r.error;
  }
}

TEST(JsonReadTest, SyntaxErrorsAreValues) {
  for (const char* text : {"", "{", R"({"a": })", "[1,]", "{\"a\": \"\xff\"}", "{} x"}) {
    const auto r = read_json(text);
    EXPECT_FALSE(r.value) << text;
    EXPECT_FALSE(r.number_overflow) << text;
    EXPECT_FALSE(r.error.empty()) << text;
  }
}

TEST(JsonReadTest, NamesTheFirstKeyGivenTwiceInOneObject) {
  for (const auto& [text, path] :
       {std::pair<const char*, const char*>{R"({"a": 1, "a": 2})", "a"},
        {R"({"launch": {"grid": "per_rows", "block_threads": 256, "grid": "persistent"}})",
         "launch.grid"},
        {R"({"v": [{"k": 1}, {"k": 2, "k": 3}], "v2": {"x": 0, "x": 1}})", "v[1].k"}}) {
    const auto r = read_json(text);
    ASSERT_TRUE(r.value) << text << ": " << r.error;
    EXPECT_EQ(r.duplicate_key, path) << text;
  }
  // The same key in different objects is no duplicate.
  const auto r = read_json(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]})");
  ASSERT_TRUE(r.value);
  EXPECT_EQ(r.duplicate_key, "");
}

TEST(JsonReadTest, ManifestWithAKeyGivenTwiceIsAFieldError) {
  const auto parsed = op::parse_manifest(
      rmsnorm::declaration(),
      R"({"contract":"weighted_rmsnorm/1","launch":{"block_threads":256,"block_threads":512}})");
  EXPECT_FALSE(parsed.manifest);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].field, "launch.block_threads");
  EXPECT_NE(parsed.errors[0].message.find("given twice"), std::string::npos)
      << parsed.errors[0].message;
}

TEST(JsonReadTest, ManifestNumberOverflowIsAFieldError) {
  const auto parsed =
      op::parse_manifest(rmsnorm::declaration(),
                         R"({"contract":"weighted_rmsnorm/1","launch":{"block_threads":1e999}})");
  EXPECT_FALSE(parsed.manifest);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].field, "launch.block_threads");
  EXPECT_NE(parsed.errors[0].message.find("outside the range of a double"), std::string::npos);
}

} // namespace
} // namespace kloop
