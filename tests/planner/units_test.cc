#include "pacer/planner/units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pacer::planner {
namespace {

using ::testing::HasSubstr;

TEST(ParseCountTest, Suffixes) {
  EXPECT_DOUBLE_EQ(*ParseCount("6.7B"), 6.7e9);
  EXPECT_DOUBLE_EQ(*ParseCount("350M"), 350e6);
  EXPECT_DOUBLE_EQ(*ParseCount("1.5T"), 1.5e12);
  EXPECT_DOUBLE_EQ(*ParseCount("2k"), 2000);
  EXPECT_DOUBLE_EQ(*ParseCount("3G"), 3e9);
  EXPECT_DOUBLE_EQ(*ParseCount("1t"), 1e12);
}

TEST(ParseCountTest, PlainNumbers) {
  EXPECT_DOUBLE_EQ(*ParseCount("6.7e9"), 6.7e9);
  EXPECT_DOUBLE_EQ(*ParseCount("2e12"), 2e12);
  EXPECT_DOUBLE_EQ(*ParseCount("1024"), 1024);
  EXPECT_DOUBLE_EQ(*ParseCount(" 42 "), 42);
  EXPECT_DOUBLE_EQ(*ParseCount("+5"), 5);
  EXPECT_DOUBLE_EQ(*ParseCount("0"), 0);
}

TEST(ParseCountTest, RejectsGarbage) {
  for (const char* bad : {"", "abc", "B", "6.7X", "nan", "inf", "-inf", "0x10", "1e", "1.2.3",
                          "6.7 B B", "1e999", ".inf"}) {
    StatusOr<double> r = ParseCount(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ParseCount("abc").status().message(), HasSubstr("got \"abc\""));
}

TEST(ParseCountTest, RejectsNegativeAndOverflow) {
  EXPECT_THAT(ParseCount("-4").status().message(), HasSubstr("negative"));
  EXPECT_FALSE(ParseCount("1e308T").ok());
}

TEST(ParseDurationTest, GoStyle) {
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("72h"), 259200);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("90s"), 90);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("500ms"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("14d"), 14 * 86400);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1.5h"), 5400);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1d2h3m4s5ms"), 86400 + 7200 + 180 + 4 + 0.005);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("3600"), 3600);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("0s"), 0);
}

