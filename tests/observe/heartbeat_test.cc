// Heartbeat as a liveness check: healthy while the loop beats within its
// limit, failing with the loop's name once it falls silent, healthy again
// after the next beat. Time is a test-controlled clock (no sleeps).
#include "observe/heartbeat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace pacer::controller {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

class TestClock {
 public:
  std::chrono::steady_clock::time_point Now() const {
    return std::chrono::steady_clock::time_point(seconds(now_seconds_.load()));
  }
  void Advance(int s) { now_seconds_ += s; }

 private:
  std::atomic<int> now_seconds_{1000};
};

TEST(HeartbeatTest, FailsOnlyAfterTheLoopIsSilentLongerThanTheLimit) {
  TestClock clock;
  Heartbeat beat("reconcile-loop", seconds(60), [&clock] { return clock.Now(); });
  EXPECT_TRUE(beat.Check().ok()) << "a new loop gets its full limit to start";
  clock.Advance(60);
  EXPECT_TRUE(beat.Check().ok()) << "exactly at the limit is still alive";
  clock.Advance(1);
  const Status stuck = beat.Check();
  EXPECT_EQ(stuck.code(), StatusCode::kUnavailable);
  EXPECT_THAT(stuck.message(), HasSubstr("reconcile-loop"));
  EXPECT_THAT(stuck.message(), HasSubstr("61.0 s"));
  EXPECT_THAT(stuck.message(), HasSubstr("limit 60.0 s"));

  beat.Beat();
  EXPECT_TRUE(beat.Check().ok());
  clock.Advance(59);
  beat.Beat();
  clock.Advance(59);
  EXPECT_TRUE(beat.Check().ok()) << "each beat restarts the limit";
}

// Beats and checks from several threads at once. The clock first moves most
// of the way to the limit, so only the concurrent beats (not the beat at
// construction) can keep the loop alive once it moves on: a Beat() that
// records nothing, or a torn time, fails below.
TEST(HeartbeatTest, ConcurrentBeatsAndChecks) {
  TestClock clock;
  Heartbeat beat("watch", seconds(10), [&clock] { return clock.Now(); });
  clock.Advance(8);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&beat, &failures, t] {
      for (int i = 0; i < 1000; ++i) {
        if (t % 2 == 0) {
          beat.Beat();
        } else if (!beat.Check().ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "8 s of silence at most while they ran";

  clock.Advance(8);  // 16 s after construction, 8 s after the beats
  EXPECT_TRUE(beat.Check().ok()) << "the concurrent beats restarted the limit";
  clock.Advance(3);  // 11 s after the beats
  const Status stuck = beat.Check();
  EXPECT_EQ(stuck.code(), StatusCode::kUnavailable);
  EXPECT_THAT(stuck.message(), HasSubstr("11.0 s"));
}

TEST(HeartbeatTest, RealClockByDefault) {
  Heartbeat beat("loop", std::chrono::hours(1));
  beat.Beat();
  EXPECT_TRUE(beat.Check().ok());
  Heartbeat zero("loop", std::chrono::steady_clock::duration(-1));
  EXPECT_FALSE(zero.Check().ok()) << "a negative limit is always exceeded";
}

}  // namespace
}  // namespace pacer::controller
