#include "object_store.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "json_patch.h"

namespace pacer::testing {
namespace {

using nlohmann::json;

const char kHex[] = "0123456789abcdef";

std::string HexEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::optional<std::string> HexDecode(const std::string& s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) {
    const char* hi = std::strchr(kHex, s[i]);
    const char* lo = std::strchr(kHex, s[i + 1]);
    if (hi == nullptr || lo == nullptr || *hi == '\0' || *lo == '\0') return std::nullopt;
    out += static_cast<char>(((hi - kHex) << 4) | (lo - kHex));
  }
  return out;
}

std::string VersionOf(const json& object) {
  const json* v = FieldAt(object, "metadata.resourceVersion");
  if (v == nullptr || v->is_null()) return "";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

bool HasFinalizers(const json& object) {
  const json* f = FieldAt(object, "metadata.finalizers");
  return f != nullptr && f->is_array() && !f->empty();
}

std::string EventLine(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

// The object without what generation does not count: metadata and status.
json SpecPart(json object) {
  if (object.is_object()) {
    object.erase("metadata");
    object.erase("status");
  }
  return object;
}

void EnsureMetadata(json& object) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) {
    object["metadata"] = json::object();
  }
}

// What kube-apiserver's decoder does to a custom object's body (or, for a
// patch, to the patched object) before anything else: prune what the schema
// does not declare (refusing the request for fieldValidation=Strict), drop
// non-nullable nulls, fill in defaults.
std::optional<ApiError> DecodeCustomObject(const ResourceInfo& r, json& object,
                                           const WriteOptions& options, bool patch) {
  if (r.schema.is_null() || !object.is_object()) return std::nullopt;
  const std::string before = patch ? object.dump() : "";
  const std::vector<std::string> unknown = PruneUnknownFields(object, r.schema);
  if (!unknown.empty() && options.field_validation == FieldValidation::kStrict) {
    std::string why = "strict decoding error: ";
    for (size_t i = 0; i < unknown.size(); ++i) {
      why += (i ? ", " : "") + std::string("unknown field ") + GoQuote(unknown[i]);
    }
    if (patch) {
      // The patch handler reports the patched object as an invalid "patch"
      // of no kind and no name.
      const std::string body = "Invalid value: " + GoQuote(before) + ": " + why;
      ApiError error(422, "Invalid", " \"\" is invalid: patch: " + body);
      error.causes.push_back(
          {{"reason", "FieldValueInvalid"}, {"message", body}, {"field", "patch"}});
      return error;
    }
    return ApiError(400, "BadRequest",
                    r.kind + " in version " + GoQuote(r.version) + " cannot be handled as a " +
                        r.kind + ": " + why);
  }
  if (options.field_validation == FieldValidation::kWarn && options.warnings != nullptr) {
    for (const std::string& path : unknown)
      options.warnings->push_back("unknown field " + GoQuote(path));
  }
  PruneNullsAndDefault(object, r.schema);
  return std::nullopt;
}

// The custom resource strategy's validation of a whole object: its name (on
// create) and its schema.
std::optional<ApiError> ValidateCustomObject(const ResourceInfo& r, const json& object,
                                             bool check_name) {
  if (r.schema.is_null()) return std::nullopt;
  const std::string name = FieldAsString(object, "metadata.name");
  std::vector<FieldError> errors;
  if (check_name) errors = ValidateObjectName(name);
  for (FieldError& e : ValidateObject(object, r.schema)) errors.push_back(std::move(e));
  if (errors.empty()) return std::nullopt;
  return InvalidFields(r.kind, r.group, name, errors);
}

std::optional<ApiError> ValidateCrd(const ResourceInfo& r, const json& crd,
                                    const std::string& name) {
  const std::vector<FieldError> errors = ValidateCustomResourceDefinition(crd);
  if (!errors.empty()) return InvalidFields(r.kind, r.group, name, errors);
  if (!ResourceFromCrd(crd)) {
    return Invalid(r.plural, r.group, name,
                   "spec.versions: Invalid value: \"\": no served version");
  }
  return std::nullopt;
}

}  // namespace

