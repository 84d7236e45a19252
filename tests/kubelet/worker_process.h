// Process plumbing for the fake kubelet: free TCP ports for the workers'
// store and metrics endpoints, starting a worker as a child process with a
// log file, and the last line of that log (the pod's termination message).
//
// Units: ports are TCP port numbers on 127.0.0.1.
// Thread-safety: every function is thread-safe. FindFreePortRun only checks
// that ports are free now; callers pass the ports they have already handed
// out in `taken` so that two pods never get the same ones.
#ifndef PACER_TESTS_KUBELET_WORKER_PROCESS_H_
#define PACER_TESTS_KUBELET_WORKER_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pacer/status.h"

namespace pacer::testing {

// The first of `count` consecutive ports that are free on 127.0.0.1 and not
// in `taken`; Unavailable when no such run turns up.
StatusOr<int> FindFreePortRun(int count, const std::set<int>& taken);

// Starts `binary args...` with exactly `env`, stdin from /dev/null, stdout
// and stderr appended to `log_path`, in a process group of its own (so that
// the whole group, ranks included, can be killed at once).
StatusOr<pid_t> SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::string& log_path);

// The last non-empty line of the file, cut to 300 characters; "" if none.
std::string LastLogLine(const std::string& path);

}  // namespace pacer::testing

#endif  // PACER_TESTS_KUBELET_WORKER_PROCESS_H_
