// ResourceTable: the kinds of object the test API server serves (group,
// version, kind, plural, scope, status subresource, printer columns), the
// built-in set, CustomResourceDefinition registration, and the parsing of
// API paths ("/apis/pacer.dev/v1alpha1/namespaces/ns/trainjobs/j/status")
// into a resource and an object.
//
// Thread-safety: not synchronized; the object store guards its table with
// its own mutex.
#ifndef PACER_TESTS_SUPPORT_RESOURCE_TABLE_H_
#define PACER_TESTS_SUPPORT_RESOURCE_TABLE_H_

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pacer::testing {

struct PrinterColumn {
  std::string name;       // "PHASE"
  std::string type;       // "string", "integer", "number", "boolean", "date"
  std::string json_path;  // ".status.phase" (simple dotted paths)
  std::string description;
  int priority = 0;
};

struct ResourceInfo {
  std::string group;  // "" for the core group
  std::string version;
  std::string kind;
  std::string plural;
  std::string singular;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;  // `kubectl get <category>` lists these resources
  bool namespaced = true;
  bool has_status = false;
  // Empty: the default columns (NAME, AGE, and a few kind-specific ones).
  std::vector<PrinterColumn> printer_columns;
  // The served version's openAPIV3Schema (schema_validation.h): objects are
  // pruned, defaulted and validated against it. Null: anything goes (the
  // built-in resources, whose schemas this server does not know).
  nlohmann::json schema;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // The store's key for this resource: "pacer.dev/trainjobs".
  std::string key() const { return group + "/" + plural; }
};

// A parsed request path.
struct ApiPath {
  std::shared_ptr<const ResourceInfo> resource;
  std::string namespace_name;  // empty for cluster-scoped or all-namespaces
  std::string name;            // empty for a collection
  std::string subresource;     // "status" or empty
};

class ResourceTable {
 public:
  // The built-in resources (core, apps, rbac, coordination, apiextensions,
  // pacer.dev TrainJobs).
  ResourceTable();

  // Adds or replaces (same group and plural) a resource.
  void Register(ResourceInfo info);
  // Removes a resource registered from a CRD (group, plural); a built-in
  // resource the CRD replaced comes back.
  void Unregister(const std::string& group, const std::string& plural);

  std::shared_ptr<const ResourceInfo> Find(const std::string& group, const std::string& version,
                                           const std::string& plural) const;
  std::vector<std::shared_ptr<const ResourceInfo>> All() const;
  // By ResourceInfo::key() ("pacer.dev/trainjobs"); null when unknown.
  std::shared_ptr<const ResourceInfo> FindKey(const std::string& key) const;

  // Parses "/api/v1/..." or "/apis/G/V/...". nullopt when the path names no
  // known resource.
  std::optional<ApiPath> Parse(const std::string& path) const;

 private:
  std::map<std::string, std::shared_ptr<const ResourceInfo>> by_key_;  // group/plural
  std::map<std::string, std::shared_ptr<const ResourceInfo>> builtin_;
};

// The ResourceInfo a CustomResourceDefinition describes (its first served
// version, with that version's schema). nullopt when the CRD lacks group,
// names.plural or names.kind.
std::optional<ResourceInfo> ResourceFromCrd(const nlohmann::json& crd);

// TrainJob's printer columns, the same as the CRD in the Helm chart.
std::vector<PrinterColumn> TrainJobPrinterColumns();

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_RESOURCE_TABLE_H_
