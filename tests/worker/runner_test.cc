// How often the ranks read the stop claim (runner.h, point 4).
#include "core/runner.h"

#include <gtest/gtest.h>

namespace pacer::worker {
namespace {

TEST(StopCheckIntervalTest, AboutTwoSecondsOfStepsBetweenChecks) {
  EXPECT_EQ(StopCheckIntervalSteps(0.5), 4);
  EXPECT_EQ(StopCheckIntervalSteps(0.1), 20);
  EXPECT_EQ(StopCheckIntervalSteps(0.03), 66);
}

TEST(StopCheckIntervalTest, SlowOrUnmeasuredStepsAreCheckedEveryStep) {
  EXPECT_EQ(StopCheckIntervalSteps(5.0), 1);
  EXPECT_EQ(StopCheckIntervalSteps(0.0), 1);
  EXPECT_EQ(StopCheckIntervalSteps(-1.0), 1);
}

// A stop waits up to one interval. Short steps are the noisiest under CPU
// contention: a 2.9 ms sample meant a check every 689 steps, and a worker
// whose steps later ran 13 times slower outlasted its 25 s grace period and
// was killed without a checkpoint. Capped, the same slowdown stops in ~4 s.
TEST(StopCheckIntervalTest, ShortStepsAreCappedSoAStopStaysPrompt) {
  EXPECT_EQ(StopCheckIntervalSteps(0.0029), kMaxStopCheckSteps);
  EXPECT_EQ(StopCheckIntervalSteps(1e-6), kMaxStopCheckSteps);
  const double slowed_step_seconds = 13 * 0.0029;
  EXPECT_LT(static_cast<double>(StopCheckIntervalSteps(0.0029)) * slowed_step_seconds, 25.0 / 4);
}

}  // namespace
}  // namespace pacer::worker
