// Local mode's job store: the one TrainJob `pacer run` read from a file,
// kept in memory (no API server). Status writes replace the object's status;
// events go to a callback that the terminal UI prints.
//
// Thread-safety: all methods are safe to call concurrently (one mutex).
#ifndef PACER_CONTROLLER_LOCAL_LOCAL_STORE_H_
#define PACER_CONTROLLER_LOCAL_LOCAL_STORE_H_

#include <functional>
#include <mutex>
#include <string>

#include "reconcile/interfaces.h"

namespace pacer::controller {

struct LocalEvent {
  std::string type;  // "Normal" or "Warning"
  std::string reason;
  std::string message;
};

// The TrainJob of a file as `kubectl apply` would create it: the API server
// ignores what a client sends as status and as server-set metadata
// (deletionTimestamp, finalizers, resourceVersion, managedFields, uid,
// generation, creationTimestamp). Kept, an exported `kubectl get -o yaml`
// with `phase: Succeeded` exited 0 without training, its other status
// fields (steps, restarts, excluded nodes) carried into this run, a
// deletionTimestamp left the run waiting for a deletion forever, an old
// creation time made maxDuration's deadline long past, and
// `creationTimestamp: null` (what `kubectl create --dry-run=client -o yaml`
// writes) slid maxDuration with the clock. `pacer run` then sets the
// creation time to the job's first start.
void AsNewJob(nlohmann::json& job);

class LocalJobStore final : public JobStore {
 public:
  // `job` is the TrainJob as parsed from the user's file (made a new job by
  // AsNewJob first); metadata.namespace defaults to "default".
  LocalJobStore(nlohmann::json job, std::function<void(const LocalEvent&)> on_event);

  std::string key() const;
  nlohmann::json Snapshot() const;

  StatusOr<nlohmann::json> Get(const std::string& key) override;
  Status WriteStatus(const nlohmann::json& job, const nlohmann::json& status) override;
  StatusOr<nlohmann::json> SetFinalizer(const nlohmann::json& job, const std::string& finalizer,
                                        bool present) override;
  void RecordEvent(const nlohmann::json& job, const std::string& type, const std::string& reason,
                   const std::string& message) override;

 private:
  mutable std::mutex mu_;
  nlohmann::json job_;
  std::function<void(const LocalEvent&)> on_event_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_LOCAL_STORE_H_
