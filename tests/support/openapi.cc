#include "openapi.h"

#include <functional>
#include <map>

namespace pacer::testing {
namespace {

using nlohmann::json;

std::string GroupVersionPath(const ResourceInfo& r) {
  return r.group.empty() ? "api/" + r.version : "apis/" + r.group + "/" + r.version;
}

json Document(const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
              const std::string& group_version) {
  json paths = json::object();
  for (const auto& r : resources) {
    if (GroupVersionPath(*r) != group_version) continue;
    const std::string base = "/" + group_version +
                             (r->namespaced ? "/namespaces/{namespace}/" : "/") + r->plural +
                             "/{name}";
    const json gvk = {{"group", r->group}, {"version", r->version}, {"kind", r->kind}};
    const json parameters = json::array(
        {{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
         {{"name", "name"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}}});
    // kubectl looks for fieldValidation among the operation's parameters.
    const json operation = {{"operationId", "patch" + r->kind},
                            {"parameters", parameters},
                            {"x-kubernetes-group-version-kind", gvk},
                            {"x-kubernetes-action", "patch"},
                            {"responses", {{"200", {{"description", "OK"}}}}}};
    paths[base] = {{"patch", operation}};
    if (r->has_status) paths[base + "/status"] = {{"patch", operation}};
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0-pacer-test"}}},
          {"paths", paths},
          {"components", {{"schemas", json::object()}}}};
}

}  // namespace

json OpenApiV3Root(const std::vector<std::shared_ptr<const ResourceInfo>>& resources) {
  std::map<std::string, bool> group_versions;
  for (const auto& r : resources) group_versions[GroupVersionPath(*r)] = true;
  json paths = json::object();
  for (const auto& [gv, unused] : group_versions) {
    // The hash changes with the document, so kubectl's cache never serves a
    // stale one after a CRD changes what is served.
    const size_t hash = std::hash<std::string>{}(Document(resources, gv).dump());
    paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv + "?hash=" + std::to_string(hash)}};
  }
  return {{"paths", paths}};
}

std::optional<json> OpenApiV3GroupVersion(
    const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
    const std::string& group_version) {
  json doc = Document(resources, group_version);
  if (doc["paths"].empty()) return std::nullopt;
  return doc;
}

}  // namespace pacer::testing
