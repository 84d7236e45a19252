#include "pacer/planner/inventory.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "text.h"
#include "yaml_fields.h"

namespace pacer::planner {
namespace {

using yaml_fields::Field;

// Limits beyond any real cluster, to catch typos and hostile input.
constexpr int kMaxNodesPerPool = 100000;
constexpr double kMaxTflops = 1e6;
constexpr double kMaxMemoryGb = 1e5;
constexpr double kMaxBandwidth = 1e6;  // GB/s or Gbit/s
constexpr double kMaxPrice = 1e6;
constexpr std::size_t kMaxGpuTypes = 1000;
constexpr std::size_t kMaxNodePools = 10000;

// Lower bounds keep every time the cost model computes finite and every
// completion time printable: 1e-300 TFLOP/s made a step take "forever".
constexpr double kMinTflops = 0.01;  // 10 GFLOP/s: less than one CPU core
constexpr double kMinMemoryGb = 1;
constexpr double kMinBandwidth = 0.1;  // GB/s or Gbit/s

// 0 (none), or a number in [min, max] (min 0: any non-negative number).
StatusOr<double> ZeroOrInRange(const Field& f, double min, double max) {
  StatusOr<double> value = f.Number();
  if (!value.ok() || *value < 0) return f.ErrorGot("must be a non-negative number");
  if (*value > 0 && *value < min) {
    return f.ErrorGot("must be 0 or at least " + yaml_fields::FormatNumber(min));
  }
  if (*value > max) return f.ErrorGot("must be at most " + yaml_fields::FormatNumber(max));
  return *value;
}

Status ApplyGpuType(const Field& f, std::set<std::string>* earlier_names, GpuCatalog* catalog) {
  RETURN_IF_ERROR(
      f.CheckMap({"name", "bf16TFLOPS", "fp16TFLOPS", "fp8TFLOPS", "tf32TFLOPS", "fp32TFLOPS",
                  "memoryGB", "hbmGBps", "nvlinkGBps", "pricePerGPUHour"}));
  const Field name_field = f.Get("name");
  if (!name_field.present()) return name_field.Error("required");
  ASSIGN_OR_RETURN(const std::string name, name_field.Name());
  if (!earlier_names->insert(text::Lowercase(name)).second) {
    return name_field.ErrorGot("defined more than once under gpuTypes");
  }

  const GpuType* existing = catalog->Find(name);
  GpuType gpu;
  if (existing != nullptr) {
    gpu = *existing;  // an override keeps what it does not give, and the canonical name
  } else {
    gpu.name = name;
    for (std::string_view key : {"memoryGB", "hbmGBps"}) {
      const Field required = f.Get(key);
      if (!required.present()) {
        return required.Error("required for a new GPU type (\"" + name +
                              "\" is not in the built-in catalog)");
      }
    }
    if (!f.Get("bf16TFLOPS").present() && !f.Get("fp16TFLOPS").present()) {
      return f.Error("a new GPU type (\"" + name + "\") needs bf16TFLOPS or fp16TFLOPS");
    }
  }

  const auto read_tflops = [&](std::string_view key, double* out) -> Status {
    if (const Field v = f.Get(key); v.present()) {
      ASSIGN_OR_RETURN(*out, ZeroOrInRange(v, kMinTflops, kMaxTflops));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(read_tflops("bf16TFLOPS", &gpu.bf16_tflops));
  RETURN_IF_ERROR(read_tflops("fp16TFLOPS", &gpu.fp16_tflops));
  RETURN_IF_ERROR(read_tflops("fp8TFLOPS", &gpu.fp8_tflops));
  RETURN_IF_ERROR(read_tflops("tf32TFLOPS", &gpu.tf32_tflops));
  RETURN_IF_ERROR(read_tflops("fp32TFLOPS", &gpu.fp32_tflops));
  // Every GPU with bf16 tensor cores runs fp16 at the same rate.
  if (existing == nullptr && !f.Get("fp16TFLOPS").present()) gpu.fp16_tflops = gpu.bf16_tflops;
  if (gpu.bf16_tflops <= 0 && gpu.fp16_tflops <= 0) {
    return f.Error("GPU type \"" + name + "\" needs a positive bf16TFLOPS or fp16TFLOPS");
  }
  if (const Field v = f.Get("memoryGB"); v.present()) {
    ASSIGN_OR_RETURN(gpu.memory_gb, yaml_fields::NumberInRange(v, kMinMemoryGb, kMaxMemoryGb));
    gpu.memory_mib = 0;  // a built-in entry's device MiB would win over the given GB
  }
  if (const Field v = f.Get("hbmGBps"); v.present()) {
    ASSIGN_OR_RETURN(gpu.hbm_gbps, yaml_fields::NumberInRange(v, kMinBandwidth, kMaxBandwidth));
  }
  if (const Field v = f.Get("nvlinkGBps"); v.present()) {
    ASSIGN_OR_RETURN(gpu.nvlink_gbps, ZeroOrInRange(v, kMinBandwidth, kMaxBandwidth));
  }
  if (const Field v = f.Get("pricePerGPUHour"); v.present()) {
    ASSIGN_OR_RETURN(gpu.price_per_gpu_hour, ZeroOrInRange(v, 0, kMaxPrice));
  }
  catalog->Upsert(std::move(gpu));
  return Status::Ok();
}

StatusOr<NodePool> ParsePool(const Field& f, const GpuCatalog& catalog) {
  RETURN_IF_ERROR(
      f.CheckMap({"name", "gpuType", "nodes", "gpusPerNode", "freeGPUs", "freeGPUsByNode",
                  "networkGbpsPerNode", "nvlinkGBps", "pricePerGPUHour"}));
  for (std::string_view key : {"name", "gpuType", "nodes", "gpusPerNode", "networkGbpsPerNode"}) {
    const Field required = f.Get(key);
    if (!required.present()) return required.Error("required");
  }
  NodePool pool;
  ASSIGN_OR_RETURN(pool.name, f.Get("name").Name());

  const Field type_field = f.Get("gpuType");
  ASSIGN_OR_RETURN(const std::string type_name, type_field.Name());
  const GpuType* gpu = catalog.Find(type_name);
  if (gpu == nullptr) {
    return type_field.Error("unknown GPU type " + text::QuoteForMessage(type_name) +
                            "; known types: " + catalog.NamesForMessage() +
                            "; add it under gpuTypes");
  }
  pool.gpu_type = gpu->name;
  pool.nvlink_gbps = gpu->nvlink_gbps;
  pool.price_per_gpu_hour = gpu->price_per_gpu_hour;

  ASSIGN_OR_RETURN(pool.nodes, f.Get("nodes").Int(1, kMaxNodesPerPool));
  ASSIGN_OR_RETURN(pool.gpus_per_node, f.Get("gpusPerNode").Int(1, kMaxGpusPerNode));
  const int total = pool.nodes * pool.gpus_per_node;
  pool.free_gpus = total;
  if (const Field free = f.Get("freeGPUs"); free.present()) {
    ASSIGN_OR_RETURN(pool.free_gpus, free.Int(0, INT32_MAX));
    if (pool.free_gpus > total) {
      return free.ErrorGot("must be at most nodes x gpusPerNode (" + std::to_string(total) + ")");
    }
  }
  if (const Field by_node = f.Get("freeGPUsByNode"); by_node.present()) {
    RETURN_IF_ERROR(by_node.CheckList(kMaxNodesPerPool));
    const std::vector<Field> entries = by_node.Elements();
    if (static_cast<int>(entries.size()) != pool.nodes) {
      return by_node.Error("must list one count per node: " + std::to_string(pool.nodes) +
                           " (nodes), got " + std::to_string(entries.size()));
    }
    int sum = 0;
    for (const Field& e : entries) {
      ASSIGN_OR_RETURN(const int free, e.Int(0, pool.gpus_per_node));
      pool.free_gpus_by_node.push_back(free);
      sum += free;
    }
    if (f.Get("freeGPUs").present() && sum != pool.free_gpus) {
      return by_node.Error("sums to " + std::to_string(sum) + " free GPUs, but freeGPUs is " +
                           std::to_string(pool.free_gpus) +
                           "; give one of them, or make them agree");
    }
    pool.free_gpus = sum;
  }
  ASSIGN_OR_RETURN(
      pool.network_gbps_per_node,
      yaml_fields::NumberInRange(f.Get("networkGbpsPerNode"), kMinBandwidth, kMaxBandwidth));
  if (const Field v = f.Get("nvlinkGBps"); v.present()) {
    ASSIGN_OR_RETURN(pool.nvlink_gbps, ZeroOrInRange(v, kMinBandwidth, kMaxBandwidth));
  }
  if (const Field v = f.Get("pricePerGPUHour"); v.present()) {
    ASSIGN_OR_RETURN(pool.price_per_gpu_hour, ZeroOrInRange(v, 0, kMaxPrice));
  }
  return pool;
}

StatusOr<Inventory> ParseInventoryDocument(const std::string& document) {
  ASSIGN_OR_RETURN(const YAML::Node root, yaml_fields::Load(document, "inventory"));
  const Field top(root, "");
  if (!top.is_map()) {
    return InvalidArgumentError(
        "inventory: expected a map with nodePools (and optionally "
        "gpuTypes), got " +
        top.Describe());
  }
  RETURN_IF_ERROR(top.CheckMap({"nodePools", "gpuTypes"}));

  Inventory inventory;
  // Types first, so that pools may use the types the file defines.
  if (const Field types = top.Get("gpuTypes"); types.present()) {
    RETURN_IF_ERROR(types.CheckList(kMaxGpuTypes));
    std::set<std::string> names;
    for (const Field& e : types.Elements()) {
      RETURN_IF_ERROR(ApplyGpuType(e, &names, &inventory.catalog));
    }
  }

  const Field pools = top.Get("nodePools");
  if (!pools.present()) return pools.Error("required: a list of node pools");
  RETURN_IF_ERROR(pools.CheckList(kMaxNodePools));
  const std::vector<Field> elements = pools.Elements();
  if (elements.empty()) return pools.Error("must list at least one node pool");
  std::map<std::string, std::size_t> pool_index;
  for (const Field& e : elements) {
    ASSIGN_OR_RETURN(NodePool pool, ParsePool(e, inventory.catalog));
    const auto [it, inserted] = pool_index.emplace(pool.name, inventory.node_pools.size());
    if (!inserted) {
      return e.Get("name").ErrorGot("duplicate pool name (also nodePools[" +
                                    std::to_string(it->second) + "])");
    }
    inventory.node_pools.push_back(std::move(pool));
  }
  return inventory;
}

}  // namespace

int NodePool::NodesWithFreeGpus(int gpus_per_worker) const {
  if (gpus_per_worker <= 0 || gpus_per_node <= 0 || gpus_per_worker > gpus_per_node) return 0;
  if (!free_gpus_by_node.empty()) {
    // Two nodes with half their GPUs free each hold two half-node workers,
    // not one whole-node worker.
    const auto count = std::count_if(free_gpus_by_node.begin(), free_gpus_by_node.end(),
                                     [&](int free) { return free >= gpus_per_worker; });
    return std::min(static_cast<int>(count), nodes);
  }
  int count = free_gpus / gpus_per_node;
  if (free_gpus % gpus_per_node >= gpus_per_worker) ++count;
  return std::min(count, nodes);
}

void NodePool::MarkAllFree() {
  free_gpus = nodes * gpus_per_node;
  free_gpus_by_node.clear();  // all free: the whole-node count above is exact
}

std::map<std::string, int> GpusByType(const Inventory& inventory) {
  std::map<std::string, int> type_gpus;
  for (const NodePool& pool : inventory.node_pools) {
    const GpuType* type = inventory.catalog.Find(pool.gpu_type);
    if (type == nullptr) continue;
    type_gpus[type->name] += pool.nodes * pool.gpus_per_node;
  }
  return type_gpus;
}

Inventory DefaultInventory() {
  Inventory inventory;
  struct PoolRow {
    const char* name;
    const char* gpu_type;
    int nodes;
    double network_gbps;
  };
  // One pool of each common datacenter GPU, 8 GPUs per node as HGX boards
  // have; H100/H200 nodes with 8 x 400 Gb/s NDR, A100 nodes with 8 x 200 HDR.
  static constexpr PoolRow kPools[] = {
      {"h100", "H100-SXM", 128, 3200},
      {"h200", "H200", 64, 3200},
      {"a100", "A100-80GB", 128, 1600},
  };
  for (const PoolRow& row : kPools) {
    const GpuType* gpu = inventory.catalog.Find(row.gpu_type);
    NodePool pool;
    pool.name = row.name;
    pool.gpu_type = gpu->name;
    pool.nodes = row.nodes;
    pool.gpus_per_node = 8;
    pool.free_gpus = pool.nodes * pool.gpus_per_node;
    pool.network_gbps_per_node = row.network_gbps;
    pool.nvlink_gbps = gpu->nvlink_gbps;
    pool.price_per_gpu_hour = 0;
    inventory.node_pools.push_back(std::move(pool));
  }
  return inventory;
}

StatusOr<Inventory> ParseInventory(const std::string& document) {
  return yaml_fields::Guard<Inventory>("inventory",
                                       [&] { return ParseInventoryDocument(document); });
}

}  // namespace pacer::planner
