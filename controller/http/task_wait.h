// Waiting for a cpprestsdk (pplx) task with a limit: pplx's task::wait()
// has none. The controller's Kubernetes client bounds its requests by a
// deadline (the leader elector's renewals) and by a cancel flag (watches).
//
// Units: std::chrono steady time. Thread-safety: any thread may wait; the
// task signals from cpprestsdk's thread pool.
#ifndef PACER_CONTROLLER_HTTP_TASK_WAIT_H_
#define PACER_CONTROLLER_HTTP_TASK_WAIT_H_

#include <pplx/pplxtasks.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace pacer::controller {

// Signals when a pplx task has finished, however it finished.
struct TaskCompletion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

// A TaskCompletion that `task` signals when it finishes, however it finishes.
template <typename T>
std::shared_ptr<TaskCompletion> CompletionOf(const pplx::task<T>& task) {
  auto completion = std::make_shared<TaskCompletion>();
  task.then([completion](pplx::task<T> finished) {
    try {
      finished.wait();  // observes an exception so pplx does not report it
    } catch (...) {
    }
    std::lock_guard<std::mutex> lock(completion->mu);
    completion->done = true;
    completion->cv.notify_all();
  });
  return completion;
}

// Whether `task` finished (however) by `deadline`. A task still running then
// is left to run: the caller abandons it and must keep alive what it writes.
template <typename T>
bool FinishedBy(const pplx::task<T>& task, std::chrono::steady_clock::time_point deadline) {
  // Done already (data buffered before the deadline passed): not late.
  if (task.is_done()) return true;
  const std::shared_ptr<TaskCompletion> completion = CompletionOf(task);
  std::unique_lock<std::mutex> lock(completion->mu);
  return completion->cv.wait_until(lock, deadline, [&] { return completion->done; });
}

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_HTTP_TASK_WAIT_H_
