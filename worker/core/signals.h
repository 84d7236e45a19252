// StopSignal: turns SIGTERM and SIGINT into a request to stop at the next
// step boundary.
//
// Kubernetes stops a pod with SIGTERM and, after the grace period, SIGKILL.
// pacer-worker uses the grace period to finish the current step, write a
// checkpoint and exit with kExitStoppedAfterCheckpoint, so the controller can
// relaunch the job on a new plan without losing work. The handlers only store
// the signal number in a lock-free atomic (async-signal-safe); the training
// loop polls requested() between steps, and during start-up the store's
// waits poll it too (runner.h, point 5). They are installed with SA_RESTART so
// that a blocking read in a collective or a store is resumed rather than
// failing with EINTR in the middle of a step. A second SIGINT (Ctrl-C pressed
// twice) terminates the process at once with the default action, when it
// comes kRepeatedStopWindowMs or more after the first stop signal: one
// within it is the same stop delivered twice (to the process group and
// forwarded by the supervisor), as the supervisor counts it too.
//
// Start-up: a process may keep SIGTERM and SIGINT blocked until it can act on
// them (the supervisor starts every rank that way), so a stop that arrives
// while the rank is still starting stays pending instead of killing it with
// the default action. The constructor installs the handlers first and then
// unblocks both signals in the calling thread, so a pending one is delivered
// to the handler at once; the destructor blocks them again as they were
// before it restores the previous handlers, so a late signal cannot kill a
// rank that is already returning its exit code. Construct it on the thread
// that starts the others: threads inherit its mask.
//
// One instance per process: signal dispositions are process-wide. Creating a
// second one while another is alive is a programming error and aborts. The
// destructor restores the handlers that were installed before.
//
// Thread-safety: requested() and signal_number() may be called from any
// thread; construction and destruction must not race with each other.
#ifndef PACER_WORKER_CORE_SIGNALS_H_
#define PACER_WORKER_CORE_SIGNALS_H_

#include <signal.h>

#include <cstdint>

namespace pacer::worker {

// Stop signals this close to the first (milliseconds) are the same stop.
inline constexpr int64_t kRepeatedStopWindowMs = 1000;

class StopSignal {
 public:
  // Installs the handlers; the flag starts cleared.
  StopSignal();
  // Restores the previous SIGTERM and SIGINT handlers.
  ~StopSignal();

  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // Whether SIGTERM or SIGINT arrived since construction.
  bool requested() const;
  // The first stop signal received (SIGTERM or SIGINT), 0 if none.
  int signal_number() const;

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_int_ {};
  sigset_t previous_mask_ {};
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_SIGNALS_H_
