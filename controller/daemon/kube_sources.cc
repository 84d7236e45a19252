#include "daemon/kube_sources.h"

#include <algorithm>

#include "kube/resources.h"
#include "observe/log.h"

namespace pacer::controller {
namespace {

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return {"default", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

}  // namespace

KubeJobStore::KubeJobStore(KubeClient* client, EventRecorder* events)
    : client_(client), events_(events) {}

StatusOr<nlohmann::json> KubeJobStore::Get(const std::string& key) {
  const auto [ns, name] = SplitKey(key);
  StatusOr<nlohmann::json> got = client_->Get(kTrainJobs, ns, name);
  if (got.ok() || got.status().code() != StatusCode::kNotFound) return got;
  // NotFound makes the reconciler delete the job's workers. A 404 also comes
  // from an API server that does not serve TrainJobs at that moment (one
  // restarting before it has loaded the CRD; a proxy): confirmed by a list,
  // which answers 200 only when the resource is served, and empty only when
  // the TrainJob is gone.
  ListOptions only;
  only.field_selector = "metadata.name=" + name;
  const StatusOr<ListPage> listed = client_->ListPage(kTrainJobs, ns, only);
  if (!listed.ok()) {
    return UnavailableError("TrainJob " + key + ": the API server answered 404, and listing " +
                            "TrainJobs failed too (" + listed.status().message() +
                            "): it may not serve TrainJobs right now (the CRD missing or still "
                            "loading); its workers are kept, retrying");
  }
  if (!listed->items.empty()) {
    return UnavailableError("TrainJob " + key +
                            ": the API server answered 404, but a list finds it; its workers are "
                            "kept, retrying");
  }
  return got;
}

Status KubeJobStore::WriteStatus(const nlohmann::json& job, const nlohmann::json& status) {
  nlohmann::json updated = job;
  updated["status"] = status;
  StatusOr<nlohmann::json> written =
      client_->UpdateStatus(kTrainJobs, job["metadata"].value("namespace", "default"), updated);
  return written.status();
}

StatusOr<nlohmann::json> KubeJobStore::SetFinalizer(const nlohmann::json& job,
                                                    const std::string& finalizer, bool present) {
  nlohmann::json list = nlohmann::json::array();
  const nlohmann::json& metadata = job["metadata"];
  if (metadata.contains("finalizers") && metadata["finalizers"].is_array()) {
    for (const nlohmann::json& f : metadata["finalizers"]) {
      if (f != finalizer) list.push_back(f);
    }
  }
  if (present) list.push_back(finalizer);
  // The resourceVersion makes the patch conditional: a concurrent change to
  // the list is a conflict, not a lost update.
  nlohmann::json patch = {
      {"metadata",
       {{"finalizers", list}, {"resourceVersion", metadata.value("resourceVersion", "")}}}};
  return client_->MergePatch(kTrainJobs, metadata.value("namespace", "default"),
                             metadata.value("name", ""), patch);
}

void KubeJobStore::RecordEvent(const nlohmann::json& job, const std::string& type,
                               const std::string& reason, const std::string& message) {
  const nlohmann::json& m = job["metadata"];
  ObjectLogger log("TrainJob", m.value("namespace", "default") + "/" + m.value("name", ""));
  if (type == "Warning") {
    log.Warning(message, {{"reason", reason}});
  } else {
    log.Info(message, {{"reason", reason}});
  }
  events_->Record(job, type == "Warning" ? EventType::kWarning : EventType::kNormal, reason,
                  message);
}

KubeInventory::KubeInventory(Informer* nodes, Informer* pods, std::function<void()> on_gpus_freed)
    : nodes_(nodes), pods_(pods) {
  nodes_->OnChange([this, on_gpus_freed](const std::string& key, const nlohmann::json* node) {
    std::vector<std::string> warnings;
    const bool freed = tracker_.UpdateNode(key, node, &warnings);
    for (const std::string& warning : warnings) {
      ObjectLogger("Node", key).Warning("node left out of the GPU inventory or partly ignored",
                                        {{"reason", warning}});
    }
    if (freed && on_gpus_freed) on_gpus_freed();
  });
  pods_->OnChange([this, on_gpus_freed](const std::string& key, const nlohmann::json* pod) {
    if (tracker_.UpdatePod(key, pod) && on_gpus_freed) on_gpus_freed();
  });
}

StatusOr<ClusterInventory> KubeInventory::Current() {
  if (!nodes_->HasSynced() || !pods_->HasSynced()) {
    return UnavailableError("the node and pod caches are not synced yet");
  }
  return tracker_.Current();
}

PrometheusMetricsSource::PrometheusMetricsSource(const std::string& base_url,
                                                 std::chrono::seconds window)
    : window_(window) {
  if (!base_url.empty()) {
    client_ = std::make_unique<PrometheusClient>(base_url, std::chrono::milliseconds(5000));
  }
}

StatusOr<Measurement> PrometheusMetricsSource::Measure(const JobRef& job) {
  if (!client_) {
    return UnavailableError("no Prometheus configured (--prometheus-url)");
  }
  ASSIGN_OR_RETURN(
      JobMeasurement m,
      client_->MeasureJob(job.namespace_name, job.name,
                          MeasurementWindow(window_, job.expected_step_seconds), job.attempt));
  Measurement out;
  out.step_seconds = m.step_seconds;
  out.steps_completed = m.steps_completed;
  return out;
}

}  // namespace pacer::controller
