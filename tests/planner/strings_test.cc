// pacer/strings.h: the one splitter and trimmer the CSV, --gpus, scrape and
// CUDA_VISIBLE_DEVICES readers share.
#include "pacer/strings.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace pacer {
namespace {

using Pieces = std::vector<std::string_view>;

TEST(StringsTest, SplitKeepsEveryPieceAsWritten) {
  EXPECT_EQ(SplitOn("a,b", ','), (Pieces{"a", "b"}));
  EXPECT_EQ(SplitOn("a,,b", ','), (Pieces{"a", "", "b"}));
  EXPECT_EQ(SplitOn("", ','), (Pieces{""}));
  EXPECT_EQ(SplitOn("a,", ','), (Pieces{"a", ""}));
  EXPECT_EQ(SplitOn(",a", ','), (Pieces{"", "a"}));
  EXPECT_EQ(SplitOn(" a , b ", ','), (Pieces{" a ", " b "}));
  EXPECT_EQ(SplitOn("a;b,c", ';'), (Pieces{"a", "b,c"}));
}

TEST(StringsTest, TrimDropsBlanksAndTheCarriageReturnOfACrlfLine) {
  EXPECT_EQ(TrimBlanks(" \t a b \t\r"), "a b");
  EXPECT_EQ(TrimBlanks("\ra"), "\ra");  // a CR ends a line; it does not start one
  EXPECT_EQ(TrimBlanks(" \t\r"), "");
  EXPECT_EQ(TrimBlanks(""), "");
  EXPECT_EQ(TrimBlanks("x"), "x");
}

}  // namespace
}  // namespace pacer
