// The work queue: de-duplication, exclusivity, dirty re-queue, timers on a
// fake clock, per-key backoff, the global token bucket, forget, shutdown.
#include "core/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace pacer::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// No global limit, so that backoff tests see the per-key delay alone.
RateLimiterOptions NoBucket() {
  RateLimiterOptions o;
  o.qps = 0;
  return o;
}

TEST(WorkQueueTest, AddDeduplicates) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("ns/a");
  q.Add("ns/a");
  q.Add("ns/b");
  q.Add("ns/a");
  EXPECT_EQ(q.Len(), 2);
  EXPECT_EQ(q.Get(), "ns/a");
  EXPECT_EQ(q.Get(), "ns/b");
  EXPECT_EQ(q.Len(), 0);
}

// The leader lease lost with a backlog: ShutDown still hands out the
// queued keys, and the workers reconciled every one of them (creating pods,
// writing status) while the new leader did the same. Keys taken once the
// lease is gone are marked done untouched.
TEST(WorkQueueTest, AWorkerReconcilesNothingOnceItStopsLeading) {
  FakeClock clock;
  WorkQueue q(clock);
  for (const char* key : {"ns/a", "ns/b", "ns/c"}) q.Add(key);
  q.ShutDown();  // the backlog stays
  bool leading = true;
  std::vector<std::string> reconciled;
  RunReconcileWorker(
      q, [&] { return leading; },
      [&](const std::string& key) {
        reconciled.push_back(key);
        leading = false;  // the lease is lost during the first reconcile
      });
  EXPECT_EQ(reconciled, std::vector<std::string>{"ns/a"});
  EXPECT_EQ(q.Len(), 0);  // drained, and the loop returned
}

TEST(WorkQueueTest, AddWhileProcessingRequeuesOnDone) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("ns/a");
  ASSERT_EQ(q.Get(), "ns/a");
  q.Add("ns/a");  // dirty: not handed out while processing
  q.Add("ns/a");
  EXPECT_EQ(q.Len(), 0);
  q.Done("ns/a");
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
  EXPECT_EQ(q.Len(), 0);  // not dirty again: gone
}

TEST(WorkQueueTest, DoneWithoutAddDoesNotRequeue) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("ns/a");
  ASSERT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
  EXPECT_EQ(q.Len(), 0);
}

TEST(WorkQueueTest, StrayDoneDoesNotDuplicateAQueuedKey) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("ns/a");
  q.Done("ns/a");  // never handed out
  EXPECT_EQ(q.Len(), 1);
}

TEST(WorkQueueTest, NeverHandsOneKeyToTwoWorkersAtOnce) {
  FakeClock clock;
  WorkQueue q(clock);
  constexpr int kKeys = 5;
  constexpr int kAddsPerProducer = 2000;
  std::mutex mu;
  std::set<std::string> in_flight;
  std::atomic<bool> overlap{false};
  std::atomic<int> handled{0};

  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!in_flight.insert(*key).second) overlap = true;
        }
        std::this_thread::yield();  // widen the window for an overlap
        {
          std::lock_guard<std::mutex> lock(mu);
          in_flight.erase(*key);
        }
        ++handled;
        q.Done(*key);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        q.Add("ns/job-" + std::to_string((i + p) % kKeys));
      }
    });
  }
  for (auto& t : producers) t.join();
  q.ShutDown();  // workers drain what is queued, then Get() returns nullopt
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_GE(handled.load(), kKeys);
  EXPECT_LE(handled.load(), 3 * kAddsPerProducer);
}

// A FakeClock that reports its reads. Get() reads the clock (its Tick())
// under the queue's lock just before it waits, so once a worker's read is
// seen, an Add() or ShutDown() (which need that lock) runs only after the
// worker is waiting: the wake-up path is taken on every schedule, not only
// when the worker happens to win the race. No sleeps, no polling.
class ReadReportingClock final : public Clock {
 public:
  SteadyTime Now() const override {
    const SteadyTime now = clock_.Now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++reads_;
    }
    cv_.notify_all();
    return now;
  }
  WallTime WallNow() const override { return clock_.WallNow(); }

  int reads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }
  // Whether Now() has been called `n` times in all. The bound only turns a
  // Get() that stopped reading the clock into a failure instead of a hang.
  bool AwaitReads(int n) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(60), [&] { return reads_ >= n; });
  }

 private:
  FakeClock clock_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int reads_ = 0;  // guarded by mu_
};

TEST(WorkQueueTest, GetBlocksUntilAdd) {
  ReadReportingClock clock;
  WorkQueue q(clock);
  const int reads_before = clock.reads();  // the constructor's
  std::atomic<bool> returned{false};
  std::optional<std::string> got;  // written by the worker, read after join
  std::thread worker([&] {
    got = q.Get();
    returned = true;
  });
  EXPECT_TRUE(clock.AwaitReads(reads_before + 1)) << "Get() did not read the clock (Tick)";
  EXPECT_FALSE(returned.load()) << "Get() returned with nothing queued";
  q.Add("ns/a");
  worker.join();
  EXPECT_EQ(got, "ns/a");
}

