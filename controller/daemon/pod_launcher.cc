#include "daemon/pod_launcher.h"

#include <algorithm>

#include "kube/resources.h"
#include "reconcile/job_object.h"

namespace pacer::controller {
namespace {

// How long an expectation may wait for the cache before it is dropped (a
// watch outage longer than this is covered by the informer's relist).
constexpr std::chrono::seconds kExpectationTimeout{120};

std::string Label(const nlohmann::json& pod, const char* key) {
  const nlohmann::json& labels = pod["metadata"].value("labels", nlohmann::json::object());
  if (!labels.contains(key) || !labels[key].is_string()) return "";
  return labels[key].get<std::string>();
}

int IntOr(const std::string& text, int fallback) {
  try {
    return text.empty() ? fallback : std::stoi(text);
  } catch (const std::exception&) {
    return fallback;
  }
}

WorkerState StateOf(const nlohmann::json& pod) {
  WorkerState w;
  w.node_rank = IntOr(Label(pod, kNodeRankLabel), 0);
  const nlohmann::json status = pod.value("status", nlohmann::json::object());
  const std::string phase = status.value("phase", "Pending");
  if (phase == "Running") w.phase = WorkerPhase::kRunning;
  if (phase == "Succeeded") w.phase = WorkerPhase::kSucceeded;
  if (phase == "Failed") w.phase = WorkerPhase::kFailed;
  for (const nlohmann::json& c : status.value("containerStatuses", nlohmann::json::array())) {
    if (c.value("name", "") != "worker") continue;
    const nlohmann::json state = c.value("state", nlohmann::json::object());
    if (state.contains("terminated")) {
      const nlohmann::json& t = state["terminated"];
      if (t.contains("exitCode") && t["exitCode"].is_number_integer()) {
        w.exit_code = t["exitCode"].get<int>();
      }
      w.message = t.value("reason", "");
      if (t.contains("message") && t["message"].is_string()) {
        w.message += (w.message.empty() ? "" : ": ") + t["message"].get<std::string>();
      }
    }
  }
  if (phase == "Failed" && w.message.empty()) w.message = status.value("reason", "pod failed");
  return w;
}

}  // namespace

PodLauncher::PodLauncher(KubeClient* client, const Informer* pods, PodTemplateOptions options)
    : client_(client), pods_(pods), options_(std::move(options)) {}

Status PodLauncher::Launch(const LaunchSpec& spec) {
  const std::string& ns = spec.job.namespace_name;
  StatusOr<nlohmann::json> service =
      client_->Create(kServices, ns, WorkerServiceObject(spec, options_));
  if (!service.ok() && service.status().code() != StatusCode::kAlreadyExists) {
    return service.status().WithContext("creating the workers' Service");
  }
  std::vector<std::string> created;
  for (int node = 0; node < spec.plan.layout.nodes; ++node) {
    nlohmann::json pod = WorkerPodObject(spec, node, options_);
    const std::string name = pod["metadata"]["name"];
    StatusOr<nlohmann::json> result = client_->Create(kPods, ns, pod);
    if (result.ok()) {
      created.push_back(name);
    } else if (result.status().code() != StatusCode::kAlreadyExists) {
      // All or none: a partial gang would hold GPUs and never start.
      for (const std::string& done : created) (void)client_->Delete(kPods, ns, done, int64_t{0});
      return result.status().WithContext("creating worker pod " + name);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Expectations& e = expectations_[spec.job.key()];
  e.attempt = spec.attempt;
  e.nodes = spec.plan.layout.nodes;
  e.layout = spec.plan.layout;
  e.created.clear();
  for (int node = 0; node < spec.plan.layout.nodes; ++node) {
    e.created.insert(WorkerPodName(spec.job.name, spec.attempt, node));
  }
  e.deleted.clear();
  e.since = std::chrono::steady_clock::now();
  return Status::Ok();
}

StatusOr<std::optional<WorkerGroup>> PodLauncher::Observe(const JobRef& job) {
  std::vector<nlohmann::json> pods;
  for (nlohmann::json& pod : pods_->ListByLabel(kJobLabel, job.name, job.namespace_name)) {
    if (!pod.contains("metadata") || !pod["metadata"].is_object()) continue;  // malformed
    if (pod["metadata"].value("namespace", "") == job.namespace_name)
      pods.push_back(std::move(pod));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Expectations* e = nullptr;
  if (auto it = expectations_.find(job.key()); it != expectations_.end()) {
    e = &it->second;
    if (std::chrono::steady_clock::now() - e->since > kExpectationTimeout) {
      expectations_.erase(it);
      e = nullptr;
    }
  }
  std::set<std::string> seen;
  int attempt = 0;
  for (const nlohmann::json& pod : pods) {
    const std::string name = pod["metadata"].value("name", "");
    if (e != nullptr && e->deleted.count(name) > 0) continue;  // deleted; the cache lags
    seen.insert(name);
    attempt = std::max(attempt, IntOr(Label(pod, kAttemptLabel), 0));
  }
  if (e != nullptr) {
    for (auto it = e->created.begin(); it != e->created.end();) {
      it = seen.count(*it) > 0 ? e->created.erase(it) : std::next(it);
    }
    for (auto it = e->deleted.begin(); it != e->deleted.end();) {
      const bool still = std::any_of(pods.begin(), pods.end(), [&](const nlohmann::json& p) {
        return p["metadata"].value("name", "") == *it;
      });
      it = still ? std::next(it) : e->deleted.erase(it);
    }
    if (!e->created.empty()) attempt = std::max(attempt, e->attempt);
  }
  if (seen.empty() && (e == nullptr || e->created.empty())) return std::optional<WorkerGroup>();

  WorkerGroup group;
  group.attempt = attempt;
  for (const nlohmann::json& pod : pods) {
    const std::string name = pod["metadata"].value("name", "");
    if (seen.count(name) == 0 || IntOr(Label(pod, kAttemptLabel), 0) != attempt) continue;
    group.workers.push_back(StateOf(pod));
    const nlohmann::json& metadata = pod["metadata"];
    if (metadata.contains("deletionTimestamp") && !metadata["deletionTimestamp"].is_null()) {
      group.stopping = true;
    }
    const nlohmann::json annotations = metadata.value("annotations", nlohmann::json::object());
    group.expected_workers =
        std::max(group.expected_workers, IntOr(annotations.value(kNodesAnnotation, ""), 0));
    if (!group.layout && annotations.contains(kLayoutAnnotation)) {
      try {
        group.layout = LayoutFromPlanJson(
            nlohmann::json::parse(annotations[kLayoutAnnotation].get<std::string>()));
      } catch (const std::exception&) {
        // A hand-edited annotation: the status's plan is used instead.
      }
    }
  }
  if (e != nullptr && e->attempt == attempt) {
    for (const std::string& name : e->created) {
      WorkerState w;  // created, not yet in the cache: pending
      w.node_rank = IntOr(name.substr(name.rfind("-n") + 2), 0);
      group.workers.push_back(w);
    }
    group.expected_workers = std::max(group.expected_workers, e->nodes);
    if (!group.layout) group.layout = e->layout;
  }
  if (group.expected_workers == 0) group.expected_workers = static_cast<int>(group.workers.size());
  return std::optional<WorkerGroup>(std::move(group));
}

Status PodLauncher::Stop(const JobRef& job, StopMode mode) {
  StatusOr<std::optional<WorkerGroup>> observed = Observe(job);
  if (!observed.ok()) return observed.status();
  std::vector<std::string> names;
  for (const nlohmann::json& pod : pods_->ListByLabel(kJobLabel, job.name, job.namespace_name)) {
    if (!pod.contains("metadata") || !pod["metadata"].is_object()) continue;  // malformed
    if (pod["metadata"].value("namespace", "") != job.namespace_name) continue;
    if (mode == StopMode::kGraceful && observed->has_value() &&
        IntOr(Label(pod, kAttemptLabel), 0) != (*observed)->attempt) {
      continue;
    }
    names.push_back(pod["metadata"].value("name", ""));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = expectations_.find(job.key());
    if (it != expectations_.end()) {
      // Pods created but not yet seen are deleted too.
      for (const std::string& name : it->second.created) names.push_back(name);
      it->second.created.clear();
    }
  }
  const std::optional<int64_t> grace =
      mode == StopMode::kGraceful ? std::optional<int64_t>(options_.termination_grace_seconds)
                                  : std::nullopt;
  for (const std::string& name : names) {
    Status deleted = client_->Delete(kPods, job.namespace_name, name, grace);
    if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return deleted;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Expectations& e = expectations_[job.key()];
  if (e.since == std::chrono::steady_clock::time_point())
    e.since = std::chrono::steady_clock::now();
  if (mode == StopMode::kRemove) {
    // In a real cluster a deleted pod lingers while its container stops;
    // only then is it gone. Until the cache shows that, hide it.
    e.deleted.insert(names.begin(), names.end());
    e.since = std::chrono::steady_clock::now();
  }
  return Status::Ok();
}

}  // namespace pacer::controller
