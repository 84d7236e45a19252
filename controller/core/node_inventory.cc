#include "core/node_inventory.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>

#include "core/json_fields.h"
#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

using Json = nlohmann::json;

struct ProductRow {
  const char* product;  // nvidia.com/gpu.product (NVML's name, spaces as dashes)
  const char* catalog_name;
};

// GPU feature discovery's product strings of the catalog's types. V100
// 16 GB and the PCIe A100s are left out: the catalog's V100 and A100 rows
// are the 32 GB and SXM parts, whose memory and bandwidth they lack.
constexpr ProductRow kProducts[] = {
    {"NVIDIA-A100-SXM4-40GB", "A100-40GB"},
    {"NVIDIA-A100-SXM4-80GB", "A100-80GB"},
    {"NVIDIA-H100-80GB-HBM3", "H100-SXM"},
    {"NVIDIA-H100-SXM5-80GB", "H100-SXM"},
    {"NVIDIA-H100-PCIe", "H100-PCIe"},
    {"NVIDIA-H100-NVL", "H100-NVL"},
    {"NVIDIA-H200", "H200"},
    {"NVIDIA-B200", "B200"},
    {"NVIDIA-L40S", "L40S"},
    {"Tesla-V100-SXM2-32GB", "V100-SXM2"},
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool ContainsIgnoreCase(std::string_view text, std::string_view part) {
  if (part.size() > text.size()) return false;
  for (size_t i = 0; i + part.size() <= text.size(); ++i) {
    if (EqualsIgnoreCase(text.substr(i, part.size()), part)) return true;
  }
  return false;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const Json* ObjectAt(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? &*it : nullptr;
}

// A Kubernetes quantity of whole devices ("8", or the number 8): any
// non-negative int64 in either form (the string form once took only an
// int, the integer form only up to a million). Callers bound it.
std::optional<int64_t> DeviceCount(const Json& quantity) {
  int64_t n = -1;
  if (quantity.is_number_integer()) {
    n = quantity.get<int64_t>();
  } else if (quantity.is_string()) {
    const std::string s = quantity.get<std::string>();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  }
  if (n < 0) return std::nullopt;
  return n;
}

// A positive number in an annotation; nullopt when absent, a warning when bad.
// The bounds a pool file's figures have (planner/src/inventory.cc): past
// them the cost model's times stop being finite.
constexpr double kMinAnnotatedBandwidth = 0.1;  // Gbit/s or GB/s
constexpr double kMaxAnnotatedValue = 1e6;      // bandwidth or price

std::optional<double> PositiveAnnotation(const Json* annotations, const char* key,
                                         const std::string& node,
                                         std::vector<std::string>* warnings, double min = 0) {
  if (annotations == nullptr) return std::nullopt;
  const std::string text = StringAt(*annotations, key);
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
      value <= 0) {
    warnings->push_back("node " + node + ": annotation " + key + "=\"" + text +
                        "\" is not a positive number; using the default");
    return std::nullopt;
  }
  if (value < min || value > kMaxAnnotatedValue) {
    char range[64];
    std::snprintf(range, sizeof range, "%g..%.0f", min, kMaxAnnotatedValue);
    warnings->push_back("node " + node + ": annotation " + key + "=\"" + text + "\" is outside " +
                        range + "; using the default");
    return std::nullopt;
  }
  return value;
}

// GPUs one container asks for: its request, or its limit when it has none.
int ContainerGpus(const Json& container) {
  const Json* resources = ObjectAt(container, "resources");
  if (resources == nullptr) return 0;
  for (const char* field : {"requests", "limits"}) {
    if (const Json* r = ObjectAt(*resources, field)) {
      auto it = r->find(kGpuResource);
      // No node holds a million: past that a count only overflows the sums.
      if (it != r->end()) {
        return static_cast<int>(std::min<int64_t>(DeviceCount(*it).value_or(0), 1'000'000));
      }
    }
  }
  return 0;
}

// The pod's effective request, as the scheduler computes it.
int PodGpus(const Json& spec) {
  int app = 0;
  if (auto it = spec.find("containers"); it != spec.end() && it->is_array()) {
    for (const Json& c : *it) app += ContainerGpus(c);
  }
  int init_max = 0;
  if (auto it = spec.find("initContainers"); it != spec.end() && it->is_array()) {
    for (const Json& c : *it) {
      if (StringAt(c, "restartPolicy") == "Always") {
        app += ContainerGpus(c);  // a sidecar runs beside the app containers
      } else {
        init_max = std::max(init_max, ContainerGpus(c));
      }
    }
  }
  return std::max(app, init_max);
}

bool IsReady(const Json& node) {
  const Json* status = ObjectAt(node, "status");
  if (status == nullptr) return false;
  auto it = status->find("conditions");
  if (it == status->end() || !it->is_array()) return false;
  for (const Json& c : *it) {
    if (StringAt(c, "type") == "Ready") return StringAt(c, "status") == "True";
  }
  return false;
}

Status CheckList(const Json& list, const char* what) {
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    return InvalidArgumentError(std::string(what) + ": expected a list with an items array");
  }
  return Status::Ok();
}

