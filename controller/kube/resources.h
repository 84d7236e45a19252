// The Kubernetes resources the controller reads and writes, and the REST
// paths that name them (/api/v1/namespaces/ns/pods/name,
// /apis/pacer.dev/v1alpha1/trainjobs, ...).
//
// Thread-safety: constants and pure functions.
#ifndef PACER_CONTROLLER_KUBE_RESOURCES_H_
#define PACER_CONTROLLER_KUBE_RESOURCES_H_

#include <nlohmann/json.hpp>
#include <string>

namespace pacer::controller {

// A resource type as the API server serves it. `group` is empty for the core
// group ("v1" resources under /api).
struct ResourceRef {
  std::string group;
  std::string version;
  std::string plural;
  std::string kind;
  bool namespaced = true;

  // "v1", "pacer.dev/v1alpha1": the apiVersion field of its objects.
  std::string ApiVersion() const;
};

inline const ResourceRef kTrainJobs{"pacer.dev", "v1alpha1", "trainjobs", "TrainJob", true};
inline const ResourceRef kPods{"", "v1", "pods", "Pod", true};
inline const ResourceRef kServices{"", "v1", "services", "Service", true};
inline const ResourceRef kNodes{"", "v1", "nodes", "Node", false};
inline const ResourceRef kEvents{"", "v1", "events", "Event", true};
inline const ResourceRef kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
inline const ResourceRef kResourceQuotas{"", "v1", "resourcequotas", "ResourceQuota", true};

// The collection: /api/v1/namespaces/ns/pods, or /api/v1/pods when
// `namespace_name` is empty (all namespaces) or the resource is cluster-scoped.
std::string CollectionPath(const ResourceRef& resource, const std::string& namespace_name);

// One object: CollectionPath(...) + "/" + name.
std::string ObjectPath(const ResourceRef& resource, const std::string& namespace_name,
                       const std::string& name);

// The cache key of an object: "namespace/name", or "name" when it has no
// namespace (cluster-scoped), as client-go's MetaNamespaceKeyFunc.
std::string ObjectKey(const nlohmann::json& object);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_RESOURCES_H_
