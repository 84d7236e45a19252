// The cluster inventory kept up to date from watch events, for a controller
// that reads it on every reconcile: each Node's capacity and each Pod's GPU
// claim are parsed once when their object changes (node_inventory.h), and the
// inventory is reassembled from those small facts only after a change that
// alters a capacity or a claim. Pod status churn (phase, conditions, IPs) and
// node heartbeats leave it untouched, and nothing re-reads every object.
//
// The result equals BuildInventory() over the same objects (a test checks).
//
// Thread-safety: all methods are safe to call concurrently (one mutex).
#ifndef PACER_CONTROLLER_CORE_INVENTORY_TRACKER_H_
#define PACER_CONTROLLER_CORE_INVENTORY_TRACKER_H_

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/node_inventory.h"

namespace pacer::controller {

class InventoryTracker {
 public:
  // `node` / `pod` is the object's new state, or nullptr when it was deleted.
  // `key` identifies the object ("name" for nodes, "namespace/name" for pods).
  // Both return true when GPUs may have become free (a node's capacity
  // changed, or a pod's claim went away or shrank) or a TrainJob's worker
  // pod not scheduled yet was bound to a node (a launch landed): jobs
  // waiting for GPUs or for another launch are worth another look then,
  // and only then.
  // `new_warnings`, when given, receives the node's warnings (why it is
  // skipped, which annotation is ignored) when they differ from the last
  // ones, so that an operator hears about a node once, not on every event.
  bool UpdateNode(const std::string& key, const nlohmann::json* node,
                  std::vector<std::string>* new_warnings = nullptr);
  bool UpdatePod(const std::string& key, const nlohmann::json* pod);

  ClusterInventory Current();

  // Times Current() reassembled the inventory (a test checks that churn
  // which changes nothing costs nothing).
  int64_t rebuilds() const;

 private:
  struct NodeEntry {
    std::optional<NodeCapacity> capacity;
    std::vector<std::string> warnings;
  };

  mutable std::mutex mu_;
  std::map<std::string, NodeEntry> nodes_by_key_;
  std::unordered_map<std::string, PodGpuClaim> claims_by_pod_;
  bool dirty_ = true;
  std::optional<ClusterInventory> cached_;
  int64_t rebuilds_ = 0;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_INVENTORY_TRACKER_H_
