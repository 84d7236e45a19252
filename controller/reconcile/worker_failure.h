// What the controller does when workers of a job fail: a pure function from
// the failed workers' exit codes (worker/core/exit_codes.h, documented in
// docs/worker.md) and the nodes they ran on to one action, so that each
// cause gets the remedy that can work instead of relaunching the same plan
// until the restarts run out.
//
//   2 invalid config          -> Failed (InvalidWorkerConfig): the same pods
//                                fail the same way; the worker's message says why
//   8 data loss               -> Failed (DataLoss): checkpoints exist but none
//                                is usable; a person must decide
//   5 out of memory           -> re-plan with a larger memory margin (+0.1 of
//                                GPU memory per OOM, at most 0.5), a restart
//   any other code (1, 7, a
//     signal's)               -> relaunch from the checkpoint, a restart
//   6 stopped after a
//     checkpoint, not asked   -> relaunch without counting a restart (a node
//                                drain or an eviction stopped it cleanly)
//   none (the pod failed
//     without an exit code)   -> relaunch from the checkpoint, a restart
//   3 rendezvous timeout,
//   4 collective failure      -> relaunch, a restart; each node whose worker
//                                failed so gets a strike, and a node with
//                                kStrikesToExclude strikes is excluded from
//                                the job's later plans and pods
//
// When workers failed for different causes, the first in the order of the
// table wins: a rank that dies (an OOM, a crash, a signal, a lost pod) makes
// its peers fail with 3 or 4 waiting for it, which is not their nodes' fault.
// Strikes go only to the nodes of workers that failed with 3 or 4 when no
// worker failed otherwise; the reconciler acts on the first failures it sees
// and removes the rest of the gang, so these are usually the first to fail,
// not the peers that timed out waiting for them.
//
// Units: fractions of GPU memory (0..1). Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_RECONCILE_WORKER_FAILURE_H_
#define PACER_CONTROLLER_RECONCILE_WORKER_FAILURE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/node_inventory.h"

namespace pacer::controller {

inline constexpr double kMemoryMarginStepFraction = 0.1;  // added per OOM
inline constexpr double kMaxMemoryMarginFraction = 0.5;
inline constexpr int kStrikesToExclude = 2;
// Bounds the status lists (the CRD's maxItems say the same).
inline constexpr int kMaxTrackedNodes = 64;

struct FailedWorker {
  int node_rank = 0;
  std::optional<int> exit_code;  // nullopt: the pod failed without one
  std::string node_name;         // "" when unknown (never scheduled, local mode)
  std::string message;           // the worker's or the kubelet's words
};

// What earlier failures left behind, kept in the TrainJob's status.
struct FailureHistory {
  double memory_margin_fraction = 0;                          // status.memoryMarginFraction
  std::map<std::string, int> collective_failures_by_node;     // status.collectiveFailuresByNode
  std::vector<std::string> excluded_nodes;                    // status.excludedNodes, sorted
  friend bool operator==(const FailureHistory&, const FailureHistory&) = default;
};

struct FailureAction {
  enum class Kind {
    kFail,                  // terminal: phase Failed, no retry
    kReplanWithMoreMemory,  // relaunch on a new plan planned with history.memory_margin_fraction
    kRelaunch,              // relaunch from the checkpoint (planned again)
  };
  Kind kind = Kind::kRelaunch;
  bool counts_as_restart = true;  // against ReconcilerOptions::max_restarts
  // The condition reason and the event reason: InvalidWorkerConfig, DataLoss,
  // DeviceFault, OutOfMemory, CollectiveFailure, RendezvousTimeout,
  // StoppedExternally, WorkerFailed.
  std::string reason;
  std::string message;  // for the event and the condition
  // What failed, without what is done about it ("worker 0 failed with exit
  // code 1: ..."): the message once the restarts are used up, which then
  // said "restarting from the last checkpoint" of a job that had failed.
  std::string cause;
  FailureHistory history;  // the history to persist (margin, strikes, exclusions)
  std::vector<std::string> newly_excluded_nodes;  // excluded by this failure
  // Why they were excluded, for their NodeExcluded events ("a GPU fault
  // there (worker exit code 9)"); empty when none was.
  std::string exclusion_cause;
};

// The action for `failed` (non-empty) given the job's `history`.
FailureAction DecideWorkerFailure(const std::vector<FailedWorker>& failed,
                                  const FailureHistory& history);

// `inventory` without the `excluded` nodes: each pool loses their GPUs
// (free and total), and a pool left with no node is dropped.
ClusterInventory WithoutNodes(const ClusterInventory& inventory,
                              const std::vector<std::string>& excluded);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_WORKER_FAILURE_H_
