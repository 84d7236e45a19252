// Supervisor: runs one process per local rank and turns their fates into one
// exit code for the node.
//
// pacer-worker runs one supervisor per node. RunSupervised forks one child
// per local rank (LOCAL_WORLD_SIZE of them, one per GPU); each child runs
// rank_main(local_rank) and exits with its return value. Processes rather
// than threads so that a rank that crashes (a segfault in a kernel launch, an
// abort in a library) cannot take its siblings or the supervisor down with it,
// and so that its death is observable by waitpid.
//
// The rules, in the order they apply:
//   - All ranks exit 0: the result is kExitSuccess.
//   - A rank exits non-zero, or dies by a signal the supervisor did not send:
//     that is the first failure. The others get SIGTERM (so they can stop at
//     a step boundary), then SIGKILL if still alive `stop_grace_seconds`
//     later. The result is the first failure's code, unless that was a
//     symptom (kExitRendezvousTimeout, kExitCollectiveFailure: the store or
//     a peer gone) and a sibling then exits with a cause (invalid config,
//     out of memory, checkpoint failure, data loss, device fault): rank 0's
//     process takes the store with it when it fails, and a sibling can
//     notice before rank 0's own exit is seen. A rank that died by a
//     signal (SIGSEGV, SIGABRT, SIGKILL, ...) counts as kExitInternalError: a
//     worker that fails for a known reason exits with that reason's code, so a
//     signal death means a crash or an outside kill. The kernel's OOM killer
//     uses SIGKILL too and cannot be told apart from `kill -9` here, so it is
//     reported as kExitInternalError as well, not kExitOutOfMemory.
//   - The supervisor gets SIGTERM or SIGINT (Kubernetes stopping the pod,
//     Ctrl-C in local mode): it forwards SIGTERM to every rank and waits up to
//     `stop_grace_seconds` before SIGKILL. If every rank returned
//     kExitStoppedAfterCheckpoint or kExitSuccess, the result is
//     kExitStoppedAfterCheckpoint when any rank stopped, else kExitSuccess;
//     otherwise it is the first other outcome (a rank that had to be killed,
//     or that died of a signal, counts as kExitInternalError). A second
//     SIGTERM/SIGINT during the grace period, more than
//     `repeat_signal_window_seconds` after the first, kills the ranks at once.
//   - The parent named by `parent_pid` is gone: as on SIGTERM.
// Every wait is bounded: a rank that ignores SIGTERM is killed after the
// grace period. Each child also asks the kernel to SIGKILL it if the
// supervisor dies first (PR_SET_PDEATHSIG), so ranks are never orphaned.
//
// Logs go to stderr, one key=value line per event, naming local_rank and pid.
//
// Thread-safety: call RunSupervised from the main thread of a process that
// has not started any other thread yet (fork copies only the calling thread;
// a lock held by another thread stays locked forever in the child), and run
// at most one supervisor per process: it installs process-wide handlers for
// SIGTERM, SIGINT and SIGCHLD for its duration and restores the previous ones
// (and the signal mask) before returning. rank_main runs in the child with the
// dispositions the caller had and the caller's mask plus SIGTERM and SIGINT
// blocked: a stop that arrives while a rank is starting stays pending until
// the rank installs its own handlers and unblocks them (StopSignal does), so
// it cannot kill a half-started rank. A rank that never unblocks them is
// killed after the grace period.
#ifndef PACER_WORKER_CORE_SUPERVISOR_H_
#define PACER_WORKER_CORE_SUPERVISOR_H_

#include <functional>

namespace pacer::worker {

struct SupervisorOptions {
  // Seconds between SIGTERM to the ranks and SIGKILL to those still alive.
  // Below Kubernetes' default 30 s termination grace period so that the
  // supervisor, not the kubelet, has the last word and exits with a code.
  double stop_grace_seconds = 25.0;
  // The same after a rank failed (or could not be started): the others
  // cannot finish a step without it, so nothing is gained by waiting the
  // stop grace, which the controller sets to minutes (its peers on other
  // nodes would fail first, and be blamed). The lesser of the two applies.
  double failure_grace_seconds = 25.0;
  // Stop signals within this many seconds of the first are the same stop,
  // not the second one that kills the ranks at once: a service manager or
  // batch system signals every process of a job (`pacer run` and its
  // worker), and `pacer run` then forwards its own.
  double repeat_signal_window_seconds = 1.0;
  // When > 0, the process that started the worker (PACER_PARENT_PID): once
  // it is gone, the ranks are stopped as on SIGTERM. Our parent is watched
  // with getppid() (re-parented: it died); one further up (a wrapper script
  // between) with a pidfd. Checked every parent_poll_seconds.
  int parent_pid = 0;
  double parent_poll_seconds = 1.0;
};

// Runs rank_main(0) .. rank_main(local_world_size - 1) in child processes and
// returns the node's exit code (an ExitCode from exit_codes.h) per the rules
// above. kExitInvalidConfig when local_world_size < 1; kExitInternalError
// when the supervisor itself cannot work (a fork or pipe failure: the ranks
// already started are stopped first).
int RunSupervised(int local_world_size, const std::function<int(int local_rank)>& rank_main,
                  const SupervisorOptions& options);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_SUPERVISOR_H_
