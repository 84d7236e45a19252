#include "reconcile/worker_failure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "worker/core/exit_codes.h"  // the contract: pacer-worker's own exit codes

namespace pacer::controller {
namespace {

// Lower wins (worker_failure.h). A communication failure comes last: when a
// rank dies (a crash, a signal, the host's OOM killer, a lost pod) its peers
// fail with 3 or 4 waiting for it, and those are not their nodes' fault.
// A pod without an exit code comes after a clean stop: beside workers that
// stopped at a checkpoint nobody here asked for (a drain), it is a pod of
// the same drain whose status went with it, not a crash (the peers of a
// crashed rank fail with 3 or 4, they do not stop cleanly).
int Precedence(const std::optional<int>& code) {
  if (!code) return 6;  // the pod failed without an exit code (evicted, node lost)
  switch (*code) {
    case worker::kExitInvalidConfig: return 0;
    case worker::kExitDataLoss: return 1;
    case worker::kExitDeviceFault:
      return 2;
    case worker::kExitOutOfMemory:
      return 3;
    case worker::kExitStoppedAfterCheckpoint:
      return 5;
    case worker::kExitRendezvousTimeout:
    case worker::kExitCollectiveFailure:
      return 7;
    default:
      return 4;  // internal error, checkpoint failure, killed by a signal
  }
}

bool IsCommunication(const std::optional<int>& code) {
  return code == worker::kExitRendezvousTimeout || code == worker::kExitCollectiveFailure;
}

// Adds `node` to `excluded` (and to `action`'s newly excluded nodes) unless
// it is there already or the bounded status list is full.
void Exclude(const std::string& node, std::set<std::string>* excluded, FailureAction* action) {
  if (excluded->contains(node) || static_cast<int>(excluded->size()) >= kMaxTrackedNodes) return;
  excluded->insert(node);
  action->newly_excluded_nodes.push_back(node);
}

std::string JoinNodes(const std::vector<std::string>& nodes) {
  std::string joined;
  for (const std::string& n : nodes) joined += (joined.empty() ? "" : ", ") + n;
  return joined;
}

std::string Describe(const FailedWorker& w) {
  std::string why = "worker " + std::to_string(w.node_rank);
  if (!w.node_name.empty()) why += " on node " + w.node_name;
  why += " failed";
  if (w.exit_code) why += " with exit code " + std::to_string(*w.exit_code);
  if (!w.message.empty()) why += ": " + w.message;
  return why;
}

std::string Percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.0f%%", fraction * 100);
  return buffer;
}

}  // namespace

