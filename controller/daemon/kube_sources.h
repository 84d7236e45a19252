// The reconciler's interfaces (reconcile/interfaces.h) on a Kubernetes
// cluster:
//
//   KubeJobStore           TrainJobs read with a GET (so a pass never acts on
//                          a status older than its own last write), status
//                          written through /status with the object's
//                          resourceVersion (409 -> Aborted -> requeue),
//                          finalizers by merge patch guarded the same way,
//                          events through the EventRecorder.
//   KubeInventory          the informers' change events feed an
//                          InventoryTracker (core/inventory_tracker.h): no
//                          object copies, and pod status churn costs nothing.
//   PrometheusMetricsSource  measured step time and progress from Prometheus's
//                          HTTP API (promql/prometheus_client.h).
//
// Thread-safety: all classes are safe to call concurrently.
#ifndef PACER_CONTROLLER_DAEMON_KUBE_SOURCES_H_
#define PACER_CONTROLLER_DAEMON_KUBE_SOURCES_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/inventory_tracker.h"
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
  // `on_gpus_freed` (may be empty) runs on an informer thread whenever GPUs
  // may have become free (InventoryTracker's rule); it must return promptly.
  KubeInventory(Informer* nodes, Informer* pods, std::function<void()> on_gpus_freed = {});
  StatusOr<ClusterInventory> Current() override;

 private:
  Informer* nodes_;
  Informer* pods_;
  InventoryTracker tracker_;
};

class PrometheusMetricsSource final : public MetricsSource {
 public:
  // An empty `base_url` means no Prometheus: every job is Degraded.
  // `window`: the step-time rate window, widened for a job whose steps are
  // expected to be longer (MeasurementWindow).
  PrometheusMetricsSource(const std::string& base_url, std::chrono::seconds window);
  StatusOr<Measurement> Measure(const JobRef& job) override;

 private:
  std::unique_ptr<PrometheusClient> client_;
  std::chrono::seconds window_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_DAEMON_KUBE_SOURCES_H_
