// What the controller keeps of each Pod and Node in its informer caches
// (client-go's TransformFunc): only the fields it reads. A worker pod is ~5
// KiB of JSON text and a real Node carries its image list and much more;
// the caches hold every pod and node of the cluster, several times their
// text size as JSON DOMs. Kept:
//
//   both   metadata.name, namespace, uid, resourceVersion, labels,
//          deletionTimestamp, and the pacer.dev/* annotations
//   Pod    spec.nodeName; containers' and init containers' name, resources
//          and restartPolicy; status.phase, reason, and each container
//          status's name and state                (core/node_inventory.h,
//                                                  daemon/pod_launcher.cc)
//   Node   spec.unschedulable; status.allocatable; each condition's type
//          and status                             (core/node_inventory.h)
//
// A reader that needs another field must add it here (a test checks that
// the inventory from trimmed objects equals the inventory from whole ones).
//
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_CORE_CACHE_TRANSFORMS_H_
#define PACER_CONTROLLER_CORE_CACHE_TRANSFORMS_H_

#include <nlohmann/json.hpp>

namespace pacer::controller {

void TrimPodForCache(nlohmann::json& pod);
void TrimNodeForCache(nlohmann::json& node);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_CACHE_TRANSFORMS_H_
