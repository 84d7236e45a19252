#include "core/cache_transforms.h"

#include <initializer_list>
#include <string>
#include <utility>

namespace pacer::controller {
namespace {

using Json = nlohmann::json;

// Moves object[key] for each of `keys` into a new object; anything else is
// dropped. A non-object input becomes an empty object. (operator[] after
// contains(): iterators into a mutable json trip GCC's -Wnull-dereference.)
Json Keep(Json& object, std::initializer_list<const char*> keys) {
  Json kept = Json::object();
  if (!object.is_object()) return kept;
  for (const char* key : keys) {
    if (object.contains(key)) kept[key] = std::move(object[key]);
  }
  return kept;
}

// The same for every element of an array field (elements that are not
// objects are dropped; a field that is not an array is dropped).
void KeepInEach(Json& object, const char* array_key, std::initializer_list<const char*> keys) {
  if (!object.contains(array_key)) return;
  if (!object[array_key].is_array()) {
    object.erase(array_key);
    return;
  }
  Json kept = Json::array();
  for (Json& element : object[array_key]) {
    if (element.is_object()) kept.push_back(Keep(element, keys));
  }
  object[array_key] = std::move(kept);
}

Json TrimMetadata(Json& object) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return Json::object();
  Json& source = object["metadata"];
  // creationTimestamp: since when an unscheduled worker pod has waited
  // (ClusterInventory::unscheduled_trainjob_since, the gang-scheduling bound).
  Json metadata = Keep(source, {"name", "namespace", "uid", "resourceVersion", "generation",
                                "labels", "deletionTimestamp", "creationTimestamp"});
  // Owners' uids only: a pod of an earlier TrainJob of the same name (deleted
  // and re-created while its pods terminate) is told apart by them.
  if (source.contains("ownerReferences") && source["ownerReferences"].is_array()) {
    Json owners = Json::array();
    for (Json& owner : source["ownerReferences"]) {
      if (owner.is_object()) owners.push_back(Keep(owner, {"uid", "kind", "controller"}));
    }
    metadata["ownerReferences"] = std::move(owners);
  }
  if (source.contains("annotations") && source["annotations"].is_object()) {
    Json pacer = Json::object();
    for (auto& [key, value] : source["annotations"].items()) {
      if (key.rfind("pacer.dev/", 0) == 0) pacer[key] = std::move(value);
    }
    if (!pacer.empty()) metadata["annotations"] = std::move(pacer);
  }
  return metadata;
}

Json Section(Json& object, const char* key, std::initializer_list<const char*> keys) {
  if (!object.contains(key) || !object[key].is_object()) return Json::object();
  return Keep(object[key], keys);
}

}  // namespace

void TrimPodForCache(Json& pod) {
  if (!pod.is_object()) return;
  Json trimmed = {{"metadata", TrimMetadata(pod)}};
  // The node affinity says which GPU type an unscheduled worker pod waits
  // for (PodGpuClaimOf); without it every waiting pod competed with every
  // type, and with no creationTimestamp it never aged out of the fifo gate.
  Json spec = Section(pod, "spec", {"nodeName", "containers", "initContainers", "affinity"});
  if (spec.contains("affinity")) spec["affinity"] = Keep(spec["affinity"], {"nodeAffinity"});
  KeepInEach(spec, "containers", {"name", "resources"});
  KeepInEach(spec, "initContainers", {"name", "resources", "restartPolicy"});
  trimmed["spec"] = std::move(spec);
  Json status = Section(pod, "status", {"phase", "reason", "containerStatuses"});
  KeepInEach(status, "containerStatuses", {"name", "state"});
  trimmed["status"] = std::move(status);
  pod = std::move(trimmed);
}

void TrimNodeForCache(Json& node) {
  if (!node.is_object()) return;
  Json trimmed = {{"metadata", TrimMetadata(node)}};
  trimmed["spec"] = Section(node, "spec", {"unschedulable"});
  Json status = Section(node, "status", {"allocatable", "conditions"});
  KeepInEach(status, "conditions", {"type", "status"});
  trimmed["status"] = std::move(status);
  node = std::move(trimmed);
}

}  // namespace pacer::controller
