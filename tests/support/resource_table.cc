#include "resource_table.h"

#include <algorithm>
#include <sstream>

#include "schema_validation.h"

namespace pacer::testing {
namespace {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

ResourceInfo Make(std::string group, std::string version, std::string kind, std::string plural,
                  std::string singular, std::vector<std::string> short_names, bool namespaced,
                  bool has_status) {
  ResourceInfo info;
  info.group = std::move(group);
  info.version = std::move(version);
  info.kind = std::move(kind);
  info.plural = std::move(plural);
  info.singular = std::move(singular);
  info.short_names = std::move(short_names);
  info.namespaced = namespaced;
  info.has_status = has_status;
  return info;
}

}  // namespace

std::vector<PrinterColumn> TrainJobPrinterColumns() {
  return {
      {"Phase", "string", ".status.phase", "Where the job is in its life", 0},
      {"GPUs", "integer", ".status.plan.gpus", "GPUs in the plan in force", 0},
      {"Progress", "number", ".status.progress.percent", "Percent of steps done", 0},
      // A string, as in the CRD: a date column shows a future time as <invalid>.
      {"ETA", "string", ".status.projectedCompletionTime", "Projected completion", 0},
      // status.deadline: the effective deadline, also for maxDuration jobs.
      {"Deadline", "string", ".status.deadline", "The deadline", 0},
      {"Slack", "string", ".status.deadlineSlack", "Deadline minus projection", 0},
      {"Age", "date", ".metadata.creationTimestamp", "", 0},
  };
}

ResourceTable::ResourceTable() {
  Register(Make("", "v1", "Pod", "pods", "pod", {"po"}, true, true));
  Register(Make("", "v1", "Service", "services", "service", {"svc"}, true, true));
  Register(Make("", "v1", "Node", "nodes", "node", {"no"}, false, true));
  Register(Make("", "v1", "Event", "events", "event", {"ev"}, true, false));
  Register(Make("", "v1", "Namespace", "namespaces", "namespace", {"ns"}, false, true));
  Register(Make("", "v1", "ConfigMap", "configmaps", "configmap", {"cm"}, true, false));
  Register(
      Make("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", {"sa"}, true, false));
  Register(Make("", "v1", "Secret", "secrets", "secret", {}, true, false));
  // Pod creation is admitted against these (pod_admission.h).
  Register(Make("", "v1", "ResourceQuota", "resourcequotas", "resourcequota", {"quota"}, true,
                true));
  Register(Make("coordination.k8s.io", "v1", "Lease", "leases", "lease", {}, true, false));
  Register(Make("apps", "v1", "Deployment", "deployments", "deployment", {"deploy"}, true, true));
  Register(Make("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", {}, true, false));
  Register(Make("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding", {},
                true, false));
  Register(Make("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", {},
                false, false));
  Register(Make("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings",
                "clusterrolebinding", {}, false, false));
  Register(Make("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                "customresourcedefinitions", "customresourcedefinition", {"crd", "crds"}, false,
                true));
  ResourceInfo trainjobs =
      Make("pacer.dev", "v1alpha1", "TrainJob", "trainjobs", "trainjob", {"tj"}, true, true);
  trainjobs.printer_columns = TrainJobPrinterColumns();
  Register(std::move(trainjobs));
  builtin_ = by_key_;
}

void ResourceTable::Register(ResourceInfo info) {
  std::string key = info.key();
  by_key_[key] = std::make_shared<const ResourceInfo>(std::move(info));
}

void ResourceTable::Unregister(const std::string& group, const std::string& plural) {
  const std::string key = group + "/" + plural;
  auto builtin = builtin_.find(key);
  if (builtin != builtin_.end()) {
    by_key_[key] = builtin->second;
  } else {
    by_key_.erase(key);
  }
}

std::shared_ptr<const ResourceInfo> ResourceTable::Find(const std::string& group,
                                                        const std::string& version,
                                                        const std::string& plural) const {
  auto it = by_key_.find(group + "/" + plural);
  if (it == by_key_.end() || it->second->version != version) return nullptr;
  return it->second;
}

std::shared_ptr<const ResourceInfo> ResourceTable::FindKey(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const ResourceInfo>> ResourceTable::All() const {
  std::vector<std::shared_ptr<const ResourceInfo>> all;
  for (const auto& [key, info] : by_key_) all.push_back(info);
  return all;
}

std::optional<ApiPath> ResourceTable::Parse(const std::string& path) const {
  std::vector<std::string> parts = SplitPath(path);
  std::string group;
  std::string version;
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(i), parts.end());
  if (rest.empty()) return std::nullopt;
  ApiPath out;
  // "namespaces/NS/PLURAL/..." names a namespaced resource; "namespaces/NS"
  // alone (or with "status") is the Namespace object itself.
  if (rest.size() >= 3 && rest[0] == "namespaces" && rest[2] != "status") {
    auto resource = Find(group, version, rest[2]);
    if (resource == nullptr || !resource->namespaced) return std::nullopt;
    out.resource = resource;
    out.namespace_name = rest[1];
    rest.erase(rest.begin(), rest.begin() + 3);
  } else {
    auto resource = Find(group, version, rest[0]);
    if (resource == nullptr) return std::nullopt;
    out.resource = resource;
    rest.erase(rest.begin());
  }
  if (!rest.empty()) {
    out.name = rest[0];
    if (rest.size() == 2) {
      out.subresource = rest[1];
      if (out.subresource != "status" || !out.resource->has_status) return std::nullopt;
    } else if (rest.size() > 2) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<ResourceInfo> ResourceFromCrd(const nlohmann::json& crd) {
  const nlohmann::json spec = crd.value("spec", nlohmann::json::object());
  const nlohmann::json names = spec.value("names", nlohmann::json::object());
  ResourceInfo info;
  info.group = spec.value("group", "");
  info.plural = names.value("plural", "");
  info.kind = names.value("kind", "");
  if (info.group.empty() || info.plural.empty() || info.kind.empty()) return std::nullopt;
  info.singular = names.value("singular", "");
  if (info.singular.empty()) {
    info.singular = info.kind;
    std::transform(info.singular.begin(), info.singular.end(), info.singular.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  for (const char* key : {"shortNames", "categories"}) {
    if (!names.contains(key) || !names[key].is_array()) continue;
    for (const auto& s : names[key]) {
      if (!s.is_string()) continue;
      (std::string(key) == "shortNames" ? info.short_names : info.categories)
          .push_back(s.get<std::string>());
    }
  }
  info.namespaced = spec.value("scope", "Namespaced") != "Cluster";
  const nlohmann::json versions = spec.value("versions", nlohmann::json::array());
  for (const auto& v : versions) {
    if (!v.is_object() || !v.value("served", true)) continue;
    info.version = v.value("name", "");
    info.schema = CrdVersionSchema(crd, info.version);
    if (v.contains("subresources") && v["subresources"].is_object()) {
      info.has_status = v["subresources"].contains("status");
    }
    if (v.contains("additionalPrinterColumns") && v["additionalPrinterColumns"].is_array()) {
      for (const auto& c : v["additionalPrinterColumns"]) {
        if (!c.is_object()) continue;
        PrinterColumn column;
        column.name = c.value("name", "");
        column.type = c.value("type", "string");
        column.json_path = c.value("jsonPath", "");
        column.description = c.value("description", "");
        column.priority = c.value("priority", 0);
        if (!column.name.empty() && !column.json_path.empty()) {
          info.printer_columns.push_back(std::move(column));
        }
      }
    }
    break;
  }
  if (info.version.empty()) return std::nullopt;
  return info;
}

}  // namespace pacer::testing
