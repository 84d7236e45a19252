// The Kubernetes launcher: a launch is the workers' headless Service and one
// Pod per node (worker_pods.h), created together — if any pod cannot be
// created, the ones that were are deleted again (all of a job's pods or
// none). Pods are read from the pod informer's cache; "expectations" (as in
// the ReplicaSet controller) cover the gap between a create or delete and
// the cache seeing it, so a pass never launches twice or counts a deleted
// pod.
//
//   Stop(kGraceful): deletes the pods with their grace period: the kubelet
//                    sends SIGTERM, the worker checkpoints and exits (6).
//   Stop(kRemove):   deletes every pod of the job, any attempt.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef PACER_CONTROLLER_DAEMON_POD_LAUNCHER_H_
#define PACER_CONTROLLER_DAEMON_POD_LAUNCHER_H_

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "core/clock.h"
#include "daemon/worker_pods.h"
#include "kube/informer.h"
#include "kube/kube_client.h"
#include "reconcile/interfaces.h"

namespace pacer::controller {

class PodLauncher final : public Launcher {
 public:
  // `pods` is an informer on pods indexed by kJobLabel; both must outlive
  // this, as must `clock` (expectations' age; nullptr: the system clock).
  PodLauncher(KubeClient* client, const Informer* pods, PodTemplateOptions options,
              const Clock* clock = nullptr);

  Status Launch(const LaunchSpec& spec) override;
  StatusOr<std::optional<WorkerGroup>> Observe(const JobRef& job) override;
  Status Stop(const JobRef& job, StopMode mode) override;
  // The job's pods still in the cache that are being deleted (Terminating)
  // or that this launcher deleted and the cache still shows.
  int TerminatingWorkers(const JobRef& job) override;
  // Jobs with expectations held (for tests).
  std::size_t TrackedJobs();

 private:
  struct Expectations {
    int attempt = 0;
    int nodes = 0;
    planner::Layout layout;
    std::string spec_hash;
    int64_t total_steps = 0;
    int64_t launch_unix_seconds = 0;
    std::set<std::string> created;  // pod names not yet in the cache
    std::set<std::string> deleted;  // pod names the cache still shows
    // Pod names deleted gracefully (a stop at a checkpoint) that the cache
    // does not show deleting yet: the group is stopping already, also when
    // the stop failed half-way.
    std::set<std::string> stopping;
    Clock::SteadyTime since;
  };

  // Drops every expectation past kExpectationTimeout, at most once per
  // timeout (mu_ held). Observe drops its own job's, but a deleted job is
  // never observed again: its Stop(kRemove) entry stayed for the life of
  // the process, one per TrainJob name ever deleted.
  void SweepExpiredLocked();

  KubeClient* client_;
  const Informer* pods_;
  PodTemplateOptions options_;
  const Clock* clock_;
  std::mutex mu_;
  Clock::SteadyTime last_sweep_{};
  std::map<std::string, Expectations> expectations_;  // by job key
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_DAEMON_POD_LAUNCHER_H_
