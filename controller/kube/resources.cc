#include "kube/resources.h"

#include "core/json_fields.h"

namespace pacer::controller {

std::string ResourceRef::ApiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string CollectionPath(const ResourceRef& resource, const std::string& namespace_name) {
  std::string path = resource.group.empty() ? "/api/" + resource.version
                                            : "/apis/" + resource.group + "/" + resource.version;
  if (resource.namespaced && !namespace_name.empty()) path += "/namespaces/" + namespace_name;
  return path + "/" + resource.plural;
}

std::string ObjectPath(const ResourceRef& resource, const std::string& namespace_name,
                       const std::string& name) {
  return CollectionPath(resource, namespace_name) + "/" + name;
}

std::string ObjectKey(const nlohmann::json& object) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  const std::string name = StringAt(*meta, "name");
  const std::string ns = StringAt(*meta, "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

}  // namespace pacer::controller
