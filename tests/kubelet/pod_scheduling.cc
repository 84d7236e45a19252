#include "pod_scheduling.h"

#include <cmath>
#include <set>

namespace pacer::testing {
namespace {

using nlohmann::json;

const json* Field(const json& object, std::initializer_list<const char*> path) {
  const json* at = &object;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string StringField(const json& object, std::initializer_list<const char*> path) {
  const json* v = Field(object, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

bool ExpressionHolds(const json& labels, const json& expression) {
  const std::string key = expression.value("key", "");
  const std::string op = expression.value("operator", "");
  const bool has = labels.is_object() && labels.contains(key) && labels[key].is_string();
  const std::string value = has ? labels[key].get<std::string>() : "";
  std::set<std::string> values;
  if (const json* v = Field(expression, {"values"}); v != nullptr && v->is_array()) {
    for (const json& e : *v) {
      if (e.is_string()) values.insert(e.get<std::string>());
    }
  }
  if (op == "In") return has && values.count(value) > 0;
  if (op == "NotIn") return !has || values.count(value) == 0;
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  return false;  // Gt/Lt and unknown operators: never on our nodes
}

}  // namespace

int DeviceQuantity(const json& value) {
  if (value.is_number()) return static_cast<int>(std::floor(value.get<double>()));
  if (!value.is_string()) return 0;
  const std::string text = value.get<std::string>();
  try {
    size_t used = 0;
    const double n = std::stod(text, &used);
    if (used != text.size() || n < 0) return 0;
    return static_cast<int>(std::floor(n));
  } catch (const std::exception&) {
    return 0;
  }
}

int PodGpuRequest(const json& pod) {
  const json* containers = Field(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) return 0;
  int total = 0;
  for (const json& c : *containers) {
    const json* limit = Field(c, {"resources", "limits", kGpuResource});
    if (limit == nullptr) limit = Field(c, {"resources", "requests", kGpuResource});
    if (limit != nullptr) total += DeviceQuantity(*limit);
  }
  return total;
}

bool PodTerminated(const json& pod) {
  const std::string phase = StringField(pod, {"status", "phase"});
  return phase == "Succeeded" || phase == "Failed";
}

bool NodeMatchesPod(const json& node, const json& pod) {
  static const json kEmpty = json::object();
  const json* found = Field(node, {"metadata", "labels"});
  const json& labels = found != nullptr ? *found : kEmpty;
  if (const json* selector = Field(pod, {"spec", "nodeSelector"});
      selector != nullptr && selector->is_object()) {
    for (const auto& [key, value] : selector->items()) {
      if (!labels.contains(key) || labels[key] != value) return false;
    }
  }
  const json* terms =
      Field(pod, {"spec", "affinity", "nodeAffinity",
                  "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array() || terms->empty()) return true;
  for (const json& term : *terms) {
    const json* expressions = Field(term, {"matchExpressions"});
    if (expressions == nullptr || !expressions->is_array()) continue;
    bool all = true;
    for (const json& e : *expressions) all = all && ExpressionHolds(labels, e);
    if (all) return true;
  }
  return false;
}

bool NodeSchedulable(const json& node) {
  if (const json* u = Field(node, {"spec", "unschedulable"});
      u != nullptr && u->is_boolean() && u->get<bool>()) {
    return false;
  }
  const json* conditions = Field(node, {"status", "conditions"});
  if (conditions == nullptr || !conditions->is_array()) return false;
  for (const json& c : *conditions) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

std::map<std::string, int> GpusInUse(const std::vector<json>& pods) {
  std::map<std::string, int> used;
  for (const json& pod : pods) {
    const std::string node = StringField(pod, {"spec", "nodeName"});
    if (node.empty() || PodTerminated(pod)) continue;
    used[node] += PodGpuRequest(pod);
  }
  return used;
}

ScheduleDecision ChooseNode(const json& pod, const std::vector<json>& nodes,
                            const std::map<std::string, int>& gpus_in_use) {
  const int want = PodGpuRequest(pod);
  ScheduleDecision decision;
  int best_left = 0;
  int matching = 0, schedulable = 0;
  for (const json& node : nodes) {
    if (!NodeMatchesPod(node, pod)) continue;
    ++matching;
    if (!NodeSchedulable(node)) continue;
    ++schedulable;
    const std::string name = StringField(node, {"metadata", "name"});
    const json* allocatable = Field(node, {"status", "allocatable", kGpuResource});
    const int total = allocatable != nullptr ? DeviceQuantity(*allocatable) : 0;
    auto used = gpus_in_use.find(name);
    const int left = total - (used != gpus_in_use.end() ? used->second : 0) - want;
    if (left < 0) continue;
    if (!decision.node || left < best_left || (left == best_left && name < *decision.node)) {
      decision.node = name;
      best_left = left;
    }
  }
  if (decision.node) return decision;
  const std::string prefix = "0/" + std::to_string(nodes.size()) + " nodes are available: ";
  if (schedulable > 0) {
    decision.message = prefix + "insufficient " + kGpuResource;
  } else if (matching > 0) {
    decision.message =
        prefix + std::to_string(matching) + " node(s) were not ready or were unschedulable";
  } else {
    decision.message = prefix + std::to_string(nodes.size()) +
                       " node(s) didn't match Pod's node affinity/selector";
  }
  return decision;
}

}  // namespace pacer::testing
