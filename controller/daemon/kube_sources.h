// The reconciler's interfaces (reconcile/interfaces.h) on a Kubernetes
// cluster:
//
//   KubeJobStore           TrainJobs read with a GET (so a pass never acts on
//                          a status older than its own last write), status
//                          written through /status with the object's
//                          resourceVersion (409 -> Aborted -> requeue),
//                          finalizers by merge patch guarded the same way,
//                          events through the EventRecorder.
//   KubeInventory          Nodes and Pods from their informers through
//                          core/node_inventory.h, rebuilt only after a change.
//   PrometheusMetricsSource  measured step time and progress from Prometheus's
//                          HTTP API (promql/prometheus_client.h).
//
// Thread-safety: all classes are safe to call concurrently.
#ifndef PACER_CONTROLLER_DAEMON_KUBE_SOURCES_H_
#define PACER_CONTROLLER_DAEMON_KUBE_SOURCES_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/kube_client.h"
#include "promql/prometheus_client.h"
#include "reconcile/interfaces.h"

namespace pacer::controller {

class KubeJobStore final : public JobStore {
 public:
  KubeJobStore(KubeClient* client, EventRecorder* events);
  StatusOr<nlohmann::json> Get(const std::string& key) override;
  Status WriteStatus(const nlohmann::json& job, const nlohmann::json& status) override;
  StatusOr<nlohmann::json> SetFinalizer(const nlohmann::json& job, const std::string& finalizer,
                                        bool present) override;
  void RecordEvent(const nlohmann::json& job, const std::string& type, const std::string& reason,
                   const std::string& message) override;

 private:
  KubeClient* client_;
  EventRecorder* events_;
};

class KubeInventory final : public InventorySource {
 public:
  // Registers change handlers on both informers (before they start).
  KubeInventory(Informer* nodes, Informer* pods);
  StatusOr<ClusterInventory> Current() override;

 private:
  Informer* nodes_;
  Informer* pods_;
  std::atomic<bool> dirty_{true};
  std::mutex mu_;
  std::optional<ClusterInventory> cached_;
};

class PrometheusMetricsSource final : public MetricsSource {
 public:
  // An empty `base_url` means no Prometheus: every job is Degraded.
  PrometheusMetricsSource(const std::string& base_url, std::chrono::seconds window);
  StatusOr<Measurement> Measure(const JobRef& job) override;

 private:
  std::unique_ptr<PrometheusClient> client_;
  std::chrono::seconds window_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_DAEMON_KUBE_SOURCES_H_
