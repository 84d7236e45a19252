// ObjectStore: the test API server's state. Objects by resource and
// namespace/name, one global resourceVersion counter, the watch history (for
// resuming watches), open watches, the owner-reference index for garbage
// collection, and the resource table (CustomResourceDefinitions add to it).
//
// Semantics follow the real API server where tests can see them: generation
// bumps only when something outside metadata and status changes; status
// subresources isolate .status; deletion with finalizers only marks the
// object; removing an object removes its dependents (background cascade).
//
// Thread-safety: every public method is thread-safe (one mutex). Watchers
// have their own mutex so that a slow watch stream never blocks the store.
#ifndef PACER_TESTS_SUPPORT_OBJECT_STORE_H_
#define PACER_TESTS_SUPPORT_OBJECT_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api_error.h"
#include "resource_table.h"
#include "schema_validation.h"
#include "selectors.h"

namespace pacer::testing {

// One open watch: the store pushes serialized event lines, the connection's
// thread pops and writes them.
class Watcher {
 public:
  Watcher(std::string resource_key, std::string namespace_name, Selector labels, Selector fields)
      : resource_key_(std::move(resource_key)),
        namespace_name_(std::move(namespace_name)),
        labels_(std::move(labels)),
        fields_(std::move(fields)) {}

  enum class Wake { kLine, kTimeout, kDropped };
  // Waits until a line is queued (moved into *line), the watch is dropped or
  // closed, or `deadline`.
  Wake Next(std::chrono::steady_clock::time_point deadline, std::string* line);
  // The resourceVersion a bookmark may carry now: every event up to it has
  // been handed out by Next(). nullopt while lines are still queued.
  std::optional<int64_t> BookmarkVersion();

  void Push(std::string line, int64_t resource_version);
  void SeenVersion(int64_t resource_version);
  void Drop();

  bool Selects(const nlohmann::json& object) const {
    return labels_.Matches(object) && fields_.Matches(object);
  }
  const std::string& resource_key() const { return resource_key_; }
  const std::string& namespace_name() const { return namespace_name_; }

 private:
  const std::string resource_key_;
  const std::string namespace_name_;  // empty: all namespaces
  const Selector labels_;
  const Selector fields_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> lines_;
  int64_t latest_version_ = 0;
  bool dropped_ = false;
};

struct ListOptions {
  Selector labels;
  Selector fields;
  int64_t limit = 0;  // 0: no limit
  std::string continue_token;
};

// What an update may change: the whole object (the kubelet's view, used by
// the test API), everything but .status (PUT/PATCH on a resource with a status
// subresource) or only .status (PUT/PATCH on .../status).
enum class UpdateScope { kAll, kMain, kStatus };

enum class PatchType { kMerge, kStrategicMerge, kJson };

// How a write to a resource with a schema (a CRD's) treats fields the schema
// does not declare: Strict refuses the write, Warn drops them and says so in
// `warnings` ("unknown field \"spec.foo\""), Ignore drops them silently.
// Resources without a schema keep every field.
struct WriteOptions {
  FieldValidation field_validation = FieldValidation::kStrict;
  std::vector<std::string>* warnings = nullptr;
};

class ObjectStore {
 public:
  explicit ObjectStore(size_t history_limit);

  std::optional<ApiPath> Parse(const std::string& path) const;
  std::vector<std::shared_ptr<const ResourceInfo>> Resources() const;
  int64_t CurrentVersion() const;

