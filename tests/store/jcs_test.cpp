// RFC 8785 canonicalisation against the RFC's own examples.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>

#include "store/error.h"
#include "store/jcs.h"

namespace kloop::store {
namespace {

double from_bits(std::uint64_t b) {
  return std::bit_cast<double>(b);
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
TEST(JcsTest, NumbersMatchRfc8785AppendixB) {
  const std::pair<std::uint64_t, const char*> cases[] = {
      {0x0000000000000000, "0"},
      {0x8000000000000000, "0"},
      {0x0000000000000001, "5e-324"},
      {0x8000000000000001, "-5e-324"},
      {0x7fefffffffffffff, "1.7976931348623157e+308"},
      {0xffefffffffffffff, "-1.7976931348623157e+308"},
      {0x4340000000000000, "9007199254740992"},
      {0xc340000000000000, "-9007199254740992"},
      {0x4430000000000000, "295147905179352830000"},
      {0x44b52d02c7e14af5, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6, "1e+23"},
      {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4e, "999999999999999700000"},
      {0x444b1ae4d6e2ef4f, "999999999999999900000"},
      {0x444b1ae4d6e2ef50, "1e+21"},
      {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8d, "0.000001"},
      {0x41b3de4355555553, "333333333.3333332"},
      {0x41b3de4355555554, "333333333.33333325"},
      {0x41b3de4355555555, "333333333.3333333"},
      {0x41b3de4355555556, "333333333.3333334"},
      {0x41b3de4355555557, "333333333.33333343"},
      {0xbecbf647612f3696, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959, "1424953923781206.2"},
  };
  for (const auto& [bits, text] : cases)
    EXPECT_EQ(jcs_number(from_bits(bits)), text) << std::hex << bits;
}

TEST(JcsTest, NanAndInfinityAreRejected) {
  EXPECT_THROW(jcs_number(from_bits(0x7fffffffffffffff)), StoreError);
  EXPECT_THROW(jcs_number(from_bits(0x7ff0000000000000)), StoreError);
}

// RFC 8785 section 3.2.2 example.
TEST(JcsTest, SerialisesRfc8785MainExample) {
  const auto j = nlohmann::json::parse(R"({
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  })");
  EXPECT_EQ(jcs_canonicalize(j),
            "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,"
            "1e-27],\"string\":\"\xE2\x82\xAC$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}

// RFC 8785 section 3.2.3: members sorted by UTF-16 code units (the emoji's surrogate pair sorts
// before U+FB33, unlike a UTF-8 byte sort).
TEST(JcsTest, SortsKeysByUtf16CodeUnits) {
  const auto j = nlohmann::json::parse(R"({
    "\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis"})");
  const std::string out = jcs_canonicalize(j);
  const char* order[] = {
      "\\r", "\"1\"", "\xC2\x80", "\xC3\xB6", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xEF\xAC\xB3"};
  std::size_t pos = 0;
  for (const char* k : order) {
    const auto at = out.find(k);
    ASSERT_NE(at, std::string::npos) << k;
    EXPECT_GT(at, pos) << k;
    pos = at;
  }
}

TEST(JcsTest, IntegersBeyondTwoToThe53AreRejected) {
  EXPECT_EQ(jcs_canonicalize(nlohmann::json(9007199254740992LL)), "9007199254740992");
  EXPECT_THROW(jcs_canonicalize(nlohmann::json(9007199254740993LL)), StoreError);
  EXPECT_EQ(jcs_canonicalize(nlohmann::json(-42)), "-42");
}

} // namespace
} // namespace kloop::store
