#include "json_patch.h"

#include <string>

namespace pacer::testing {
namespace {

bool IsNamedObjectList(const nlohmann::json& list) {
  if (!list.is_array() || list.empty()) return false;
  for (const auto& item : list) {
    if (!item.is_object() || !item.contains("name")) return false;
  }
  return true;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

ApiError PatchError(const std::string& message) {
  return {422, "Invalid", "the JSON patch is invalid: " + message, "", "", ""};
}

}  // namespace

nlohmann::json MergePatch(nlohmann::json target, const nlohmann::json& patch) {
  if (!patch.is_object()) return patch;
  if (!target.is_object()) target = nlohmann::json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it->is_null()) {
      target.erase(it.key());
    } else {
      target[it.key()] = MergePatch(target.contains(it.key()) ? target[it.key()] : nullptr, *it);
    }
  }
  return target;
}

nlohmann::json StrategicMergePatch(nlohmann::json target, const nlohmann::json& patch) {
  if (!patch.is_object()) return patch;
  if (patch.value("$patch", "") == "replace") {
    nlohmann::json replaced = patch;
    replaced.erase("$patch");
    return replaced;
  }
  if (!target.is_object()) target = nlohmann::json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& key = it.key();
    if (key == "$patch" || key == "$retainKeys" || StartsWith(key, "$setElementOrder/")) continue;
    if (StartsWith(key, "$deleteFromPrimitiveList/")) {
      std::string field = key.substr(std::string("$deleteFromPrimitiveList/").size());
      if (target.contains(field) && target[field].is_array() && it->is_array()) {
        nlohmann::json kept = nlohmann::json::array();
        for (const auto& v : target[field]) {
          bool drop = false;
          for (const auto& d : *it) drop = drop || d == v;
          if (!drop) kept.push_back(v);
        }
        target[field] = kept;
      }
      continue;
    }
    if (it->is_null()) {
      target.erase(key);
      continue;
    }
    nlohmann::json current = target.contains(key) ? target[key] : nlohmann::json();
    if (it->is_array() && (IsNamedObjectList(*it) || IsNamedObjectList(current)) &&
        (current.is_array() || current.is_null())) {
      // Merge by name: patched elements update their namesake, new ones are
      // appended, "$patch": "delete" removes.
      nlohmann::json merged = current.is_array() ? current : nlohmann::json::array();
      for (const auto& element : *it) {
        if (!element.is_object() || !element.contains("name")) {
          merged.push_back(element);
          continue;
        }
        bool found = false;
        for (size_t i = 0; i < merged.size(); ++i) {
          if (merged[i].is_object() &&
              merged[i].value("name", nlohmann::json()) == element["name"]) {
            found = true;
            if (element.value("$patch", "") == "delete") {
              merged.erase(i);
            } else {
              merged[i] = StrategicMergePatch(merged[i], element);
            }
            break;
          }
        }
        if (!found && element.value("$patch", "") != "delete") {
          merged.push_back(StrategicMergePatch(nlohmann::json::object(), element));
        }
      }
      target[key] = merged;
    } else {
      target[key] = StrategicMergePatch(current, *it);
    }
  }
  return target;
}

ApiResult<nlohmann::json> JsonPatch(nlohmann::json target, const nlohmann::json& operations) {
  if (!operations.is_array()) return PatchError("expected an array of operations");
  for (const auto& op : operations) {
    if (!op.is_object() || !op.contains("op") || !op.contains("path") || !op["op"].is_string() ||
        !op["path"].is_string()) {
      return PatchError("each operation needs \"op\" and \"path\" strings, got " + op.dump());
    }
    const std::string kind = op["op"].get<std::string>();
    try {
      nlohmann::json::json_pointer path(op["path"].get<std::string>());
      if (kind == "add") {
        if (!op.contains("value")) return PatchError("add needs a value");
        // nlohmann's patch() implements RFC 6902 "add" (array "-" and insert).
        target = target.patch(nlohmann::json::array({op}));
      } else if (kind == "remove") {
        if (!target.contains(path)) {
          return PatchError("remove: path " + op["path"].get<std::string>() + " does not exist");
        }
        target = target.patch(nlohmann::json::array({op}));
      } else if (kind == "replace") {
        if (!op.contains("value")) return PatchError("replace needs a value");
        if (!target.contains(path)) {
          return PatchError("replace: path " + op["path"].get<std::string>() + " does not exist");
        }
        target[path] = op["value"];
      } else if (kind == "test") {
        if (!target.contains(path) || target[path] != op.value("value", nlohmann::json())) {
          return PatchError("test failed: " + op["path"].get<std::string>() + " is not " +
                            op.value("value", nlohmann::json()).dump());
        }
      } else if (kind == "move" || kind == "copy") {
        target = target.patch(nlohmann::json::array({op}));
      } else {
        return PatchError("unknown op \"" + kind + "\"");
      }
    } catch (const nlohmann::json::exception& e) {
      return PatchError(std::string(kind) + " " + op["path"].get<std::string>() + ": " + e.what());
    }
  }
  return target;
}

}  // namespace pacer::testing
