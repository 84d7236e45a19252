// WorkQueue: controller-runtime's rate-limited, delaying work queue for
// reconcile keys ("namespace/name"), after client-go's workqueue.
//
//  - Add(key) de-duplicates: a key is queued at most once however often it is
//    added before a worker takes it.
//  - Get() blocks until a key is ready (or the queue is shut down) and marks
//    it processing. A key is never handed to two workers at once: an Add
//    while it is processing marks it dirty, and Done(key) queues it again.
//  - AddAfter(key, delay) (a reconcile's RequeueAfter) puts the key on a timer
//    heap ordered by the injected clock's steady time; a key waiting twice
//    keeps the earlier time. Timers move to the queue when Tick() runs:
//    Get() and every Add* call Tick() themselves, tests advance a
//    FakeClock and call Tick(), and a daemon runs RunTimerLoop() on a thread
//    of its own with the SystemClock.
//  - AddRateLimited(key) = AddAfter(key, the larger of the key's exponential
//    backoff base x 2^failures (5 ms, 10 ms, 20 ms, ... capped at 1000 s) and
//    the global token bucket's delay (10 qps, burst 100)). Forget(key) resets
//    the key's failures; NumRequeues(key) reports them. AddRateLimited(key,
//    at_least) waits at least `at_least` too (the API server's Retry-After of
//    a 429 or 503), itself capped at the backoff's cap.
//  - ShutDown() wakes every Get(); Get() then hands out what is still queued
//    and returns nullopt once the queue is empty. Adds after ShutDown() are
//    ignored.
//
// Units: delays are std::chrono durations, rates in keys per second.
// Thread-safety: every method is safe to call concurrently from any thread
// (one internal mutex); the clock must outlive the queue.
#ifndef PACER_CONTROLLER_CORE_WORK_QUEUE_H_
#define PACER_CONTROLLER_CORE_WORK_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/clock.h"

namespace pacer::controller {

struct RateLimiterOptions {
  // Per-key exponential backoff: base x 2^failures, at most max.
  Clock::Duration base_delay = std::chrono::milliseconds(5);
  Clock::Duration max_delay = std::chrono::seconds(1000);
  // Global token bucket shared by every key (client-go's defaults).
  double qps = 10;
  int burst = 100;
};

class WorkQueue {
 public:
  explicit WorkQueue(const Clock& clock, RateLimiterOptions options = {});
  ~WorkQueue();

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  // Queues `key` once `delay` has passed on the clock; delay <= 0 is Add().
  void AddAfter(const std::string& key, Clock::Duration delay);
  // For reconciles that failed: AddAfter(key, the larger of the key's
  // backoff, the bucket's delay and min(at_least, max_delay)).
  void AddRateLimited(const std::string& key, Clock::Duration at_least = Clock::Duration::zero());

  // The next ready key, marked processing; nullopt once shut down and empty.
  std::optional<std::string> Get();
  // The worker finished `key`: re-queues it if it was added meanwhile.
  void Done(const std::string& key);

  // Clears the key's failure count (a reconcile succeeded).
  void Forget(const std::string& key);
  // Failures counted for `key` since the last Forget().
  int NumRequeues(const std::string& key) const;

  // Moves timers that are due at clock.Now() to the queue.
  void Tick();
  // Keys ready to be handed out (not the ones waiting on timers or processing).
  int Len() const;
  // Keys waiting on timers.
  int NumWaiting() const;
  // Keys handed to workers and not yet Done.
  int NumProcessing() const;
  // When the earliest timer is due; nullopt when none is waiting.
  std::optional<Clock::SteadyTime> NextTimer() const;

  void ShutDown();
  bool ShuttingDown() const;

  // Runs Tick() whenever a timer falls due, until ShutDown(). Waits in real
  // time (condition variable), so use it with the SystemClock; tests with a
  // FakeClock call Tick() instead.
  void RunTimerLoop();

 private:
  using TimerKey = std::pair<Clock::SteadyTime, uint64_t>;  // (due, insertion order)

  void AddLocked(const std::string& key);
  void AddAfterLocked(const std::string& key, Clock::Duration delay);
  void TickLocked();
  Clock::Duration ItemBackoffLocked(const std::string& key);
  Clock::Duration BucketDelayLocked();

  const Clock& clock_;
  const RateLimiterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;  // a key was queued, or shutdown
  std::condition_variable timer_cv_;  // a timer was added, or shutdown
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;              // queued or to be re-queued
  std::unordered_set<std::string> processing_;         // handed to a worker
  std::map<TimerKey, std::string> timers_;             // the timer heap, earliest first
  std::unordered_map<std::string, TimerKey> waiting_;  // key -> its timer
  uint64_t next_timer_seq_ = 0;
  std::unordered_map<std::string, int> failures_;
  double bucket_tokens_;
  Clock::SteadyTime bucket_last_;
  bool shutting_down_ = false;
};

// A reconcile worker's loop (controller-runtime's processNextWorkItem):
// takes keys until the queue is shut down and drained, runs `process` on
// each while `leading()` holds, and marks each Done after. A key taken once
// `leading()` is false (the leader lease lost, or the manager stopping) is
// marked Done untouched: another controller may lead by now, and a
// reconcile here would create pods and write status beside it (the queue
// still hands out its backlog after ShutDown). Thread-safety: any number of
// workers on one queue.
void RunReconcileWorker(WorkQueue& queue, const std::function<bool()>& leading,
                        const std::function<void(const std::string&)>& process);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_WORK_QUEUE_H_