std::string Rfc3339Now() { return Rfc3339At(std::time(nullptr)); }

std::string Rfc3339At(std::time_t at) {
  std::tm tm{};
  gmtime_r(&at, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// --- Watcher -----------------------------------------------------------------

Watcher::Wake Watcher::Next(std::chrono::steady_clock::time_point deadline, std::string* line) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return dropped_ || !lines_.empty(); });
  if (dropped_) return Wake::kDropped;
  if (lines_.empty()) return Wake::kTimeout;
  *line = std::move(lines_.front());
  lines_.pop_front();
  return Wake::kLine;
}

std::optional<int64_t> Watcher::BookmarkVersion() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!lines_.empty()) return std::nullopt;
  return latest_version_;
}

void Watcher::Push(std::string line, int64_t resource_version) {
  std::lock_guard<std::mutex> lock(mu_);
  lines_.push_back(std::move(line));
  latest_version_ = std::max(latest_version_, resource_version);
  cv_.notify_one();
}

void Watcher::SeenVersion(int64_t resource_version) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_version_ = std::max(latest_version_, resource_version);
}

void Watcher::Drop() {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_ = true;
  cv_.notify_all();
}

// --- ObjectStore -------------------------------------------------------------

ObjectStore::ObjectStore(size_t history_limit)
    : history_limit_(history_limit), rng_(std::random_device{}()) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureNamespaceLocked("default");
}

std::optional<ApiPath> ObjectStore::Parse(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.Parse(path);
}

std::vector<std::shared_ptr<const ResourceInfo>> ObjectStore::Resources() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.All();
}

int64_t ObjectStore::CurrentVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::string ObjectStore::NewUid() {
  std::uniform_int_distribution<int> digit(0, 15);
  std::string uid;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) uid += '-';
    uid += kHex[digit(rng_)];
  }
  uid[14] = '4';                                                         // version 4
  uid[19] = kHex[8 + (std::uniform_int_distribution<int>(0, 3)(rng_))];  // RFC 4122 variant
  return uid;
}

std::string ObjectStore::RandomSuffix() {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string suffix;
  for (int i = 0; i < 5; ++i) suffix += kAlphabet[pick(rng_)];
  return suffix;
}

ApiResult<json> ObjectStore::Get(const ApiPath& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  const ResourceInfo& r = *path.resource;
  auto objects = objects_.find(r.key());
  if (objects != objects_.end()) {
    auto it = objects->second.find({path.namespace_name, path.name});
    if (it != objects->second.end()) return it->second;
  }
  return NotFound(r.plural, r.group, path.name);
}

