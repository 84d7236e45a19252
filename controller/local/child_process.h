// Child-process plumbing for running pacer-worker on this machine, shared by
// local mode's ProcessLauncher and the tests' fake kubelet: free TCP ports
// for the workers' store and metrics endpoints, starting a worker as a child
// process with a log file, and the last line of that log (why it failed).
//
// Units: ports are TCP port numbers on 127.0.0.1.
// Thread-safety: every function is thread-safe. FindFreePortRun only checks
// that ports are free now; callers pass the ports they have already handed
// out in `taken` so that two pods never get the same ones.
#ifndef PACER_CONTROLLER_LOCAL_CHILD_PROCESS_H_
#define PACER_CONTROLLER_LOCAL_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pacer/status.h"

namespace pacer::controller {

// The first of `count` consecutive ports that are free on 127.0.0.1 and not
// in `taken`; Unavailable when no such run turns up.
StatusOr<int> FindFreePortRun(int count, const std::set<int>& taken);

// How a child's output file is opened.
enum class LogMode { kAppend, kTruncate };

// Starts `binary args...` with exactly `env`, stdin from /dev/null, stdout
// and stderr written to `log_path`, in a process group of its own (so that
// the whole group, ranks included, can be killed at once, and a terminal's
// Ctrl-C reaches only the parent). The descriptors in `inherited_fds` stay
// open in the child under their numbers, close-on-exec or not (a
// posix_spawn dup2 onto itself clears the flag: POSIX.1-2024, glibc >= 2.29).
StatusOr<pid_t> SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::string& log_path, LogMode log_mode = LogMode::kAppend,
                             const std::vector<int>& inherited_fds = {});

// The last non-empty line of the file, cut to 300 characters; "" if none.
std::string LastLogLine(const std::string& path);

// Why a pacer-worker failed, from its log: the first rank's `event=failed`
// line of the last run in it (below the last `==== pacer run:` header; the
// first failure is the cause, later ranks stop because of it), else the
// last non-empty line; cut to 300 characters. The last line is the
// supervisor's summary (`event=done exit_code=1 ...`), which names no cause.
std::string WorkerFailureLine(const std::string& path);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_CHILD_PROCESS_H_