// Nodes that can share a pool: same type, GPU count, network, NVLink, price.
using PoolKey = std::tuple<std::string, int, double, double, double>;

}  // namespace

std::vector<std::string> ProductsForCatalogName(std::string_view gpu_type) {
  std::vector<std::string> products;
  for (const ProductRow& row : kProducts) {
    if (EqualsIgnoreCase(gpu_type, row.catalog_name)) products.emplace_back(row.product);
  }
  return products;
}

std::optional<std::string> CatalogNameForProduct(std::string_view product) {
  for (const ProductRow& row : kProducts) {
    if (EqualsIgnoreCase(product, row.product)) return std::string(row.catalog_name);
  }
  return std::nullopt;
}

std::optional<NodeCapacity> NodeCapacityOf(const nlohmann::json& node,
                                           std::vector<std::string>* warnings) {
  const Json* metadata = ObjectAt(node, "metadata");
  const std::string name = metadata != nullptr ? StringAt(*metadata, "name") : "";
  if (name.empty()) {
    warnings->push_back("a node without metadata.name was skipped");
    return std::nullopt;
  }
  const Json* labels = metadata->contains("labels") ? ObjectAt(*metadata, "labels") : nullptr;
  const std::string product = labels != nullptr ? StringAt(*labels, kGpuProductLabel) : "";
  const Json* status = ObjectAt(node, "status");
  const Json* allocatable = status != nullptr ? ObjectAt(*status, "allocatable") : nullptr;
  std::optional<int64_t> gpus;
  if (allocatable != nullptr && allocatable->contains(kGpuResource)) {
    gpus = DeviceCount((*allocatable)[kGpuResource]);
    if (!gpus) {
      warnings->push_back("node " + name + ": allocatable " + kGpuResource +
                          " is not a whole number; skipped");
      return std::nullopt;
    }
  }
  if (product.empty()) {
    if (gpus.value_or(0) > 0) {
      warnings->push_back("node " + name + ": " + std::to_string(*gpus) + " GPUs but no " +
                          kGpuProductLabel + " label (is GPU feature discovery running?); skipped");
    }
    return std::nullopt;  // a CPU node
  }
  if (ContainsIgnoreCase(product, "-MIG-") || ContainsIgnoreCase(product, "-SHARED")) {
    warnings->push_back("node " + name + ": GPU product \"" + product +
                        "\" is MIG-partitioned or shared; training needs whole GPUs; "
                        "skipped");
    return std::nullopt;
  }
  const std::optional<std::string> type = CatalogNameForProduct(product);
  if (!type) {
    warnings->push_back("node " + name + ": unknown GPU product \"" + product + "\"; skipped");
    return std::nullopt;
  }
  if (gpus.value_or(0) == 0) {
    warnings->push_back("node " + name + ": no allocatable " + kGpuResource +
                        " (is the device plugin running?); skipped");
    return std::nullopt;
  }
  if (*gpus > planner::kMaxGpusPerNode) {
    // The planner searches every per-node count of a pool: a broken device
    // plugin's 2e9 stalled each reconcile.
    warnings->push_back("node " + name + ": " + std::to_string(*gpus) + " allocatable " +
                        kGpuResource + ", more than a node pool allows (" +
                        std::to_string(planner::kMaxGpusPerNode) +
                        "; is the device plugin counting right?); skipped");
    return std::nullopt;
  }
  const Json* spec = ObjectAt(node, "spec");
  if (spec != nullptr && spec->contains("unschedulable") && (*spec)["unschedulable"].is_boolean() &&
      (*spec)["unschedulable"].get<bool>()) {
    return std::nullopt;  // cordoned
  }
  if (!IsReady(node)) return std::nullopt;

  const planner::GpuType* gpu = planner::GpuCatalog::BuiltIn().Find(*type);
  const Json* annotations =
      metadata->contains("annotations") ? ObjectAt(*metadata, "annotations") : nullptr;
  NodeCapacity capacity;
  capacity.name = name;
  capacity.gpu_type = *type;
  capacity.gpus = static_cast<int>(*gpus);  // at most kMaxGpusPerNode
  capacity.network_gbps = PositiveAnnotation(annotations, kNetworkGbpsAnnotation, name, warnings,
                                             kMinAnnotatedBandwidth)
                              .value_or(kDefaultNetworkGbpsPerGpu * capacity.gpus);
  capacity.nvlink_gbps =
      PositiveAnnotation(annotations, kNvlinkGbpsAnnotation, name, warnings, kMinAnnotatedBandwidth)
          .value_or(gpu != nullptr ? gpu->nvlink_gbps : 0);
  capacity.price_per_gpu_hour =
      PositiveAnnotation(annotations, kPricePerGpuHourAnnotation, name, warnings)
          .value_or(gpu != nullptr ? gpu->price_per_gpu_hour : 0);
  return capacity;
}