ApiResult<json> ObjectStore::Create(const ApiPath& collection, json object, bool keep_status,
                                    const WriteOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  const ResourceInfo& r = *collection.resource;
  if (!object.is_object()) return BadRequest("the request body must be a JSON object");
  if (auto error = DecodeCustomObject(r, object, options, false)) return *error;
  EnsureMetadata(object);
  json& md = object["metadata"];
  std::string ns;
  if (r.namespaced) {
    const std::string body_ns = md.value("namespace", "");
    ns = collection.namespace_name;
    if (ns.empty()) ns = body_ns.empty() ? "default" : body_ns;
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequest("the namespace of the provided object (" + body_ns +
                        ") does not match the namespace sent on the request (" + ns + ")");
    }
    md["namespace"] = ns;
  } else {
    md.erase("namespace");
  }
  if (r.namespaced && !(r.group.empty() && r.plural == "namespaces")) {
    // Lenient where the real server refuses: a missing namespace is made
    // (tests need not create one first; kubectl checks that it exists).
    EnsureNamespaceLocked(ns);
  }
  Objects& objects = objects_[r.key()];
  std::string name = md.value("name", "");
  if (name.empty()) {
    const std::string prefix = md.value("generateName", "");
    if (prefix.empty()) {
      return Invalid(r.plural, r.group, "",
                     "metadata.name: Required value: name or generateName is required");
    }
    do {
      name = prefix + RandomSuffix();
    } while (objects.count({ns, name}) != 0);
    md["name"] = name;
  }
  if (objects.count({ns, name}) != 0) return AlreadyExists(r.plural, r.group, name);
  std::optional<ResourceInfo> crd_resource;
  if (r.kind == "CustomResourceDefinition") {
    if (auto error = ValidateCrd(r, object, name)) return *error;
    crd_resource = ResourceFromCrd(object);
  }
  object["apiVersion"] = r.api_version();
  object["kind"] = r.kind;
  if (r.has_status && !keep_status) object.erase("status");
  if (r.group.empty() && r.plural == "pods" && !FieldAt(object, "status.phase")) {
    object["status"]["phase"] = "Pending";
  }
  if (r.group.empty() && r.plural == "namespaces" && !FieldAt(object, "status.phase")) {
    object["status"]["phase"] = "Active";
  }
  if (crd_resource) {
    object["status"] = {
        {"acceptedNames", object["spec"]["names"]},
        {"conditions",
         {{{"type", "NamesAccepted"}, {"status", "True"}, {"reason", "NoConflicts"}},
          {{"type", "Established"}, {"status", "True"}, {"reason", "InitialNamesAccepted"}}}},
        {"storedVersions", {crd_resource->version}}};
  }
  if (auto error = ValidateCustomObject(r, object, true)) return *error;
  if (r.group.empty()) {
    const std::vector<FieldError> errors = ValidateCoreObjectNames(r.plural, object);
    if (!errors.empty()) return InvalidFields(r.kind, r.group, name, errors);
  }
  md.erase("deletionTimestamp");
  md.erase("deletionGracePeriodSeconds");
  md["uid"] = NewUid();
  md["creationTimestamp"] = Rfc3339Now();
  md["generation"] = 1;
  md["resourceVersion"] = std::to_string(++version_);
  objects[{ns, name}] = object;
  IndexOwners(r.key(), {ns, name}, object, true);
  if (crd_resource) table_.Register(*crd_resource);
  Emit(r.key(), ns, "ADDED", object, json());
  return object;
}

void ObjectStore::EnsureNamespaceLocked(const std::string& name) {
  Objects& namespaces = objects_["/namespaces"];
  if (namespaces.count({"", name}) != 0) return;
  json object = {{"apiVersion", "v1"},
                 {"kind", "Namespace"},
                 {"metadata",
                  {{"name", name},
                   {"uid", NewUid()},
                   {"creationTimestamp", Rfc3339Now()},
                   {"generation", 1},
                   {"labels", {{"kubernetes.io/metadata.name", name}}},
                   {"resourceVersion", std::to_string(++version_)}}},
                 {"spec", {{"finalizers", {"kubernetes"}}}},
                 {"status", {{"phase", "Active"}}}};
  namespaces[{"", name}] = object;
  uids_.insert(object["metadata"]["uid"].get<std::string>());
  Emit("/namespaces", "", "ADDED", object, json());
}

ApiResult<json> ObjectStore::Update(const ApiPath& path, json object, UpdateScope scope,
                                    const WriteOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto error = DecodeCustomObject(*path.resource, object, options, false)) return *error;
  return UpdateLocked(path, std::move(object), scope);
}

ApiResult<json> ObjectStore::Patch(const ApiPath& path, PatchType type, const json& patch,
                                   UpdateScope scope, const WriteOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  const ResourceInfo& r = *path.resource;
  const json* stored = FindLocked(path);
  if (stored == nullptr) return NotFound(r.plural, r.group, path.name);
  json current = *stored;
  // The stored version is the patch's base; a resourceVersion in the patch
  // itself is a precondition (kept by the merge and checked by the update).
  json patched;
  switch (type) {
    case PatchType::kMerge:
      patched = MergePatch(current, patch);
      break;
    case PatchType::kStrategicMerge:
      patched = StrategicMergePatch(current, patch);
      break;
    case PatchType::kJson: {
      ApiResult<json> result = JsonPatch(current, patch);
      if (!result.ok()) {
        ApiError error = result.error();
        error.name = path.name;
        error.kind = r.plural;
        error.group = r.group;
        return error;
      }
      patched = std::move(result.value());
      break;
    }
  }
  if (!patched.is_object()) return BadRequest("the patch must leave a JSON object");
  EnsureMetadata(patched);
  const json* patch_version = FieldAt(patch, "metadata.resourceVersion");
  if (type == PatchType::kJson || patch_version == nullptr) {
    patched["metadata"]["resourceVersion"] = VersionOf(current);
  }
  if (auto error = DecodeCustomObject(r, patched, options, true)) return *error;
  return UpdateLocked(path, std::move(patched), scope);
}

