// The admission test's free-GPU timeline (planner/src/sched/free_timeline.h):
// a search hint changes how fast a breakpoint is found, never the timeline.
#include "sched/free_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace pacer::sched {
namespace {

std::vector<std::pair<double, int>> SegmentsOf(const FreeTimeline& timeline) {
  std::vector<std::pair<double, int>> segments;
  for (size_t i = 0; i < timeline.size(); ++i) {
    segments.emplace_back(timeline.start(i), timeline.free(i));
  }
  return segments;
}

// Reservations as the scheduler makes them (a few ascending spans each,
// times often within the 1 ms snap of a breakpoint), applied three ways:
// without a hint, with the chained hint the scheduler passes, and with a
// random hint (a caller's mistake must cost time, not order).
TEST(FreeTimelineTest, HintsNeverChangeTheTimeline) {
  std::mt19937 rng(20261204);
  FreeTimeline plain(100.0, 512);
  FreeTimeline chained(100.0, 512);
  FreeTimeline random_hint(100.0, 512);
  std::vector<double> times{100.0};
  for (int reservation = 0; reservation < 400; ++reservation) {
    const int spans = 1 + static_cast<int>(rng() % 5);
    std::vector<double> bounds;
    for (int k = 0; k < 2 * spans; ++k) {
      const double base = times[rng() % times.size()];
      // On a breakpoint, within its snap, or somewhere new.
      const double jitter = (rng() % 3 == 0)   ? 0.0
                            : (rng() % 2 == 0) ? (static_cast<double>(rng() % 2000) - 1000) * 1e-6
                                               : static_cast<double>(rng() % 100000) / 10.0;
      bounds.push_back(std::max(100.0, base + jitter));
    }
    std::sort(bounds.begin(), bounds.end());
    size_t at = 0;
    for (int k = 0; k < spans; ++k) {
      const double t0 = bounds[2 * k];
      const double t1 = (k == spans - 1 && rng() % 8 == 0) ? kForever : bounds[2 * k + 1];
      const int gpus = static_cast<int>(rng() % 9);
      plain.Reserve(t0, t1, gpus);
      at = chained.Reserve(t0, t1, gpus, at);
      random_hint.Reserve(t0, t1, gpus, rng() % (random_hint.size() + 2));
      times.push_back(t0);
    }
    ASSERT_EQ(SegmentsOf(chained), SegmentsOf(plain)) << "reservation " << reservation;
    ASSERT_EQ(SegmentsOf(random_hint), SegmentsOf(plain)) << "reservation " << reservation;
  }
  EXPECT_GT(plain.size(), 500u);
  const std::vector<std::pair<double, int>> segments = SegmentsOf(plain);
  for (size_t i = 1; i < segments.size(); ++i) {
    EXPECT_GT(segments[i].first, segments[i - 1].first + 1e-3) << i;
  }
}

TEST(FreeTimelineTest, AHintPastTheTimeIsIgnored) {
  FreeTimeline timeline(0.0, 8);
  timeline.Reserve(10, 20, 2);
  timeline.Reserve(30, 40, 3);
  // Index 3 starts at 30: a search for 15 from there found nothing before
  // the end of its range and inserted 15 after 30.
  EXPECT_EQ(timeline.Split(15, 3), 2u);
  EXPECT_EQ(timeline.start(2), 15);
  EXPECT_EQ(timeline.free(2), 6);
  EXPECT_EQ(timeline.Reserve(12, 18, 1, 5), 4u);  // 18 starts segment 4
  EXPECT_EQ(SegmentsOf(timeline),
            (std::vector<std::pair<double, int>>{
                {0, 8}, {10, 6}, {12, 5}, {15, 5}, {18, 6}, {20, 8}, {30, 5}, {40, 8}}));
}

}  // namespace
}  // namespace pacer::sched