FailureAction DecideWorkerFailure(const std::vector<FailedWorker>& failed,
                                  const FailureHistory& history) {
  FailureAction action;
  action.history = history;
  if (failed.empty()) {
    action.reason = "WorkerFailed";
    action.message = "a worker failed";
    return action;
  }
  const FailedWorker& first = *std::min_element(
      failed.begin(), failed.end(), [](const FailedWorker& a, const FailedWorker& b) {
        return Precedence(a.exit_code) < Precedence(b.exit_code);
      });
  const std::string why = Describe(first);
  action.cause = why;
  const std::optional<int>& code = first.exit_code;

  if (code == worker::kExitInvalidConfig) {
    action.kind = FailureAction::Kind::kFail;
    action.counts_as_restart = false;
    action.reason = "InvalidWorkerConfig";
    action.message =
        why + "; the workers' configuration is invalid, so a restart would fail the same way";
    return action;
  }
  if (code == worker::kExitDataLoss) {
    action.kind = FailureAction::Kind::kFail;
    action.counts_as_restart = false;
    action.reason = "DataLoss";
    action.message = why +
                     "; checkpoints exist but none can be resumed from, and starting over would "
                     "discard the training done: inspect the checkpoint volume";
    return action;
  }
  if (code == worker::kExitDeviceFault) {
    // The GPU itself failed (an uncorrectable ECC or NVLink error): every
    // relaunch on it would fail the same way until someone resets or
    // replaces it, so its node is excluded at the first fault, not after
    // kStrikesToExclude as for a collective failure, which may be a peer's.
    action.reason = "DeviceFault";
    std::set<std::string> excluded(history.excluded_nodes.begin(), history.excluded_nodes.end());
    for (const FailedWorker& w : failed) {
      if (w.exit_code == worker::kExitDeviceFault && !w.node_name.empty()) {
        Exclude(w.node_name, &excluded, &action);
      }
    }
    action.history.excluded_nodes.assign(excluded.begin(), excluded.end());
    action.message = why + "; the GPU failed";
    if (!action.newly_excluded_nodes.empty()) {
      action.exclusion_cause = "a GPU fault there (worker exit code 9)";
      action.message += "; relaunching without node(s) " + JoinNodes(action.newly_excluded_nodes) +
                        " (the node's GPU needs a reset or a replacement)";
    } else {
      action.message += "; relaunching";
    }
    return action;
  }
  if (code == worker::kExitOutOfMemory) {
    const double before = history.memory_margin_fraction;
    const double after = std::min(kMaxMemoryMarginFraction, before + kMemoryMarginStepFraction);
    action.reason = "OutOfMemory";
    if (after > before + 1e-9) {
      action.kind = FailureAction::Kind::kReplanWithMoreMemory;
      action.history.memory_margin_fraction = std::round(after * 100) / 100;
      action.message = why + "; re-planning with " + Percent(action.history.memory_margin_fraction) +
                       " of GPU memory held back (was " + Percent(before) + ")";
    } else {
      action.message = why + "; the memory margin is already at its " +
                       Percent(kMaxMemoryMarginFraction) + " limit; relaunching";
    }
    return action;
  }
  if (IsCommunication(code)) {
    action.reason =
        code == worker::kExitRendezvousTimeout ? "RendezvousTimeout" : "CollectiveFailure";
    std::set<std::string> excluded(history.excluded_nodes.begin(), history.excluded_nodes.end());
    std::set<std::string> struck;
    for (const FailedWorker& w : failed) {
      if (!IsCommunication(w.exit_code) || w.node_name.empty()) continue;
      if (!struck.insert(w.node_name).second) continue;  // one strike per node and failure
      if (excluded.contains(w.node_name)) continue;
      auto& strikes = action.history.collective_failures_by_node;
      if (!strikes.contains(w.node_name) &&
          static_cast<int>(strikes.size()) >= kMaxTrackedNodes) {
        continue;  // bounded status; the list is already far beyond a useful size
      }
      const int count = ++strikes[w.node_name];
      if (count >= kStrikesToExclude) Exclude(w.node_name, &excluded, &action);
    }
    action.history.excluded_nodes.assign(excluded.begin(), excluded.end());
    action.message = why + "; relaunching";
    if (!action.newly_excluded_nodes.empty()) {
      action.exclusion_cause = std::to_string(kStrikesToExclude) + " communication failures";
      action.message += " without node(s) " + JoinNodes(action.newly_excluded_nodes) + " (" +
                        action.exclusion_cause + " each)";
    }
    return action;
  }
  if (code == worker::kExitStoppedAfterCheckpoint) {
    action.counts_as_restart = false;
    action.reason = "StoppedExternally";
    action.message = why +
                     " (stopped at a checkpoint without the controller asking: a node drain or "
                     "an eviction); relaunching without counting a restart";
    return action;
  }
  action.reason = "WorkerFailed";
  action.message = why + "; restarting from the last checkpoint";
  return action;
}

ClusterInventory WithoutNodes(const ClusterInventory& inventory,
                              const std::vector<std::string>& excluded) {
  if (excluded.empty()) return inventory;
  const std::set<std::string> out(excluded.begin(), excluded.end());
  ClusterInventory result = inventory;
  result.inventory.node_pools.clear();
  for (planner::NodePool pool : inventory.inventory.node_pools) {
    auto nodes = result.nodes_by_pool.find(pool.name);
    if (nodes != result.nodes_by_pool.end()) {
      std::vector<PoolNode> kept;
      for (const PoolNode& n : nodes->second) {
        if (!out.contains(n.name)) {
          kept.push_back(n);
          continue;
        }
        pool.nodes -= 1;
        pool.free_gpus = std::max(0, pool.free_gpus - n.free_gpus);
      }
      if (!pool.free_gpus_by_node.empty()) {
        pool.free_gpus_by_node.clear();
        for (const PoolNode& n : kept) pool.free_gpus_by_node.push_back(n.free_gpus);
      }
      nodes->second = std::move(kept);
      if (pool.nodes <= 0) {
        result.nodes_by_pool.erase(nodes);
        continue;
      }
      pool.free_gpus = std::min(pool.free_gpus, pool.nodes * pool.gpus_per_node);
    }
    result.inventory.node_pools.push_back(std::move(pool));
  }
  return result;
}

}  // namespace pacer::controller