ApiResult<json> ObjectStore::UpdateLocked(const ApiPath& path, json object, UpdateScope scope) {
  const ResourceInfo& r = *path.resource;
  auto objects = objects_.find(r.key());
  if (objects == objects_.end()) return NotFound(r.plural, r.group, path.name);
  const ObjectKey key{path.namespace_name, path.name};
  auto it = objects->second.find(key);
  if (it == objects->second.end()) return NotFound(r.plural, r.group, path.name);
  const json& existing = it->second;
  if (!object.is_object()) return BadRequest("the request body must be a JSON object");
  EnsureMetadata(object);
  const std::string body_version = VersionOf(object);
  if (!body_version.empty() && body_version != VersionOf(existing)) {
    return Conflict(r.plural, r.group, path.name,
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again");
  }
  const std::string body_name = object["metadata"].value("name", "");
  if (!body_name.empty() && body_name != path.name) {
    return BadRequest("the name of the object (" + body_name +
                      ") does not match the name on the URL (" + path.name + ")");
  }
  json result;
  if (scope == UpdateScope::kStatus) {
    result = existing;
    if (object.contains("status")) {
      result["status"] = object["status"];
    } else {
      result.erase("status");
    }
  } else {
    result = std::move(object);
    if (scope == UpdateScope::kMain && r.has_status) {
      if (existing.contains("status")) {
        result["status"] = existing["status"];
      } else {
        result.erase("status");
      }
    }
    // Server-owned metadata survives whatever the client sent.
    const json& old_md = existing["metadata"];
    json& md = result["metadata"];
    for (const char* field : {"uid", "creationTimestamp", "name", "namespace", "generation",
                              "deletionTimestamp", "deletionGracePeriodSeconds"}) {
      if (old_md.contains(field)) {
        md[field] = old_md[field];
      } else {
        md.erase(field);
      }
    }
    md.erase("generateName");
    if (old_md.contains("generateName")) md["generateName"] = old_md["generateName"];
    result["apiVersion"] = r.api_version();
    result["kind"] = r.kind;
    if (SpecPart(result) != SpecPart(existing)) {
      md["generation"] = old_md.value("generation", int64_t{1}) + 1;
    }
  }
  if (r.kind == "CustomResourceDefinition") {
    if (auto error = ValidateCrd(r, result, path.name)) return *error;
  }
  if (auto error = ValidateCustomObject(r, result, false)) return *error;
  result["metadata"]["resourceVersion"] = VersionOf(existing);
  if (result == existing) return result;  // a no-op update changes nothing, emits nothing
  if (FieldAt(result, "metadata.deletionTimestamp") != nullptr && !HasFinalizers(result)) {
    // The last finalizer is gone: the deletion completes now.
    IndexOwners(r.key(), key, existing, false);
    it->second = result;
    IndexOwners(r.key(), key, result, true);
    RemoveLocked(r, key, false);
    result["metadata"]["resourceVersion"] = std::to_string(version_);
    return result;
  }
  json old = existing;
  result["metadata"]["resourceVersion"] = std::to_string(++version_);
  IndexOwners(r.key(), key, old, false);
  it->second = result;
  IndexOwners(r.key(), key, result, true);
  if (r.kind == "CustomResourceDefinition") OnCrdChange(result, false);
  Emit(r.key(), key.first, "MODIFIED", result, old);
  return result;
}

ApiResult<json> ObjectStore::Delete(const ApiPath& path, bool orphan) {
  std::lock_guard<std::mutex> lock(mu_);
  return DeleteLocked(*path.resource, {path.namespace_name, path.name}, orphan);
}

json* ObjectStore::FindLocked(const ApiPath& path) {
  auto objects = objects_.find(path.resource->key());
  if (objects == objects_.end()) return nullptr;
  auto it = objects->second.find({path.namespace_name, path.name});
  return it == objects->second.end() ? nullptr : &it->second;
}

ApiResult<json> ObjectStore::MarkTerminating(const ApiPath& path, int64_t grace_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  const ResourceInfo& r = *path.resource;
  json* object = FindLocked(path);
  if (object == nullptr) return NotFound(r.plural, r.group, path.name);
  if (FieldAt(*object, "metadata.deletionTimestamp") != nullptr) return *object;
  json old = *object;
  json& md = (*object)["metadata"];
  md["deletionTimestamp"] = Rfc3339At(std::time(nullptr) + static_cast<std::time_t>(grace_seconds));
  md["deletionGracePeriodSeconds"] = grace_seconds;
  md["resourceVersion"] = std::to_string(++version_);
  Emit(r.key(), path.namespace_name, "MODIFIED", *object, old);
  return *object;
}

ApiResult<json> ObjectStore::DeleteLocked(const ResourceInfo& r, const ObjectKey& key,
                                          bool orphan) {
  auto objects = objects_.find(r.key());
  if (objects == objects_.end()) return NotFound(r.plural, r.group, key.second);
  auto it = objects->second.find(key);
  if (it == objects->second.end()) return NotFound(r.plural, r.group, key.second);
  if (HasFinalizers(it->second)) {
    if (FieldAt(it->second, "metadata.deletionTimestamp") != nullptr) return it->second;
    json old = it->second;
    json& md = it->second["metadata"];
    md["deletionTimestamp"] = Rfc3339Now();
    md["deletionGracePeriodSeconds"] = 0;
    md["resourceVersion"] = std::to_string(++version_);
    Emit(r.key(), key.first, "MODIFIED", it->second, old);
    return it->second;
  }
  json last = it->second;
  RemoveLocked(r, key, orphan);
  last["metadata"]["resourceVersion"] = std::to_string(version_);
  return last;
}

void ObjectStore::RemoveLocked(const ResourceInfo& r, const ObjectKey& key, bool orphan) {
  Objects& objects = objects_[r.key()];
  auto it = objects.find(key);
  if (it == objects.end()) return;
  json object = std::move(it->second);
  objects.erase(it);
  IndexOwners(r.key(), key, object, false);
  object["metadata"]["resourceVersion"] = std::to_string(++version_);
  Emit(r.key(), key.first, "DELETED", object, object);
  const std::string uid = object["metadata"].value("uid", "");
  uids_.erase(uid);

  if (r.kind == "CustomResourceDefinition") OnCrdChange(object, true);
  if (r.group.empty() && r.plural == "namespaces") {
    // A namespace takes everything in it along.
    for (const auto& resource : table_.All()) {
      if (!resource->namespaced) continue;
      auto found = objects_.find(resource->key());
      if (found == objects_.end()) continue;
      std::vector<ObjectKey> inside;
      for (auto o = found->second.lower_bound({key.second, ""});
           o != found->second.end() && o->first.first == key.second; ++o) {
        inside.push_back(o->first);
      }
      for (const ObjectKey& k : inside) RemoveLocked(*resource, k, true);
    }
  }
  if (orphan) return;
  auto dependents = dependents_.find(uid);
  if (dependents == dependents_.end()) return;
  const std::set<Ref> refs = dependents->second;
  for (const Ref& ref : refs) {
    auto resource = table_.FindKey(ref.resource_key);
    if (resource == nullptr) continue;
    auto objs = objects_.find(ref.resource_key);
    if (objs == objects_.end()) continue;
    auto dependent = objs->second.find(ref.key);
    if (dependent == objs->second.end()) continue;
    // Like the garbage collector: a dependent goes when none of its owners
    // is left.
    bool owner_left = false;
    const json* owners = FieldAt(dependent->second, "metadata.ownerReferences");
    if (owners != nullptr && owners->is_array()) {
      for (const auto& owner : *owners) {
        if (owner.is_object() && uids_.count(owner.value("uid", "")) != 0) owner_left = true;
      }
    }
    if (!owner_left) DeleteLocked(*resource, ref.key, false);
  }
}

void ObjectStore::IndexOwners(const std::string& resource_key, const ObjectKey& key,
                              const json& object, bool add) {
  const std::string uid = FieldAsString(object, "metadata.uid");
  if (add && !uid.empty()) uids_.insert(uid);
  const json* owners = FieldAt(object, "metadata.ownerReferences");
  if (owners == nullptr || !owners->is_array()) return;
  for (const auto& owner : *owners) {
    if (!owner.is_object()) continue;
    const std::string owner_uid = owner.value("uid", "");
    if (owner_uid.empty()) continue;
    if (add) {
      dependents_[owner_uid].insert(Ref{resource_key, key});
    } else {
      auto it = dependents_.find(owner_uid);
      if (it == dependents_.end()) continue;
      it->second.erase(Ref{resource_key, key});
      if (it->second.empty()) dependents_.erase(it);
    }
  }
}

void ObjectStore::OnCrdChange(const json& crd, bool removed) {
  std::optional<ResourceInfo> info = ResourceFromCrd(crd);
  if (!info) return;
  if (!removed) {
    table_.Register(*info);
    return;
  }
  // Deleting a CRD deletes its objects.
  auto objects = objects_.find(info->key());
  if (objects != objects_.end()) {
    std::vector<ObjectKey> keys;
    for (const auto& [k, v] : objects->second) keys.push_back(k);
    for (const ObjectKey& k : keys) RemoveLocked(*info, k, false);
    objects_.erase(info->key());
  }
  table_.Unregister(info->group, info->plural);
}

void ObjectStore::Emit(const std::string& resource_key, const std::string& namespace_name,
                       const std::string& type, const json& object, const json& old_object) {
  if (history_limit_ == 0) {
    compacted_version_ = version_;
  } else {
    history_.push_back(HistoryEvent{version_, resource_key, namespace_name, type, object,
                                    type == "MODIFIED" ? old_object : json()});
    while (history_.size() > history_limit_) {
      compacted_version_ = history_.front().version;
      history_.pop_front();
    }
  }
  auto watchers = watchers_.find(resource_key);
  if (watchers == watchers_.end()) return;
  for (const auto& watcher : watchers->second) {
    if (!watcher->namespace_name().empty() && watcher->namespace_name() != namespace_name) {
      watcher->SeenVersion(version_);
      continue;
    }
    Deliver(*watcher, version_, type, object, type == "MODIFIED" ? old_object : json());
  }
}

void ObjectStore::Deliver(Watcher& watcher, int64_t version, const std::string& type,
                          const json& object, const json& old_object) {
  const bool now = watcher.Selects(object);
  const bool before = !old_object.is_null() && watcher.Selects(old_object);
  std::string sent;
  if (type == "MODIFIED") {
    // An object entering or leaving a selector's view is ADDED or DELETED
    // for that watcher.
    if (now && before) sent = "MODIFIED";
    if (now && !before) sent = "ADDED";
    if (!now && before) sent = "DELETED";
  } else if (now) {
    sent = type;
  }
  if (sent.empty()) {
    watcher.SeenVersion(version);
  } else {
    watcher.Push(EventLine(sent, object), version);
  }
}

ApiResult<json> ObjectStore::List(const ApiPath& collection, const ListOptions& options) const {
  std::lock_guard<std::mutex> lock(mu_);
  const ResourceInfo& r = *collection.resource;
  json items = json::array();
  json list = {{"kind", r.kind + "List"},
               {"apiVersion", r.api_version()},
               {"metadata", {{"resourceVersion", std::to_string(version_)}}}};
  auto objects = objects_.find(r.key());
  if (objects != objects_.end()) {
    const Objects& all = objects->second;
    Objects::const_iterator it = all.begin();
    if (!options.continue_token.empty()) {
      std::optional<std::string> decoded = HexDecode(options.continue_token);
      size_t sep = decoded ? decoded->find('\x1f') : std::string::npos;
      if (sep == std::string::npos) {
        return BadRequest("continue key is not valid: \"" + options.continue_token +
                          "\"; pass metadata.continue from the previous page unchanged");
      }
      it = all.upper_bound({decoded->substr(0, sep), decoded->substr(sep + 1)});
    } else if (!collection.namespace_name.empty()) {
      it = all.lower_bound({collection.namespace_name, ""});
    }
    for (; it != all.end(); ++it) {
      if (!collection.namespace_name.empty() && it->first.first != collection.namespace_name) {
        break;
      }
      if (!options.labels.Matches(it->second) || !options.fields.Matches(it->second)) continue;
      if (options.limit > 0 && static_cast<int64_t>(items.size()) == options.limit) {
        // More match: the next page starts after the last item returned.
        const json& last_item = items.back();
        list["metadata"]["continue"] =
            HexEncode(FieldAsString(last_item, "metadata.namespace") + '\x1f' +
                      FieldAsString(last_item, "metadata.name"));
        break;
      }
      items.push_back(it->second);
    }
  }
  list["items"] = std::move(items);
  return list;
}

ApiResult<std::shared_ptr<Watcher>> ObjectStore::Watch(const ApiPath& collection, Selector labels,
                                                       Selector fields,
                                                       const std::string& resource_version) {
  std::lock_guard<std::mutex> lock(mu_);
  const ResourceInfo& r = *collection.resource;
  auto watcher = std::make_shared<Watcher>(r.key(), collection.namespace_name, std::move(labels),
                                           std::move(fields));
  if (resource_version.empty() || resource_version == "0") {
    auto objects = objects_.find(r.key());
    if (objects != objects_.end()) {
      for (const auto& [key, object] : objects->second) {
        if (!collection.namespace_name.empty() && key.first != collection.namespace_name) {
          continue;
        }
        if (watcher->Selects(object)) {
          watcher->Push(EventLine("ADDED", object), std::stoll(VersionOf(object)));
        }
      }
    }
  } else {
    int64_t from = 0;
    try {
      size_t used = 0;
      from = std::stoll(resource_version, &used);
      if (used != resource_version.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      return BadRequest("invalid resourceVersion \"" + resource_version +
                        "\": pass metadata.resourceVersion from a list or an event");
    }
    if (from < compacted_version_) {
      return ApiError{410,
                      "Expired",
                      "too old resource version: " + resource_version + " (" +
                          std::to_string(compacted_version_ + 1) + ")",
                      "",
                      "",
                      ""};
    }
    auto first = std::upper_bound(history_.begin(), history_.end(), from,
                                  [](int64_t v, const HistoryEvent& e) { return v < e.version; });
    for (auto e = first; e != history_.end(); ++e) {
      if (e->resource_key != r.key()) continue;
      if (!collection.namespace_name.empty() && e->namespace_name != collection.namespace_name) {
        continue;
      }
      Deliver(*watcher, e->version, e->type, e->object, e->old_object);
    }
  }
  watcher->SeenVersion(version_);
  watchers_[r.key()].push_back(watcher);
  return watcher;
}

void ObjectStore::Unwatch(const std::shared_ptr<Watcher>& watcher) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = watchers_.find(watcher->resource_key());
  if (it == watchers_.end()) return;
  it->second.remove(watcher);
  if (it->second.empty()) watchers_.erase(it);
}

void ObjectStore::DropWatches() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, list] : watchers_) {
    for (const auto& watcher : list) watcher->Drop();
  }
}

int ObjectStore::OpenWatchCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t count = 0;
  for (const auto& [key, list] : watchers_) count += list.size();
  return static_cast<int>(count);
}

void ObjectStore::CompactHistory() {
  std::lock_guard<std::mutex> lock(mu_);
  history_.clear();
  compacted_version_ = version_;
}

}  // namespace pacer::testing
