#include "local/local_store.h"

#include <utility>

namespace pacer::controller {

void AsNewJob(nlohmann::json& job) {
  if (!job.is_object()) return;
  job.erase("status");
  if (!job.contains("metadata") || !job["metadata"].is_object()) return;
  nlohmann::json& metadata = job["metadata"];
  for (const char* server_set : {"deletionTimestamp", "deletionGracePeriodSeconds", "finalizers",
                                 "resourceVersion", "managedFields", "uid", "generation"}) {
    metadata.erase(server_set);
  }
  // Set by the API server at creation, never taken from the client:
  // maxDuration counts from the job's first start (run_command.cc).
  metadata.erase("creationTimestamp");
}

LocalJobStore::LocalJobStore(nlohmann::json job, std::function<void(const LocalEvent&)> on_event)
    : job_(std::move(job)), on_event_(std::move(on_event)) {
  if (!job_.is_object()) job_ = nlohmann::json::object();
  if (!job_.contains("metadata") || !job_["metadata"].is_object()) {
    job_["metadata"] = nlohmann::json::object();
  }
  nlohmann::json& m = job_["metadata"];
  if (!m.contains("namespace") || !m["namespace"].is_string()) m["namespace"] = "default";
  if (!m.contains("name") || !m["name"].is_string()) m["name"] = "local";
  m["generation"] = 1;
  m["uid"] = "local";
}

std::string LocalJobStore::key() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_["metadata"]["namespace"].get<std::string>() + "/" +
         job_["metadata"]["name"].get<std::string>();
}

nlohmann::json LocalJobStore::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_;
}

StatusOr<nlohmann::json> LocalJobStore::Get(const std::string& key) {
  if (key != this->key()) return NotFoundError("trainjob \"" + key + "\" not found");
  return Snapshot();
}

Status LocalJobStore::WriteStatus(const nlohmann::json& /*job*/, const nlohmann::json& status) {
  std::lock_guard<std::mutex> lock(mu_);
  job_["status"] = status;
  return Status::Ok();
}

StatusOr<nlohmann::json> LocalJobStore::SetFinalizer(const nlohmann::json& /*job*/,
                                                     const std::string& /*finalizer*/,
                                                     bool /*present*/) {
  // Nothing outlives a local run: no finalizers.
  return Snapshot();
}

void LocalJobStore::RecordEvent(const nlohmann::json& /*job*/, const std::string& type,
                                const std::string& reason, const std::string& message) {
  if (on_event_) on_event_(LocalEvent{type, reason, message});
}

}  // namespace pacer::controller