TEST(ParseDurationTest, RejectsGarbage) {
  for (const char* bad : {"", "abc", "h", "1x", "1h30", "1hh", "1 h", "nan", "inf", "1e999h",
                          "1.2.3s", "--1s", "5y"}) {
    StatusOr<double> r = ParseDurationSeconds(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseDurationSeconds("abc").status().message(),
            "expected a duration such as 72h or 1h30m, got \"abc\"");
  EXPECT_THAT(ParseDurationSeconds("-5s").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseDurationSeconds("-5").status().message(), HasSubstr("negative"));
}

TEST(ParseFractionTest, PercentAndFraction) {
  EXPECT_DOUBLE_EQ(*ParseFraction("5%"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseFraction("0.05"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseFraction("12.5 %"), 0.125);
  EXPECT_DOUBLE_EQ(*ParseFraction("0"), 0);
  EXPECT_FALSE(ParseFraction("-5%").ok());
  EXPECT_FALSE(ParseFraction("five").ok());
  EXPECT_FALSE(ParseFraction("%").ok());
  EXPECT_FALSE(ParseFraction("nan").ok());
}

TEST(Rfc3339Test, UtcAndOffsets) {
  EXPECT_EQ(*ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseRfc3339("2026-12-24T00:00:00Z"), 1798070400);
  // 09:00 at +02:00 is 07:00 UTC.
  EXPECT_EQ(*ParseRfc3339("2026-12-24T09:00:00+02:00"), 1798070400 + 7 * 3600);
  EXPECT_EQ(*ParseRfc3339("2026-12-23T19:30:00-04:30"), 1798070400);
  EXPECT_EQ(*ParseRfc3339("2026-12-24t00:00:00z"), 1798070400);
  EXPECT_EQ(*ParseRfc3339("2026-12-24 00:00:00Z"), 1798070400);
}

TEST(Rfc3339Test, FractionalSecondsAreTruncated) {
  EXPECT_EQ(*ParseRfc3339("2026-12-24T00:00:00.999Z"), 1798070400);
  EXPECT_EQ(*ParseRfc3339("2026-12-24T00:00:01.123456789+00:00"), 1798070401);
}

TEST(Rfc3339Test, LeapYearsAndPreEpoch) {
  EXPECT_EQ(*ParseRfc3339("2024-02-29T00:00:00Z"), 1709164800);
  EXPECT_EQ(*ParseRfc3339("2000-02-29T12:00:00Z"), 951825600);
  EXPECT_EQ(*ParseRfc3339("1969-12-31T23:59:59Z"), -1);
  EXPECT_FALSE(ParseRfc3339("2023-02-29T00:00:00Z").ok());
  EXPECT_FALSE(ParseRfc3339("1900-02-29T00:00:00Z").ok());
}

TEST(Rfc3339Test, RejectsMalformed) {
  for (const char* bad :
       {"", "tomorrow", "2026-12-24", "2026-12-24T00:00:00", "2026-13-01T00:00:00Z",
        "2026-12-32T00:00:00Z", "2026-12-24T24:00:00Z", "2026-12-24T00:60:00Z",
        "2026-12-24T00:00:00.Z", "2026-12-24T00:00:00+2:00", "2026-12-24T00:00:00+0200",
        "2026-12-24T00:00:00Zjunk", "26-12-24T00:00:00Z", "2026-1-24T00:00:00Z",
        "2026-12-24T00:00:00+24:00"}) {
    StatusOr<int64_t> r = ParseRfc3339(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ParseRfc3339("2026-12-24T00:00:00").status().message(), HasSubstr("time zone"));
}

TEST(Rfc3339Test, FormatRoundTrips) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1798070400), "2026-12-24T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59Z");
  // Four-digit years only: a completion a million years out (what
  // CompletionUnixSeconds clamps to) was written "1002026-...", which no
  // RFC 3339 parser, the API server's included, accepts.
  EXPECT_EQ(FormatRfc3339(253402300799), "9999-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(CompletionUnixSeconds(1798070400, 1e30)), "9999-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(INT64_MAX), "9999-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(-62167219200), "0000-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(INT64_MIN), "0000-01-01T00:00:00Z");
  EXPECT_TRUE(ParseRfc3339(FormatRfc3339(INT64_MAX)).ok());
  for (int64_t t : {int64_t{0}, int64_t{951825600}, int64_t{1709164800}, int64_t{4102444799},
                    int64_t{-86401}, int64_t{1798070400 + 12345}}) {
    EXPECT_EQ(*ParseRfc3339(FormatRfc3339(t)), t) << t;
  }
}

TEST(FormatDurationHumanTest, Examples) {
  EXPECT_EQ(FormatDurationHuman(259200), "3d0h");
  EXPECT_EQ(FormatDurationHuman(5400), "1h30m");
  EXPECT_EQ(FormatDurationHuman(42), "42s");
  EXPECT_EQ(FormatDurationHuman(0), "0s");
  EXPECT_EQ(FormatDurationHuman(0.25), "250ms");
  EXPECT_EQ(FormatDurationHuman(90), "1m30s");
  EXPECT_EQ(FormatDurationHuman(86400 * 3 - 1), "3d0h");  // rounds, never "2d24h"
  EXPECT_EQ(FormatDurationHuman(-5400), "-1h30m");
  EXPECT_EQ(FormatDurationHuman(std::numeric_limits<double>::infinity()), "forever");
  EXPECT_EQ(FormatDurationHuman(std::nan("")), "unknown");
  EXPECT_EQ(FormatDurationHuman(1e30).empty(), false);
}

TEST(CompletionTest, RoundsUpToWholeSeconds) {
  EXPECT_EQ(CompletionUnixSeconds(100, 0.2), 101);
  EXPECT_EQ(CompletionUnixSeconds(100, 5.0), 105);
}

// A near-zero bandwidth in an inventory makes a plan take "forever": the
// completion saturates at a million years instead of converting an
// infinite or NaN number of seconds to int64 (undefined behaviour).
TEST(CompletionTest, SaturatesAtAMillionYears) {
  const int64_t million_years = static_cast<int64_t>(1e6 * 365.25 * 86400);
  EXPECT_EQ(CompletionUnixSeconds(100, std::numeric_limits<double>::infinity()),
            100 + million_years);
  EXPECT_EQ(CompletionUnixSeconds(100, std::nan("")), 100 + million_years);
  EXPECT_EQ(CompletionUnixSeconds(100, 1e300), 100 + million_years);
  EXPECT_EQ(CompletionUnixSeconds(100, -5.0), 100);
}

// Times computed as doubles (a projection from a broken metric's 1e300 s
// step, a scheduler's finish) round to whole seconds within a million years
// either side; cast unclamped, 1e300 became INT64_MIN, a date in year 0.
TEST(CompletionTest, DoubleTimesRoundAndSaturate) {
  const int64_t million_years = static_cast<int64_t>(1e6 * 365.25 * 86400);
  EXPECT_EQ(CeilUnixSeconds(100.2), 101);
  EXPECT_EQ(FloorUnixSeconds(100.8), 100);
  EXPECT_EQ(CeilUnixSeconds(-100.8), -100);
  EXPECT_EQ(FloorUnixSeconds(-100.2), -101);
  EXPECT_EQ(CeilUnixSeconds(1e300), million_years);
  EXPECT_EQ(FloorUnixSeconds(std::numeric_limits<double>::infinity()), million_years);
  EXPECT_EQ(CeilUnixSeconds(std::nan("")), million_years);
  EXPECT_EQ(FloorUnixSeconds(-1e300), -million_years);
  EXPECT_EQ(FormatRfc3339(CeilUnixSeconds(1e300)), "9999-12-31T23:59:59Z");
}

// Counts read from metrics: whole, non-negative, exact in a double; anything
// else is no count rather than a conversion that is undefined (1e30) or a
// number that passes for progress (5e18, -5).
TEST(CountFromSampleTest, OnlyFiniteNonNegativeExactValuesAreCounts) {
  EXPECT_EQ(CountFromSample(0.0), 0);
  EXPECT_EQ(CountFromSample(41.9), 41);
  EXPECT_EQ(CountFromSample(9007199254740992.0), int64_t{9007199254740992});
  EXPECT_FALSE(CountFromSample(9007199254740994.0).has_value());
  EXPECT_FALSE(CountFromSample(5e18).has_value());
  EXPECT_FALSE(CountFromSample(1e30).has_value());
  EXPECT_FALSE(CountFromSample(-5).has_value());
  EXPECT_FALSE(CountFromSample(-0.5).has_value());
  EXPECT_FALSE(CountFromSample(std::nan("")).has_value());
  EXPECT_FALSE(CountFromSample(std::numeric_limits<double>::infinity()).has_value());
}

}  // namespace
}  // namespace pacer::planner
