// pacer-controller's wiring (controller-runtime's Manager): the Kubernetes
// client, informers on TrainJobs, Pods and Nodes, the work queue and its
// reconcile workers, Lease-based leader election, the event recorder, the
// /healthz /readyz /metrics server, structured logs, and the cluster
// scheduler's loop: a pass over every TrainJob when one arrives, changes or
// finishes, when GPUs free up, when a reservation starts, and at least every
// decision interval; the jobs whose allocation changed are reconciled.
//
// Only the leader reconciles; every replica keeps its caches warm and
// answers probes. Losing the lease stops the workers and makes Wait() return
// kLostLeadership, so the process exits and restarts as a standby (as
// controller-runtime does): two leaders never act at once.
//
// Thread-safety: Start, Stop and Wait from one thread; the rest is internal.
#ifndef PACER_CONTROLLER_DAEMON_CONTROLLER_MANAGER_H_
#define PACER_CONTROLLER_DAEMON_CONTROLLER_MANAGER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/worker_pods.h"
#include "kube/kube_config.h"
#include "reconcile/cluster_scheduler.h"
#include "reconcile/reconciler.h"

namespace pacer::controller {

struct ManagerOptions {
  KubeConfig kube;
  std::string watch_namespace;  // "" = all namespaces
  std::string prometheus_url;   // "" = none (jobs run Degraded, on predictions)
  std::chrono::seconds measurement_window{120};
  int workers = 4;  // concurrent reconciles (never two for one job)
  bool leader_elect = true;
  // "" = LeaseNamespace(kube): the pod's own namespace in a cluster.
  std::string lease_namespace;
  std::string lease_name = "pacer-controller";
  std::string identity;  // "" = host name + pid
  // The Lease's timing (kube/leader_election.h; client-go's defaults).
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  std::string bind_address = "0.0.0.0";
  int metrics_port = 8080;  // 0 = pick a free one
  int probe_port = 8081;
  ReconcilerOptions reconciler;
  PodTemplateOptions pods;
  // One scheduler pass over all TrainJobs decides admission and sizes
  // (reconcile/cluster_scheduler.h); off: each job is planned alone on the
  // GPUs free when it arrives (first come, first served).
  bool cluster_scheduling = true;
  // /healthz fails once the reconcile workers have work (a key ready or in
  // hand) and none has finished a reconcile for this long: a wedged worker
  // gets the process restarted. An idle queue is never a failure.
  std::chrono::steady_clock::duration reconcile_max_silence = std::chrono::minutes(5);
  ClusterSchedulerOptions scheduler;
  // For tests: called at the start of every scheduler pass, on the
  // scheduler's thread.
  std::function<void()> scheduler_pass_hook;
};

// The Lease's namespace when --leader-election-namespace is not given: the
// controller pod's own (its service account's namespace), so that a
// kustomize overlay that moves the Deployment and its Role moves the Lease
// too (a namespace fixed in the args stayed behind: 403 on the Lease, and
// nothing reconciled while the pods stayed Ready); outside a cluster,
// pacer-system.
std::string LeaseNamespace(const std::string& flag, const KubeConfig& kube);

class ControllerManager {
 public:
  enum class Exit { kStopped, kLostLeadership };

  explicit ControllerManager(ManagerOptions options);
  ~ControllerManager();  // Stop()s

  ControllerManager(const ControllerManager&) = delete;
  ControllerManager& operator=(const ControllerManager&) = delete;

  Status Start();
  void Stop();
  Exit Wait();  // until Stop() or lost leadership

  bool IsLeader() const;
  int metrics_port() const;
  int probe_port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_DAEMON_CONTROLLER_MANAGER_H_
