// The cluster inventory: pools of identical nodes, the GPUs free in each, and
// the GPU catalog the pools refer to. Read from a YAML/JSON file by the CLI
// (ParseInventory) and built from Kubernetes Nodes by the controller; both
// produce this same structure. Format in docs/inventory.md.
//
// Units: bandwidths in Gbit/s for node networks (as NICs are sold) and GB/s
// for NVLink (as GPU datasheets state it); prices per GPU-hour.
// Thread-safety: a plain value type.
#ifndef PACER_PLANNER_INVENTORY_H_
#define PACER_PLANNER_INVENTORY_H_

#include <map>
#include <string>
#include <vector>

#include "pacer/planner/gpu_catalog.h"
#include "pacer/status.h"

namespace pacer::planner {

// The most GPUs one node of a pool may have: past any real node, so a
// typo or a broken device plugin's count is refused, not searched over.
inline constexpr int kMaxGpusPerNode = 64;

struct NodePool {
  std::string name;
  std::string gpu_type;            // a catalog name (canonical spelling)
  int nodes = 0;                   // > 0
  int gpus_per_node = 0;           // > 0
  int free_gpus = 0;               // 0..nodes*gpus_per_node
  double network_gbps_per_node = 0;  // all NICs together, Gbit/s; > 0
  double nvlink_gbps = 0;          // bidirectional per GPU, GB/s; 0 = none
  double price_per_gpu_hour = 0;   // 0 = unknown
  // Free GPUs on each node (any order; `nodes` entries summing to free_gpus)
  // when they are known: the controller counts them from the pods on each
  // node. Empty when only the total is known (a pool file without
  // freeGPUsByNode).
  std::vector<int> free_gpus_by_node = {};

  // Nodes on which a worker with `gpus_per_worker` GPUs can start: those
  // with that many free, when free_gpus_by_node is known; else assuming the
  // scheduler packs free GPUs into whole nodes first: free whole nodes, plus
  // one partly free node if it has room.
  int NodesWithFreeGpus(int gpus_per_worker) const;

  // Every GPU free (what the pool could do if it were idle).
  void MarkAllFree();
};

struct Inventory {
  std::vector<NodePool> node_pools;
  GpuCatalog catalog = GpuCatalog::BuiltIn();
};

// Every GPU of each catalog type on the inventory's nodes, busy or free,
// keyed by the type's canonical name. Pools of a type the catalog lacks are
// left out.
std::map<std::string, int> GpusByType(const Inventory& inventory);

// The inventory used when the CLI gets no --cluster: documented in
// docs/inventory.md (one pool of each common datacenter GPU type, all free).
Inventory DefaultInventory();

// Parses an inventory document (YAML or JSON). Errors name the field path,
// e.g. "nodePools[1].gpusPerNode: must be a positive integer, got 0".
// Documents larger than kMaxDocumentBytes are refused.
StatusOr<Inventory> ParseInventory(const std::string& document);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_INVENTORY_H_
