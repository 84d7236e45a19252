#include "core/inventory_tracker.h"

#include <utility>

namespace pacer::controller {

bool InventoryTracker::UpdateNode(const std::string& key, const nlohmann::json* node,
                                  std::vector<std::string>* new_warnings) {
  NodeEntry entry;
  if (node != nullptr) entry.capacity = NodeCapacityOf(*node, &entry.warnings);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_by_key_.find(key);
  if (node == nullptr) {
    if (it != nodes_by_key_.end()) {
      nodes_by_key_.erase(it);
      dirty_ = true;
    }
    return false;  // a node going away frees nothing
  }
  if (it != nodes_by_key_.end() && it->second.capacity == entry.capacity &&
      it->second.warnings == entry.warnings) {
    return false;  // a heartbeat, or a field the planner does not read
  }
  const bool capacity_changed = it == nodes_by_key_.end() ? entry.capacity.has_value()
                                                          : it->second.capacity != entry.capacity;
  if (new_warnings != nullptr &&
      (it == nodes_by_key_.end() || it->second.warnings != entry.warnings)) {
    *new_warnings = entry.warnings;
  }
  nodes_by_key_[key] = std::move(entry);
  dirty_ = true;
  return capacity_changed;
}

bool InventoryTracker::UpdatePod(const std::string& key, const nlohmann::json* pod) {
  std::optional<PodGpuClaim> claim;
  if (pod != nullptr) claim = PodGpuClaimOf(*pod);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = claims_by_pod_.find(key);
  const bool had = it != claims_by_pod_.end();
  if (had && claim && it->second == *claim) return false;  // status churn: same claim
  if (!had && !claim) return false;
  // A claim gone, moved or shrunk frees GPUs; an unscheduled worker bound to
  // a node frees none, but it is a launch landed, which jobs planned one
  // launch at a time (--scheduling=fifo) wait for.
  const bool released =
      had && (!claim || claim->node != it->second.node || claim->gpus < it->second.gpus);
  if (claim) {
    claims_by_pod_[key] = std::move(*claim);
  } else {
    claims_by_pod_.erase(it);
  }
  dirty_ = true;
  return released;
}

ClusterInventory InventoryTracker::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  if (dirty_ || !cached_) {
    std::vector<const NodeCapacity*> capacities;
    capacities.reserve(nodes_by_key_.size());
    std::vector<std::string> warnings;
    for (const auto& [key, entry] : nodes_by_key_) {
      if (entry.capacity) capacities.push_back(&*entry.capacity);
      warnings.insert(warnings.end(), entry.warnings.begin(), entry.warnings.end());
    }
    std::vector<const PodGpuClaim*> claims;
    claims.reserve(claims_by_pod_.size());
    for (const auto& [key, claim] : claims_by_pod_) claims.push_back(&claim);
    cached_ = AssembleInventory(capacities, claims, std::move(warnings));
    dirty_ = false;
    ++rebuilds_;
  }
  return *cached_;
}

int64_t InventoryTracker::rebuilds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rebuilds_;
}

}  // namespace pacer::controller