TEST(WorkQueueTest, ShutDownWakesAllGets) {
  ReadReportingClock clock;
  WorkQueue q(clock);
  const int reads_before = clock.reads();  // the constructor's
  constexpr int kWorkers = 3;
  std::atomic<int> returned{0};
  std::atomic<int> returned_empty{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.emplace_back([&] {
      if (!q.Get().has_value()) ++returned_empty;
      ++returned;
    });
  }
  // Every worker is waiting in Get() before ShutDown() can take the lock.
  EXPECT_TRUE(clock.AwaitReads(reads_before + kWorkers)) << "Get() did not read the clock (Tick)";
  EXPECT_EQ(returned.load(), 0) << "a Get() returned with nothing queued";
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(returned_empty.load(), kWorkers);
  EXPECT_TRUE(q.ShuttingDown());
  q.Add("ns/a");  // ignored after shutdown
  EXPECT_EQ(q.Len(), 0);
  EXPECT_FALSE(q.Get().has_value());
}

TEST(WorkQueueTest, ShutDownDrainsQueuedKeysFirst) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("ns/a");
  q.ShutDown();
  EXPECT_EQ(q.Get(), "ns/a");
  EXPECT_FALSE(q.Get().has_value());
}

TEST(WorkQueueTest, AddAfterWaitsForTheClock) {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddAfter("ns/a", seconds(30));
  EXPECT_EQ(q.Len(), 0);
  EXPECT_EQ(q.NumWaiting(), 1);
  clock.Advance(seconds(29));
  q.Tick();
  EXPECT_EQ(q.Len(), 0);
  clock.Advance(seconds(1));
  q.Tick();
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.NumWaiting(), 0);
  EXPECT_EQ(q.Get(), "ns/a");
}

TEST(WorkQueueTest, AddAfterHandsOutInDueOrder) {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddAfter("ns/c", seconds(30));
  q.AddAfter("ns/a", seconds(10));
  q.AddAfter("ns/b", seconds(20));
  q.AddAfter("ns/d", seconds(20));  // same time: insertion order
  clock.Advance(seconds(60));
  q.Tick();
  EXPECT_EQ(q.Get(), "ns/a");
  EXPECT_EQ(q.Get(), "ns/b");
  EXPECT_EQ(q.Get(), "ns/d");
  EXPECT_EQ(q.Get(), "ns/c");
}

TEST(WorkQueueTest, AddAfterKeepsTheEarlierTime) {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddAfter("ns/a", seconds(60));
  q.AddAfter("ns/a", seconds(10));
  q.AddAfter("ns/a", seconds(30));
  EXPECT_EQ(q.NumWaiting(), 1);
  EXPECT_EQ(q.NextTimer(), clock.Now() + seconds(10));
  clock.Advance(seconds(10));
  q.Tick();
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.NumWaiting(), 0);
}

TEST(WorkQueueTest, AddAfterNonPositiveIsAdd) {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddAfter("ns/a", seconds(0));
  q.AddAfter("ns/b", seconds(-5));
  EXPECT_EQ(q.Len(), 2);
}

TEST(WorkQueueTest, TimerOfAQueuedKeyDoesNotDuplicateIt) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("ns/a");
  q.AddAfter("ns/a", seconds(1));
  clock.Advance(seconds(1));
  q.Tick();
  EXPECT_EQ(q.Len(), 1);
}

TEST(WorkQueueTest, BackoffDoublesFromFiveMillisecondsToTheCap) {
  FakeClock clock;
  WorkQueue q(clock, NoBucket());
  const Clock::SteadyTime start = clock.Now();
  Clock::Duration expected = milliseconds(5);
  for (int failure = 0; failure < 25; ++failure) {
    q.AddRateLimited("ns/a");
    EXPECT_EQ(q.NumRequeues("ns/a"), failure + 1);
    const Clock::Duration capped = std::min<Clock::Duration>(expected, seconds(1000));
    ASSERT_EQ(q.NextTimer(), clock.Now() + capped) << "failure " << failure;
    clock.Advance(capped);
    q.Tick();
    ASSERT_EQ(q.Get(), "ns/a");
    q.Done("ns/a");
    expected *= 2;
  }
  // 5 ms x 2^17 = 655 s < 1000 s <= 5 ms x 2^18: the 19th and later wait 1000 s.
  EXPECT_GT(clock.Now() - start, seconds(1000) * 7);
}

TEST(WorkQueueTest, BackoffSequenceStartsAtFiveTenTwenty) {
  FakeClock clock;
  WorkQueue q(clock, NoBucket());
  for (int ms : {5, 10, 20, 40, 80}) {
    q.AddRateLimited("ns/a");
    EXPECT_EQ(q.NextTimer(), clock.Now() + milliseconds(ms));
    clock.Advance(milliseconds(ms));
    q.Tick();
    ASSERT_EQ(q.Get(), "ns/a");
    q.Done("ns/a");
  }
}

