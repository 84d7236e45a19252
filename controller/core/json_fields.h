// Read-only field lookups in Kubernetes objects of any shape: informer
// caches hold whatever the API server sent, and a field of an unexpected
// type must read as absent, never throw (nlohmann::json::value() throws on a
// type mismatch) and never copy (pods are ~5 KiB of JSON each).
//
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_CORE_JSON_FIELDS_H_
#define PACER_CONTROLLER_CORE_JSON_FIELDS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace pacer::controller {

// object[key], or nullptr when `object` is not an object or has no `key`.
inline const nlohmann::json* Member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it != object.end() ? &*it : nullptr;
}

// (*object)[key] when it is a string; "" otherwise (object may be nullptr).
inline std::string StringMember(const nlohmann::json* object, const char* key) {
  const nlohmann::json* value = object != nullptr ? Member(*object, key) : nullptr;
  return value != nullptr && value->is_string() ? value->get<std::string>() : "";
}

// object[key] when it is a string; "" otherwise (also when `object` is not
// an object).
inline std::string StringAt(const nlohmann::json& object, const char* key) {
  return StringMember(&object, key);
}

// object["metadata"] when it is an object; an empty object otherwise.
inline const nlohmann::json& MetadataOf(const nlohmann::json& object) {
  static const nlohmann::json* const kEmpty = new nlohmann::json(nlohmann::json::object());
  const nlohmann::json* metadata = Member(object, "metadata");
  return metadata != nullptr && metadata->is_object() ? *metadata : *kEmpty;
}

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_JSON_FIELDS_H_
