// FiniteRange (cli/finite_range.h): CLI11's Range lets NaN through; this
// check must not, and must otherwise judge as Range does.
#include "cli/finite_range.h"

#include <gtest/gtest.h>

#include <string>

namespace pacer::cli {
namespace {

std::string Check(const CLI::Validator& validator, std::string input) { return validator(input); }

TEST(FiniteRangeTest, RefusesWhatIsNotAFiniteNumberAndJudgesTheRestAsRange) {
  const CLI::Validator finite = FiniteRange(0.0, 10.0);
  const CLI::Range range(0.0, 10.0);
  for (const char* input : {"nan", "NaN", "-nan", "inf", "-inf", "infinity"}) {
    EXPECT_EQ(Check(range, input).empty(), std::string(input).find("inf") == std::string::npos)
        << input << ": CLI::Range's own verdict (it lets NaN through)";
    EXPECT_EQ(Check(finite, input), "Value " + std::string(input) + " is not a finite number (" +
                                        range.get_description() + ")")
        << input;
  }
  for (const char* input : {"0", "2.5", "10", "1e1", "-0.1", "10.01", "abc", ""}) {
    EXPECT_EQ(Check(finite, input), Check(range, input)) << input;
  }
  EXPECT_TRUE(Check(finite, "2.5").empty());
  EXPECT_FALSE(Check(finite, "10.01").empty());
  EXPECT_EQ(finite.get_description(), range.get_description());
}

}  // namespace
}  // namespace pacer::cli
