// The inventory document (docs/inventory.md) of a cluster read from its
// Nodes and Pods: what `pacer inventory` writes and `pacer plan --cluster`
// reads back. One pool per ClusterInventory pool, with the node count, GPUs
// per node, free GPUs (allocatable minus what running pods request; in all
// and on each node), network
// and, when known, NVLink and price. GPU types are catalog names, so no
// gpuTypes section is needed.
//
// Units: network Gbit/s per node, NVLink GB/s per GPU, prices per GPU-hour,
// as in the document format.
// Thread-safety: a pure function.
#ifndef PACER_CONTROLLER_CORE_INVENTORY_DOCUMENT_H_
#define PACER_CONTROLLER_CORE_INVENTORY_DOCUMENT_H_

#include <nlohmann/json.hpp>

#include "core/node_inventory.h"

namespace pacer::controller {

// {"nodePools": [{"name", "gpuType", "nodes", "gpusPerNode", "freeGPUs",
// "freeGPUsByNode"?, "networkGbpsPerNode", "nvlinkGBps"?, "pricePerGPUHour"?}]};
// freeGPUsByNode when the pool has one count per node; nvlinkGBps and
// pricePerGPUHour only when known (> 0), so the catalog's figures apply
// otherwise. planner::ParseInventory accepts it when there is at least one
// pool.
nlohmann::json InventoryDocument(const ClusterInventory& cluster);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_INVENTORY_DOCUMENT_H_