namespace {

// The catalog type a pod's required node affinity asks for: the first value
// of an `nvidia.com/gpu.product In (...)` expression that names a known
// product (worker_pods.cc writes one such expression); empty when none.
std::string AffinityGpuType(const Json& spec) {
  const Json* affinity = ObjectAt(spec, "affinity");
  const Json* node_affinity = affinity != nullptr ? ObjectAt(*affinity, "nodeAffinity") : nullptr;
  const Json* required =
      node_affinity != nullptr
          ? ObjectAt(*node_affinity, "requiredDuringSchedulingIgnoredDuringExecution")
          : nullptr;
  if (required == nullptr || !required->contains("nodeSelectorTerms") ||
      !(*required)["nodeSelectorTerms"].is_array()) {
    return "";
  }
  for (const Json& term : (*required)["nodeSelectorTerms"]) {
    if (!term.is_object() || !term.contains("matchExpressions") ||
        !term["matchExpressions"].is_array()) {
      continue;
    }
    for (const Json& expression : term["matchExpressions"]) {
      if (!expression.is_object() || StringAt(expression, "key") != kGpuProductLabel ||
          StringAt(expression, "operator") != "In" || !expression.contains("values") ||
          !expression["values"].is_array()) {
        continue;
      }
      for (const Json& value : expression["values"]) {
        if (!value.is_string()) continue;
        if (std::optional<std::string> type = CatalogNameForProduct(value.get<std::string>())) {
          return *type;
        }
      }
    }
  }
  return "";
}

}  // namespace

std::optional<PodGpuClaim> PodGpuClaimOf(const nlohmann::json& pod) {
  const Json* spec = ObjectAt(pod, "spec");
  if (spec == nullptr) return std::nullopt;
  std::string node = StringAt(*spec, "nodeName");
  const Json* status = ObjectAt(pod, "status");
  const std::string phase = status != nullptr ? StringAt(*status, "phase") : "";
  if (phase == "Succeeded" || phase == "Failed") return std::nullopt;
  const int gpus = PodGpus(*spec);
  if (gpus == 0) return std::nullopt;
  PodGpuClaim claim{std::move(node), gpus, "", ""};
  const Json* metadata = ObjectAt(pod, "metadata");
  const Json* labels =
      metadata != nullptr && metadata->contains("labels") ? ObjectAt(*metadata, "labels") : nullptr;
  const std::string job = labels != nullptr ? StringAt(*labels, kJobLabel) : "";
  const std::string ns = metadata != nullptr ? StringAt(*metadata, "namespace") : "";
  if (!job.empty() && !ns.empty()) claim.trainjob = ns + "/" + job;
  if (claim.node.empty()) {
    // Not scheduled yet: only a TrainJob's worker is worth remembering (its
    // GPUs are spoken for; see ClusterInventory::unscheduled_trainjob_gpus).
    if (claim.trainjob.empty()) return std::nullopt;
    claim.gpu_type = AffinityGpuType(*spec);
    if (StatusOr<int64_t> created = planner::ParseRfc3339(
            metadata != nullptr ? StringAt(*metadata, "creationTimestamp") : "");
        created.ok()) {
      claim.created_unix_seconds = *created;
    }
  }
  return claim;
}

int ClusterInventory::TrainJobGpus(const std::string& key, const std::string& gpu_type) const {
  auto job = trainjob_gpus.find(key);
  if (job == trainjob_gpus.end()) return 0;
  auto type = job->second.find(gpu_type);
  return type == job->second.end() ? 0 : type->second;
}