// A server's Retry-After is a floor under the backoff, capped at the
// backoff's cap; a backoff already longer than the hint stays.
TEST(WorkQueueTest, AServersRetryAfterIsAFloorUnderTheBackoff) {
  FakeClock clock;
  WorkQueue q(clock, NoBucket());
  q.AddRateLimited("ns/a", seconds(3));
  EXPECT_EQ(q.NumRequeues("ns/a"), 1) << "a failure like any other";
  EXPECT_EQ(q.NextTimer(), clock.Now() + seconds(3));
  clock.Advance(seconds(3) - milliseconds(1));
  q.Tick();
  EXPECT_EQ(q.Len(), 0) << "not before the server's hint";
  clock.Advance(milliseconds(1));
  q.Tick();
  ASSERT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");

  q.AddRateLimited("ns/b", seconds(1000000));
  EXPECT_EQ(q.NextTimer(), clock.Now() + seconds(1000)) << "capped at the backoff's cap";

  WorkQueue fresh(clock, NoBucket());
  for (int failure = 0; failure < 12; ++failure) {
    fresh.AddRateLimited("ns/c");
    clock.Advance(*fresh.NextTimer() - clock.Now());
    fresh.Tick();
    ASSERT_EQ(fresh.Get(), "ns/c");
    fresh.Done("ns/c");
  }
  fresh.AddRateLimited("ns/c", seconds(1));  // the 13th failure: 5 ms x 2^12
  EXPECT_EQ(fresh.NextTimer(), clock.Now() + milliseconds(20480)) << "the longer backoff wins";
}

TEST(WorkQueueTest, ForgetResetsBackoff) {
  FakeClock clock;
  WorkQueue q(clock, NoBucket());
  for (int i = 0; i < 4; ++i) q.AddRateLimited("ns/a");
  EXPECT_EQ(q.NumRequeues("ns/a"), 4);
  q.Forget("ns/a");
  EXPECT_EQ(q.NumRequeues("ns/a"), 0);
  clock.Advance(seconds(1));
  q.Tick();
  ASSERT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
  q.AddRateLimited("ns/a");
  EXPECT_EQ(q.NextTimer(), clock.Now() + milliseconds(5));
}

TEST(WorkQueueTest, BackoffIsPerKey) {
  FakeClock clock;
  WorkQueue q(clock, NoBucket());
  q.AddRateLimited("ns/a");
  q.AddRateLimited("ns/a");
  q.AddRateLimited("ns/b");
  EXPECT_EQ(q.NumRequeues("ns/a"), 2);
  EXPECT_EQ(q.NumRequeues("ns/b"), 1);
  EXPECT_EQ(q.NextTimer(), clock.Now() + milliseconds(5));  // ns/b's first failure
}

TEST(WorkQueueTest, GlobalBucketAllowsABurstThenTenPerSecond) {
  FakeClock clock;
  RateLimiterOptions options;
  options.base_delay = milliseconds(1);
  WorkQueue q(clock, options);  // 10 qps, burst 100
  // 105 distinct keys in an instant: the first 100 take the burst and wait
  // only their own 1 ms backoff; the bucket then sends one per 100 ms.
  const Clock::SteadyTime start = clock.Now();
  for (int i = 0; i < 105; ++i) q.AddRateLimited("ns/k" + std::to_string(i));
  EXPECT_EQ(q.NumWaiting(), 105);
  clock.Advance(milliseconds(1));
  q.Tick();
  EXPECT_EQ(q.Len(), 100);
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(q.NextTimer(), start + milliseconds(100) * i);
    clock.Advance(start + milliseconds(100) * i - clock.Now());
    q.Tick();
    EXPECT_EQ(q.Len(), 100 + i);
  }
}

TEST(WorkQueueTest, GlobalBucketIsConfigurable) {
  FakeClock clock;
  RateLimiterOptions options;
  options.base_delay = milliseconds(1);
  options.qps = 2;
  options.burst = 1;
  WorkQueue q(clock, options);
  q.AddRateLimited("ns/a");  // the burst token
  q.AddRateLimited("ns/b");  // 500 ms
  q.AddRateLimited("ns/c");  // 1000 ms
  clock.Advance(milliseconds(1));
  q.Tick();
  EXPECT_EQ(q.Len(), 1);
  clock.Advance(milliseconds(499));
  q.Tick();
  EXPECT_EQ(q.Len(), 2);
  clock.Advance(milliseconds(500));
  q.Tick();
  EXPECT_EQ(q.Len(), 3);
}

TEST(WorkQueueTest, RunTimerLoopDeliversWithTheSystemClock) {
  WorkQueue q(SystemClock::Default());
  std::thread timers([&] { q.RunTimerLoop(); });
  q.AddAfter("ns/a", milliseconds(2));
  EXPECT_EQ(q.Get(), "ns/a");  // blocks until the loop moves the timer
  q.ShutDown();
  timers.join();
}

}  // namespace
}  // namespace pacer::controller
