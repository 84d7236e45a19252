#include "core/work_queue.h"

#include <algorithm>
#include <cmath>

namespace pacer::controller {

WorkQueue::WorkQueue(const Clock& clock, RateLimiterOptions options)
    : clock_(clock),
      options_(options),
      bucket_tokens_(static_cast<double>(options.burst)),
      bucket_last_(clock.Now()) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  TickLocked();
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  // Queued (or to be re-queued on Done): once is enough.
  if (!dirty_.insert(key).second) return;
  if (processing_.count(key) > 0) return;  // Done() re-queues it
  queue_.push_back(key);
  ready_cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  std::lock_guard<std::mutex> lock(mu_);
  TickLocked();
  AddAfterLocked(key, delay);
}

void WorkQueue::AddAfterLocked(const std::string& key, Clock::Duration delay) {
  if (shutting_down_) return;
  if (delay <= Clock::Duration::zero()) {
    AddLocked(key);
    return;
  }
  const Clock::SteadyTime due = clock_.Now() + delay;
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second.first <= due) return;  // already waiting for an earlier time
    timers_.erase(it->second);
    waiting_.erase(it);
  }
  const TimerKey timer{due, next_timer_seq_++};
  timers_.emplace(timer, key);
  waiting_.emplace(key, timer);
  timer_cv_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key, Clock::Duration at_least) {
  std::lock_guard<std::mutex> lock(mu_);
  TickLocked();
  if (shutting_down_) return;
  // Both limiters are charged (client-go's MaxOfRateLimiter).
  const Clock::Duration item = ItemBackoffLocked(key);
  const Clock::Duration bucket = BucketDelayLocked();
  // A server's hint is honoured, but no hint parks a job longer than the
  // backoff's own cap.
  const Clock::Duration hint = std::min(at_least, options_.max_delay);
  AddAfterLocked(key, std::max({item, bucket, hint}));
}

Clock::Duration WorkQueue::ItemBackoffLocked(const std::string& key) {
  const int exponent = failures_[key]++;
  // In double: 2^exponent overflows any integer type long before the cap.
  const double delay_ns = static_cast<double>(options_.base_delay.count()) *
                          std::pow(2.0, static_cast<double>(exponent));
  if (!(delay_ns < static_cast<double>(options_.max_delay.count()))) return options_.max_delay;
  return Clock::Duration(static_cast<Clock::Duration::rep>(delay_ns));
}

Clock::Duration WorkQueue::BucketDelayLocked() {
  if (options_.qps <= 0) return Clock::Duration::zero();  // no global limit
  const Clock::SteadyTime now = clock_.Now();
  const double elapsed_seconds = std::chrono::duration<double>(now - bucket_last_).count();
  if (elapsed_seconds > 0) {
    bucket_tokens_ = std::min(static_cast<double>(options_.burst),
                              bucket_tokens_ + elapsed_seconds * options_.qps);
    bucket_last_ = now;
  }
  // A reservation always succeeds; the tokens owed set the delay.
  bucket_tokens_ -= 1;
  if (bucket_tokens_ >= 0) return Clock::Duration::zero();
  const double wait_seconds = -bucket_tokens_ / options_.qps;
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(wait_seconds));
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  TickLocked();
  ready_cv_.wait(lock, [this] { return !queue_.empty() || shutting_down_; });
  if (queue_.empty()) return std::nullopt;  // shut down and drained
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  // Only a key that was processing can be owed a re-queue: a stray Done()
  // for a queued key must not queue it twice.
  if (processing_.erase(key) == 0) return;
  if (dirty_.count(key) > 0) {
    queue_.push_back(key);
    ready_cv_.notify_one();
  }
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  TickLocked();
}

void WorkQueue::TickLocked() {
  const Clock::SteadyTime now = clock_.Now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    std::string key = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    waiting_.erase(key);
    AddLocked(key);
  }
}

int WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int WorkQueue::NumWaiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(timers_.size());
}

int WorkQueue::NumProcessing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(processing_.size());
}

std::optional<Clock::SteadyTime> WorkQueue::NextTimer() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first.first;
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  timers_.clear();
  waiting_.clear();
  ready_cv_.notify_all();
  timer_cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

void WorkQueue::RunTimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    TickLocked();
    if (timers_.empty()) {
      timer_cv_.wait(lock);
    } else {
      // Real time until the clock's next due time; a new earlier timer or
      // shutdown wakes the wait sooner.
      timer_cv_.wait_for(lock, timers_.begin()->first.first - clock_.Now());
    }
  }
}

void RunReconcileWorker(WorkQueue& queue, const std::function<bool()>& leading,
                        const std::function<void(const std::string&)>& process) {
  while (std::optional<std::string> key = queue.Get()) {
    if (leading()) process(*key);
    queue.Done(*key);
  }
}

}  // namespace pacer::controller
