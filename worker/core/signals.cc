#include "core/signals.h"

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace pacer::worker {
namespace {

// Only lock-free atomics may be touched from a signal handler.
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);

std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_installed{false};
std::atomic<int64_t> g_first_stop_ms{0};  // CLOCK_MONOTONIC
static_assert(std::atomic<int64_t>::is_always_lock_free);

int64_t MonotonicMs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

extern "C" void HandleStopSignal(int signal_number) {
  const int64_t now_ms = MonotonicMs();
  int none = 0;
  if (g_stop_signal.compare_exchange_strong(none, signal_number)) {
    g_first_stop_ms.store(now_ms);
    return;
  }
  // A second Ctrl-C: the user does not want to wait for the step. Not one
  // within kRepeatedStopWindowMs of the first stop: that is the same stop
  // delivered twice (a Ctrl-C to the process group reaches the rank and its
  // supervisor, which forwards a SIGTERM; `timeout` signals its child and
  // then its group), and it killed the rank before its checkpoint (exit 1).
  if (signal_number == SIGINT && now_ms - g_first_stop_ms.load() >= kRepeatedStopWindowMs) {
    // Both calls are async-signal-safe.
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
  }
}

void InstallOrDie(int signal_number, struct sigaction* previous) {
  struct sigaction action {};
  action.sa_handler = HandleStopSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  // Cannot fail for SIGTERM/SIGINT with a valid handler; check anyway.
  if (::sigaction(signal_number, &action, previous) != 0) {
    std::perror("pacer-worker: sigaction");
    std::abort();
  }
}

}  // namespace

StopSignal::StopSignal() {
  if (g_installed.exchange(true)) {
    std::fputs("pacer-worker: internal error: a second StopSignal was created\n", stderr);
    std::abort();
  }
  g_stop_signal.store(0);
  InstallOrDie(SIGTERM, &previous_term_);
  InstallOrDie(SIGINT, &previous_int_);
  // Only now: a stop that arrived during start-up was held pending (see
  // signals.h) and reaches the handler here, not the default action.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &stops, &previous_mask_);
}

StopSignal::~StopSignal() {
  // Mask first, handlers second: in between, a signal stays pending.
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  ::sigaction(SIGTERM, &previous_term_, nullptr);
  ::sigaction(SIGINT, &previous_int_, nullptr);
  g_installed.store(false);
}

bool StopSignal::requested() const { return g_stop_signal.load() != 0; }

int StopSignal::signal_number() const { return g_stop_signal.load(); }

}  // namespace pacer::worker
