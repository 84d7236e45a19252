// The cluster inventory from Kubernetes objects: builds the planner's
// Inventory from the JSON of a NodeList and a PodList (as the API server
// returns them), without any network access. Rules (docs/controller.md,
// "Inventory from Nodes"):
//
//  - A node's GPU type comes from its `nvidia.com/gpu.product` label (set by
//    NVIDIA GPU feature discovery), mapped to a catalog name by
//    CatalogNameForProduct(); unknown products, MIG slices and shared
//    (time-sliced) GPUs are skipped with a warning.
//  - GPUs per node = allocatable `nvidia.com/gpu`. Nodes of one type with the
//    same GPU count, network, NVLink and price form one pool; nodes that differ
//    in any of these form separate pools.
//  - Free GPUs = allocatable minus the `nvidia.com/gpu` requests (limits when
//    no request is given) of the pods bound to the node (spec.nodeName) that
//    have not terminated (phase neither Succeeded nor Failed). Init
//    containers count as Kubernetes counts them (the larger of the largest
//    init container and the app containers plus sidecars).
//  - Cordoned (spec.unschedulable) and NotReady nodes are left out.
//  - The GPUs each TrainJob's worker pods hold (label `pacer.dev/job`, the
//    pod's namespace), by GPU type: what the cluster scheduler may give back
//    to the job, read from the pods themselves because a job's status lags
//    them (its plan is written after its pods start, and kept while they
//    stop at a checkpoint).
//  - Annotations override defaults: `pacer.dev/network-gbps` (the node's NICs
//    together, Gbit/s; default kDefaultNetworkGbpsPerGpu x GPUs),
//    `pacer.dev/nvlink-gbps` (GB/s bidirectional per GPU; default the
//    catalog's) and `pacer.dev/price-per-gpu-hour` (default unknown).
//
// Units: network Gbit/s per node, NVLink GB/s per GPU, prices per GPU-hour.
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_CORE_NODE_INVENTORY_H_
#define PACER_CONTROLLER_CORE_NODE_INVENTORY_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pacer/planner/inventory.h"
#include "pacer/status.h"

namespace pacer::controller {

inline constexpr const char* kGpuProductLabel = "nvidia.com/gpu.product";
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
inline constexpr const char* kNetworkGbpsAnnotation = "pacer.dev/network-gbps";
inline constexpr const char* kNvlinkGbpsAnnotation = "pacer.dev/nvlink-gbps";
inline constexpr const char* kPricePerGpuHourAnnotation = "pacer.dev/price-per-gpu-hour";
// On every worker pod: the name of its TrainJob (in the pod's namespace).
inline constexpr const char* kJobLabel = "pacer.dev/job";

// One 400 Gbit/s NIC per GPU: the rail-optimized fabric of DGX/HGX H100, H200
// and B200 systems (8 x ConnectX-7). Annotate nodes with slower fabrics.
inline constexpr double kDefaultNetworkGbpsPerGpu = 400;

// A node of a pool, for a launcher choosing where to place workers.
struct PoolNode {
  std::string name;
  int gpus = 0;       // allocatable
  int free_gpus = 0;  // allocatable minus requests of running pods
};

struct ClusterInventory {
  planner::Inventory inventory;  // pools named "<gpu-type>-<n>gpu[-<k>]", lower case
  std::map<std::string, std::vector<PoolNode>> nodes_by_pool;  // nodes sorted by name
  std::vector<std::string> warnings;  // nodes skipped and annotations ignored, and why
  // GPUs held by each TrainJob's pods on the usable nodes: "namespace/name"
  // -> catalog GPU type -> GPUs (included in the pools' used GPUs).
  std::map<std::string, std::map<std::string, int>> trainjob_gpus;
  // GPUs asked for by each TrainJob's worker pods that no node holds yet (not
  // scheduled): "namespace/name" -> catalog GPU type ("" when the pods name
  // no known product) -> GPUs. Not in any pool: which node they land on is
  // the cluster scheduler's choice. Planning against the free GPUs while
  // they are on their way would give the same GPUs out twice.
  std::map<std::string, std::map<std::string, int>> unscheduled_trainjob_gpus;
  // When the oldest of those pods was created, per TrainJob (Unix seconds;
  // absent when unknown): a pod unscheduled for long is no launch on its way.
  std::map<std::string, int64_t> unscheduled_trainjob_since;

  // GPUs of `gpu_type` (catalog name) the pods of TrainJob `key` hold.
  int TrainJobGpus(const std::string& key, const std::string& gpu_type) const;
};

// The catalog name for a GPU feature discovery product string
// ("NVIDIA-H100-80GB-HBM3" -> "H100-SXM"), case-insensitively; nullopt when
// the product is not in the table.
std::optional<std::string> CatalogNameForProduct(std::string_view product);

// The product label values that map to catalog name `gpu_type` (the
// inverse of CatalogNameForProduct), in the table's spelling; empty when none.
std::vector<std::string> ProductsForCatalogName(std::string_view gpu_type);

// What one usable GPU node contributes, parsed from its Node object.
struct NodeCapacity {
  std::string name;
  std::string gpu_type;  // catalog name
  int gpus = 0;          // allocatable
  double network_gbps = 0;
  double nvlink_gbps = 0;
  double price_per_gpu_hour = 0;
  bool operator==(const NodeCapacity&) const = default;
};

// nullopt when the node cannot take training pods (a CPU node, cordoned,
// NotReady, unknown or partitioned GPUs, no device plugin); the reason is
// appended to *warnings when an operator should see it.
std::optional<NodeCapacity> NodeCapacityOf(const nlohmann::json& node,
                                           std::vector<std::string>* warnings);

// The GPUs a pod holds on its node; nullopt when it holds none (terminated,
// no GPU request, or not scheduled yet and not a TrainJob's worker).
// A TrainJob worker pod the scheduler has not bound yet is a claim with an
// empty `node`: its GPUs are on their way to some node of `gpu_type`.
struct PodGpuClaim {
  std::string node;  // empty: a worker pod not scheduled yet
  int gpus = 0;
  std::string trainjob;  // "namespace/name" of a worker pod's TrainJob, else empty
  // Only for an unscheduled worker: the catalog type its node affinity asks
  // for (the nvidia.com/gpu.product values), empty when none is known; and
  // its creation time (Unix seconds; 0 when unknown).
  std::string gpu_type;
  int64_t created_unix_seconds = 0;
  bool operator==(const PodGpuClaim&) const = default;
};
std::optional<PodGpuClaim> PodGpuClaimOf(const nlohmann::json& pod);

// Groups usable nodes into pools and subtracts the GPUs pods hold. Lets a
// caller that keeps each NodeCapacity and PodGpuClaim up to date from watch
// events rebuild the inventory without re-reading every object.
ClusterInventory AssembleInventory(const std::vector<const NodeCapacity*>& nodes,
                                   const std::vector<const PodGpuClaim*>& claims,
                                   std::vector<std::string> warnings);

// NodeCapacityOf + PodGpuClaimOf + AssembleInventory over whole lists.
// Errors: InvalidArgument when either document is not a list (an object with
// an `items` array). Malformed individual nodes or pods are skipped with a
// warning, never an error.
StatusOr<ClusterInventory> BuildInventory(const nlohmann::json& node_list,
                                          const nlohmann::json& pod_list);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_NODE_INVENTORY_H_
