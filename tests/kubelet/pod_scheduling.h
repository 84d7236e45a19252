// Pod scheduling for the fake kubelet: the part of kube-scheduler Pacer's
// worker pods depend on. A pod fits a node when the node is Ready and
// schedulable, its nvidia.com/gpu.product label satisfies the pod's
// nodeSelector and required node affinity (operator In only), and its
// allocatable nvidia.com/gpu minus the GPUs of the non-terminated pods bound
// to it covers the pod's nvidia.com/gpu limits. Pure functions over the
// objects' JSON, so they are tested without processes or a server.
//
// Units: GPUs are device counts.
// Thread-safety: stateless; safe from any thread.
#ifndef PACER_TESTS_KUBELET_POD_SCHEDULING_H_
#define PACER_TESTS_KUBELET_POD_SCHEDULING_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pacer::testing {

inline constexpr char kGpuResource[] = "nvidia.com/gpu";
inline constexpr char kGpuProductLabel[] = "nvidia.com/gpu.product";

// A Kubernetes quantity of whole devices ("8", 8 or "8.0"); 0 when absent or
// unreadable.
int DeviceQuantity(const nlohmann::json& value);

// Sum of nvidia.com/gpu limits (requests when no limit) over the pod's containers.
int PodGpuRequest(const nlohmann::json& pod);

// Whether the pod is finished (phase Succeeded or Failed): its GPUs are free again.
bool PodTerminated(const nlohmann::json& pod);

// Whether the node's labels satisfy the pod's nodeSelector and
// requiredDuringSchedulingIgnoredDuringExecution node affinity (terms are
// ORed, expressions ANDed; operators In, NotIn, Exists, DoesNotExist).
bool NodeMatchesPod(const nlohmann::json& node, const nlohmann::json& pod);

// Ready=True and not spec.unschedulable.
bool NodeSchedulable(const nlohmann::json& node);

// GPUs in use per node name: the requests of every non-terminated pod with a
// spec.nodeName.
std::map<std::string, int> GpusInUse(const std::vector<nlohmann::json>& pods);

struct ScheduleDecision {
  std::optional<std::string> node;  // set when the pod fits somewhere
  std::string message;              // why not, as kube-scheduler words it
};

// Picks the node for `pod`: among the nodes that fit, the one with the fewest
// free GPUs left afterwards (bin packing, so big pods still find room), ties
// broken by name so the choice is deterministic.
ScheduleDecision ChooseNode(const nlohmann::json& pod, const std::vector<nlohmann::json>& nodes,
                            const std::map<std::string, int>& gpus_in_use);

}  // namespace pacer::testing

#endif  // PACER_TESTS_KUBELET_POD_SCHEDULING_H_
