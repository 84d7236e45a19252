// The controller -> worker contract (docs/worker.md, "Environment"): the
// environment variables of one node's worker, from a launch. torchrun names
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, NNODES,
// MASTER_ADDR, MASTER_PORT and the PET_* forms) so a user's own PyTorch image
// works unchanged, plus PACER_* carrying the plan. The controller never links
// the worker: this file is the controller's side of the contract, and a test
// checks that pacer-worker's parser reads it back to the same plan.
//
// Units: seconds and bytes in the variable names.
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_RECONCILE_WORKER_ENV_H_
#define PACER_CONTROLLER_RECONCILE_WORKER_ENV_H_

#include <cstdint>
#include <map>
#include <string>

#include "reconcile/interfaces.h"

namespace pacer::controller {

struct WorkerEnvOptions {
  std::string master_addr = "127.0.0.1";  // where node 0's rank 0 listens
  int master_port = 29500;
  std::string checkpoint_dir;  // empty = no checkpoints
  int metrics_port = 9400;     // 0 = any free port (local mode)
  std::string backend;         // "", "cpu" or "gpu": PACER_BACKEND when set
  double scale = 1.0;          // PACER_SCALE when < 1 (shrunk CPU runs)
  // PACER_STOP_GRACE_SECONDS when > 0: what the worker leaves its ranks to
  // stop at a checkpoint (WorkerStopGraceSeconds of the pod's grace).
  int64_t stop_grace_seconds = 0;
};

// The worker's stop grace inside a pod's terminationGracePeriodSeconds: 10 %
// (at least 5 s) is left for the supervisor to see the ranks exit and write
// its exit code before the kubelet's SIGKILL; at least 1 s.
int64_t WorkerStopGraceSeconds(int64_t termination_grace_seconds);

// The environment of the worker on node `node_rank` (0 .. plan nodes - 1).
// RANK is the global rank of the node's local rank 0, as torchrun sets it for
// a launcher that supervises all local ranks.
std::map<std::string, std::string> WorkerEnvironment(const LaunchSpec& launch, int node_rank,
                                                     const WorkerEnvOptions& options);

// Optimizer steps in the whole job: ceil(total sequences / global batch).
int64_t TotalSteps(const planner::JobSpec& job);

// A fingerprint (16 hex digits, FNV-1a 64) of what a worker pod takes from
// the spec: TotalSteps(job), the global batch, precision, optimizer,
// attention kernel, the model's architecture and sequence length,
// worker.image, worker.command, worker.env (in order) and
// checkpoint.volumeClaimName. Not the deadline, objective, resources,
// parallelism pins, replan or checkpoint interval: they change the next plan,
// not what running workers compute. Pods carry it (pacer.dev/spec-hash) so
// the reconciler sees that an edit does not reach running workers.
// Stable across builds (no std::hash): a change to the canonical string
// stops every running job once after an upgrade, so a test pins it.
std::string WorkerSpecHash(const planner::JobSpec& job);

// Steps between checkpoints for the plan (its Young/Daly interval over its
// step time), at least 1; 0 when the plan has no interval.
int64_t CheckpointIntervalSteps(const planner::Evaluation& plan);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_WORKER_ENV_H_