ClusterInventory AssembleInventory(const std::vector<const NodeCapacity*>& nodes,
                                   const std::vector<const PodGpuClaim*>& claims,
                                   std::vector<std::string> warnings) {
  ClusterInventory result;
  result.inventory.catalog = planner::GpuCatalog::BuiltIn();
  result.warnings = std::move(warnings);

  std::map<std::string, const NodeCapacity*> by_name;
  for (const NodeCapacity* node : nodes) by_name.emplace(node->name, node);
  std::map<std::string, int> used_gpus_by_node;
  for (const PodGpuClaim* claim : claims) {
    if (claim->node.empty()) {
      result.unscheduled_trainjob_gpus[claim->trainjob][claim->gpu_type] += claim->gpus;
      if (claim->created_unix_seconds != 0) {
        auto [since, added] = result.unscheduled_trainjob_since.try_emplace(
            claim->trainjob, claim->created_unix_seconds);
        if (!added) since->second = std::min(since->second, claim->created_unix_seconds);
      }
      continue;
    }
    used_gpus_by_node[claim->node] += claim->gpus;
    auto node = by_name.find(claim->node);
    // Pods on nodes left out (cordoned, NotReady, unknown GPUs) hold none of
    // the pools' GPUs.
    if (claim->trainjob.empty() || node == by_name.end()) continue;
    result.trainjob_gpus[claim->trainjob][node->second->gpu_type] += claim->gpus;
  }

  std::map<PoolKey, std::vector<PoolNode>> groups;
  for (const NodeCapacity* node : nodes) {
    auto used = used_gpus_by_node.find(node->name);
    const int used_gpus = used != used_gpus_by_node.end() ? used->second : 0;
    groups[PoolKey{node->gpu_type, node->gpus, node->network_gbps, node->nvlink_gbps,
                   node->price_per_gpu_hour}]
        .push_back(PoolNode{node->name, node->gpus, std::max(0, node->gpus - used_gpus)});
  }

  // Name pools "<type>-<n>gpu", with "-2", "-3", ... when several groups
  // share a type and GPU count (in key order: deterministic).
  std::map<std::string, int> name_uses;
  for (auto& [key, pool_nodes] : groups) {
    const auto& [type, gpus_per_node, network, nvlink, price] = key;
    std::string name = Lower(type) + "-" + std::to_string(gpus_per_node) + "gpu";
    const int uses = ++name_uses[name];
    if (uses > 1) name += "-" + std::to_string(uses);

    std::sort(pool_nodes.begin(), pool_nodes.end(),
              [](const PoolNode& a, const PoolNode& b) { return a.name < b.name; });
    planner::NodePool pool;
    pool.name = name;
    pool.gpu_type = type;
    pool.nodes = static_cast<int>(pool_nodes.size());
    pool.gpus_per_node = gpus_per_node;
    for (const PoolNode& n : pool_nodes) {
      pool.free_gpus += n.free_gpus;
      pool.free_gpus_by_node.push_back(n.free_gpus);
    }
    pool.network_gbps_per_node = network;
    pool.nvlink_gbps = nvlink;
    pool.price_per_gpu_hour = price;
    result.inventory.node_pools.push_back(std::move(pool));
    result.nodes_by_pool[name] = std::move(pool_nodes);
  }
  return result;
}

StatusOr<ClusterInventory> BuildInventory(const nlohmann::json& node_list,
                                          const nlohmann::json& pod_list) {
  RETURN_IF_ERROR(CheckList(node_list, "NodeList"));
  RETURN_IF_ERROR(CheckList(pod_list, "PodList"));
  std::vector<PodGpuClaim> claims;
  for (const Json& pod : pod_list["items"]) {
    if (std::optional<PodGpuClaim> claim = PodGpuClaimOf(pod)) claims.push_back(std::move(*claim));
  }
  std::vector<std::string> warnings;
  std::vector<NodeCapacity> capacities;
  for (const Json& node : node_list["items"]) {
    if (std::optional<NodeCapacity> c = NodeCapacityOf(node, &warnings)) {
      capacities.push_back(std::move(*c));
    }
  }
  std::vector<const NodeCapacity*> pointers;
  pointers.reserve(capacities.size());
  for (const NodeCapacity& c : capacities) pointers.push_back(&c);
  std::vector<const PodGpuClaim*> claim_pointers;
  claim_pointers.reserve(claims.size());
  for (const PodGpuClaim& c : claims) claim_pointers.push_back(&c);
  return AssembleInventory(pointers, claim_pointers, std::move(warnings));
}

}  // namespace pacer::controller
