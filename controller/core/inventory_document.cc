#include "core/inventory_document.h"

namespace pacer::controller {

nlohmann::json InventoryDocument(const ClusterInventory& cluster) {
  nlohmann::json pools = nlohmann::json::array();
  for (const planner::NodePool& p : cluster.inventory.node_pools) {
    nlohmann::json pool = {
        {"name", p.name},          {"gpuType", p.gpu_type},
        {"nodes", p.nodes},        {"gpusPerNode", p.gpus_per_node},
        {"freeGPUs", p.free_gpus}, {"networkGbpsPerNode", p.network_gbps_per_node}};
    // Only a full list: the parser wants one count per node.
    if (static_cast<int>(p.free_gpus_by_node.size()) == p.nodes) {
      pool["freeGPUsByNode"] = p.free_gpus_by_node;
    }
    if (p.nvlink_gbps > 0) pool["nvlinkGBps"] = p.nvlink_gbps;
    if (p.price_per_gpu_hour > 0) pool["pricePerGPUHour"] = p.price_per_gpu_hour;
    pools.push_back(std::move(pool));
  }
  return {{"nodePools", std::move(pools)}};
}

}  // namespace pacer::controller
