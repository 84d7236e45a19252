// The Kubernetes objects of one launch: a headless Service that gives the
// workers stable DNS names (node 0's rank 0 is the rendezvous point) and one
// worker Pod per node of the plan. Pure: the PodLauncher creates them.
//
//   Service  <job>-workers            clusterIP None, selector pacer.dev/job
//   Pod      <job>-a<attempt>-n<node> hostname = its name, subdomain = the
//            Service, so MASTER_ADDR = <job>-a<a>-n0.<job>-workers.<ns>.svc
//
// Every pod: the env contract (reconcile/worker_env.h) plus the user's
// spec.worker.env; `nvidia.com/gpu` requests = limits = GPUs per node;
// required node affinity on the GPU product label for the plan's GPU type;
// owner reference to the TrainJob (controller, blockOwnerDeletion) so that
// deleting the job deletes its pods; the checkpoint volume
// (spec.checkpoint.volumeClaimName, else an emptyDir: no resume across pods);
// non-root, no privilege escalation, all capabilities dropped, read-only
// root file system; restartPolicy Never (the controller restarts jobs from
// their checkpoint, whole). Docs: docs/controller.md ("Worker pods").
//
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_DAEMON_WORKER_PODS_H_
#define PACER_CONTROLLER_DAEMON_WORKER_PODS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/node_inventory.h"  // kJobLabel
#include "reconcile/interfaces.h"

namespace pacer::controller {

inline constexpr const char* kAttemptLabel = "pacer.dev/attempt";
inline constexpr const char* kNodeRankLabel = "pacer.dev/node-rank";
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kLayoutAnnotation = "pacer.dev/layout";  // status.plan's JSON
inline constexpr const char* kNodesAnnotation = "pacer.dev/nodes";    // pods in the launch
// WorkerSpecHash of the spec the pod was launched with, and that launch's
// PACER_TOTAL_STEPS: the reconciler compares them with the current spec.
inline constexpr const char* kSpecHashAnnotation = "pacer.dev/spec-hash";
inline constexpr const char* kTotalStepsAnnotation = "pacer.dev/total-steps";
// When the launch's plan was made (RFC 3339; status.launchTime of the attempt).
inline constexpr const char* kLaunchTimeAnnotation = "pacer.dev/launch-time";

struct PodTemplateOptions {
  int rendezvous_port = 29500;
  int metrics_port = 9400;
  std::string checkpoint_mount = "/checkpoints";
  // Time for a SIGTERM'd worker to finish its step and write a checkpoint.
  int64_t termination_grace_seconds = 300;
  std::string service_account;  // "" = the namespace's default
  // The image of jobs whose spec.worker.image is empty: the worker image of
  // this release (docker/worker.Dockerfile).
  std::string default_worker_image = "ghcr.io/pacer-dev/pacer-worker:0.1.0";
  // Host CPU and memory each worker pod requests per GPU it holds (0: no
  // request). Without requests a pod is BestEffort, the first evicted under
  // node memory pressure, and a namespace whose ResourceQuota covers
  // requests.cpu or requests.memory refuses it. No limits: a checkpoint's
  // host staging may burst above the request. The memory also bounds the
  // pod's /dev/shm (NCCL's buffers), which is memory-backed.
  double cpu_per_gpu = 4;
  int64_t memory_per_gpu_gib = 16;
};

// The workers' headless Service: a DNS-1035 label (<= 63 characters, a
// letter first). Job names that are not one (dots, a digit first, too long)
// are rewritten with a hash of the whole name (worker_pods.cc, DnsLabelOf).
std::string WorkerServiceName(const std::string& job_name);
// A DNS-1123 label (<= 63 characters; also the pod's hostname): names with
// dots or too long are rewritten with a hash, as above.
std::string WorkerPodName(const std::string& job_name, int attempt, int node_rank);

nlohmann::json WorkerServiceObject(const LaunchSpec& launch, const PodTemplateOptions& options);
nlohmann::json WorkerPodObject(const LaunchSpec& launch, int node_rank,
                               const PodTemplateOptions& options);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_DAEMON_WORKER_PODS_H_