  ApiResult<nlohmann::json> Get(const ApiPath& path) const;
  // `keep_status`: the test API creates objects with status (as a kubelet
  // would); over HTTP a status subresource's .status is dropped on create.
  // Objects of a resource with a schema are pruned, defaulted and validated
  // (schema_validation.h); a CustomResourceDefinition must be structural.
  ApiResult<nlohmann::json> Create(const ApiPath& collection, nlohmann::json object,
                                   bool keep_status, const WriteOptions& options = {});
  ApiResult<nlohmann::json> Update(const ApiPath& path, nlohmann::json object, UpdateScope scope,
                                   const WriteOptions& options = {});
  ApiResult<nlohmann::json> Patch(const ApiPath& path, PatchType type, const nlohmann::json& patch,
                                  UpdateScope scope, const WriteOptions& options = {});
  // `orphan`: propagationPolicy=Orphan, dependents stay.
  ApiResult<nlohmann::json> Delete(const ApiPath& path, bool orphan);
  // Graceful deletion (a pod's): marks the object Terminating
  // (metadata.deletionTimestamp = now + grace, deletionGracePeriodSeconds)
  // and emits MODIFIED; the caller removes it with Delete once the grace
  // period is over. An object already Terminating is returned unchanged.
  ApiResult<nlohmann::json> MarkTerminating(const ApiPath& path, int64_t grace_seconds);
  // A "<Kind>List" with metadata.resourceVersion and, when limited,
  // metadata.continue.
  ApiResult<nlohmann::json> List(const ApiPath& collection, const ListOptions& options) const;

  // Registers a watch starting after `resource_version` ("" or "0": ADDED for
  // every current object first). 410 Expired when that version is older
  // than the retained history.
  ApiResult<std::shared_ptr<Watcher>> Watch(const ApiPath& collection, Selector labels,
                                            Selector fields, const std::string& resource_version);
  void Unwatch(const std::shared_ptr<Watcher>& watcher);
  void DropWatches();
  int OpenWatchCount() const;
  void CompactHistory();

 private:
  using ObjectKey = std::pair<std::string, std::string>;  // namespace, name
  using Objects = std::map<ObjectKey, nlohmann::json>;
  struct HistoryEvent {
    int64_t version;
    std::string resource_key;
    std::string namespace_name;
    std::string type;
    nlohmann::json object;
    nlohmann::json old_object;  // null for ADDED
  };
  struct Ref {
    std::string resource_key;
    ObjectKey key;
    bool operator<(const Ref& o) const {
      return std::tie(resource_key, key) < std::tie(o.resource_key, o.key);
    }
  };

  ApiResult<nlohmann::json> UpdateLocked(const ApiPath& path, nlohmann::json object,
                                         UpdateScope scope);
  // The stored object at `path`, or nullptr. Requires mu_.
  nlohmann::json* FindLocked(const ApiPath& path);
  ApiResult<nlohmann::json> DeleteLocked(const ResourceInfo& resource, const ObjectKey& key,
                                         bool orphan);
  // Removes the object now (DELETED), then its dependents.
  void RemoveLocked(const ResourceInfo& resource, const ObjectKey& key, bool orphan);
  void Emit(const std::string& resource_key, const std::string& namespace_name,
            const std::string& type, const nlohmann::json& object,
            const nlohmann::json& old_object);
  // Queues an event for one watcher, as it sees it through its selectors.
  static void Deliver(Watcher& watcher, int64_t version, const std::string& type,
                      const nlohmann::json& object, const nlohmann::json& old_object);
  void IndexOwners(const std::string& resource_key, const ObjectKey& key,
                   const nlohmann::json& object, bool add);
  void OnCrdChange(const nlohmann::json& crd, bool removed);
  // Creates the Namespace `name` unless it exists.
  void EnsureNamespaceLocked(const std::string& name);
  std::string NewUid();
  std::string RandomSuffix();

  mutable std::mutex mu_;
  ResourceTable table_;
  std::unordered_map<std::string, Objects> objects_;  // by resource key
  int64_t version_ = 0;
  const size_t history_limit_;
  std::deque<HistoryEvent> history_;
  int64_t compacted_version_ = 0;  // events at or below this are forgotten
  std::unordered_map<std::string, std::list<std::shared_ptr<Watcher>>> watchers_;
  std::unordered_map<std::string, std::set<Ref>> dependents_;  // owner uid -> objects
  std::set<std::string> uids_;                                 // of every stored object
  std::mt19937_64 rng_;
};

// RFC 3339 UTC, second precision: "2026-01-02T03:04:05Z".
std::string Rfc3339Now();
std::string Rfc3339At(std::time_t at);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_OBJECT_STORE_H_
