// store/text_view.h: clip_text, the one-line clipping of gate reasons and session summaries.
#include <gtest/gtest.h>

#include "store/text_view.h"

namespace kloop::store {
namespace {

TEST(ClipText, ShortTextIsUnchanged) {
  EXPECT_EQ(clip_text("correctness did not pass", 160), "correctness did not pass");
  EXPECT_EQ(clip_text("", 10), "");
  EXPECT_EQ(clip_text("exactly10!", 10), "exactly10!");
}

TEST(ClipText, CutsAtAWordBoundaryAndMarksTheCut) {
  const std::string reason = "GPU worker not built: worker executable /x/kloop-gpu-worker not "
                             "found or not executable; build the 'kloop-gpu-worker' target";
  const std::string clipped = clip_text(reason, 60);
  EXPECT_LE(clipped.size(), 63u);
  EXPECT_EQ(clipped.substr(clipped.size() - 3), "...");
  const std::string kept = clipped.substr(0, clipped.size() - 3);
  EXPECT_EQ(reason.rfind(kept, 0), 0u) << clipped; // a prefix of the reason
  // the cut falls between words: the next character of the reason is a space
  EXPECT_EQ(reason[kept.size()], ' ') << clipped;
  // trailing punctuation before the cut is dropped ("...; build the" not "...;...")
  EXPECT_EQ(clip_text("alpha beta; gamma delta", 12), "alpha beta...");
}

TEST(ClipText, OneLongWordIsCutAtTheLimitNeverInsideAUtf8Sequence) {
  EXPECT_EQ(clip_text("abcdefghijklmnopqrstuvwxyz", 10), "abcdefghij...");
  // "é" is two bytes (C3 A9) at bytes 9-10: a cut at 10 would split it, so it backs up to 9.
  const std::string s = "abcdefghi\xC3\xA9jklmnop";
  EXPECT_EQ(clip_text(s, 10), "abcdefghi...");
}

} // namespace
} // namespace kloop::store

namespace kloop::store {
namespace {

TEST(TerminalText, ControlBytesAreWrittenAsEscapesNotSentToTheTerminal) {
  // An ANSI colour sequence in an NVRTC diagnostic (a candidate's #error text).
  EXPECT_EQ(terminal_text("#error \x1b[31mALL GATES PASS\x1b[0m"),
            "#error \\x1b[31mALL GATES PASS\\x1b[0m");
  EXPECT_EQ(terminal_text(std::string("a\0b\rc\x7f", 6)), "a\\x00b\\x0dc\\x7f");
  // U+009B (CSI as a C1 control, C2 9B in UTF-8) too; other UTF-8 text is unchanged.
  EXPECT_EQ(terminal_text("x\xc2\x9b"
                          "2J y \xc3\xa9 \xe2\x80\xa6"),
            "x\\u009b2J y \xc3\xa9 \xe2\x80\xa6");
  // Newlines and tabs stay: multi-line reasons keep their shape.
  EXPECT_EQ(terminal_text("line 1\n\tline 2"), "line 1\n\tline 2");
}

TEST(TerminalText, ClipTextEscapesBeforeItCuts) {
  EXPECT_EQ(clip_text("\x1b[2J", 20), "\\x1b[2J");
}

} // namespace
} // namespace kloop::store
