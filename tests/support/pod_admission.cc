#include "pod_admission.h"

#include <charconv>
#include <map>

namespace pacer::testing {
namespace {

using nlohmann::json;

// object[key] when both are objects; {} otherwise (never throws on odd input).
json Obj(const json& object, const char* key) {
  if (!object.is_object()) return json::object();
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : json::object();
}

std::string Str(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string NameOf(const json& pod) {
  const json metadata = Obj(pod, "metadata");
  const std::string name = Str(metadata, "name");
  return name.empty() ? Str(metadata, "generateName") : name;
}

// A whole-number quantity ("8", 8); extended resources are whole numbers.
int64_t WholeQuantity(const json& q) {
  if (q.is_number_integer()) return q.get<int64_t>();
  if (!q.is_string()) return 0;
  const std::string s = q.get<std::string>();
  int64_t v = 0;
  (void)std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// What a pod holds of each quota resource name ("pods", "count/pods",
// "requests.nvidia.com/gpu"): its containers' requests, or their limits
// where an extended resource has no request (Kubernetes defaults it so).
std::map<std::string, int64_t> Usage(const json& pod) {
  std::map<std::string, int64_t> use{{"pods", 1}, {"count/pods", 1}};
  const json spec = Obj(pod, "spec");
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (const json& c : spec[list]) {
      const json resources = Obj(c, "resources");
      const json requests = Obj(resources, "requests");
      const json limits = Obj(resources, "limits");
      std::map<std::string, int64_t> mine;
      for (const json* source : {&limits, &requests}) {  // requests win over limits
        for (const auto& [name, q] : source->items()) {
          if (name.find('/') == std::string::npos) continue;  // extended resources only
          mine[name] = WholeQuantity(q);
        }
      }
      for (const auto& [name, n] : mine) use["requests." + name] += n;
    }
  }
  return use;
}

bool HoldsQuota(const json& pod) {
  const std::string phase = Str(Obj(pod, "status"), "phase");
  return phase != "Succeeded" && phase != "Failed";
}

}  // namespace

std::optional<ApiError> QuotaRefusal(const json& pod, const std::vector<json>& quotas,
                                     const std::vector<json>& pods) {
  const std::map<std::string, int64_t> requested = Usage(pod);
  std::map<std::string, int64_t> used;
  for (const json& other : pods) {
    if (!HoldsQuota(other)) continue;
    for (const auto& [name, n] : Usage(other)) used[name] += n;
  }
  for (const json& quota : quotas) {
    const json hard = Obj(Obj(quota, "spec"), "hard");
    std::string req, use, lim;
    for (const auto& [name, limit_json] : hard.items()) {
      auto it = requested.find(name);
      if (it == requested.end() || it->second == 0) continue;
      const int64_t limit = WholeQuantity(limit_json);
      const int64_t in_use = used.count(name) != 0 ? used.at(name) : 0;
      if (in_use + it->second <= limit) continue;
      const auto add = [&](std::string& list, int64_t n) {
        list += (list.empty() ? "" : ",") + name + "=" + std::to_string(n);
      };
      add(req, it->second);
      add(use, in_use);
      add(lim, limit);
    }
    if (req.empty()) continue;
    const std::string quota_name = Str(Obj(quota, "metadata"), "name");
    return ApiError(403, "Forbidden",
                    "pods \"" + NameOf(pod) + "\" is forbidden: exceeded quota: " + quota_name +
                        ", requested: " + req + ", used: " + use + ", limited: " + lim,
                    NameOf(pod), "", "pods");
  }
  return std::nullopt;
}

ApiError WebhookDenial(const json& pod, const std::string& hook, const std::string& message) {
  return ApiError(403, "Forbidden",
                  "admission webhook \"" + hook + "\" denied the request: " + message, NameOf(pod),
                  "", "pods");
}

}  // namespace pacer::testing
