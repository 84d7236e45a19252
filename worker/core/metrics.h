// WorkerMetrics: the measurements pacer-worker exports for the controller to
// re-plan from, served in the Prometheus text format at
// http://<bind address>/metrics (PACER_METRICS_PORT).
//
// Every metric carries the labels trainjob, namespace, rank, backend and
// gpu_type (MetricsLabels). The TrainJob's name is `trainjob`, not `job`:
// Prometheus sets `job` to the scrape job's name, and a worker's own `job`
// would either replace it (honor_labels) or be renamed exported_job. In a
// cluster the scrape takes namespace, trainjob and attempt from the pod
// instead (the image is the user's); these serve scrapes without such
// target labels. Names, units, labels and how the controller reads them are
// documented in docs/metrics.md; a user's own training image exports the same
// names. Units are base units: seconds, bytes, FLOP; the exceptions say so in
// the name (achieved_tflops is 10^12 FLOP/s, mfu_ratio is a fraction 0..1).
// Gauges whose value is not known yet (predictions before SetPredicted, MFU
// before SetPeaks) read NaN rather than a plausible-looking 0.
//
// Built the prometheus-cpp way: one Registry, every family built once with the
// Builder API and every labelled child created in Create(), so recording a
// step only updates atomics and never allocates or looks up labels.
//
// Destroying a WorkerMetrics stops the HTTP server, which joins its threads
// and takes about 2 s; budget it in the SIGTERM grace period.
//
// Thread-safety: safe for concurrent use. Each metric update is atomic; the
// updates of one ObserveStep are not one transaction, so a scrape may see a
// step half-applied (harmless: every value is a last-step or total value).
#ifndef PACER_WORKER_CORE_METRICS_H_
#define PACER_WORKER_CORE_METRICS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pacer/status.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace pacer::worker {

// Constant labels on every metric. Values come from the controller's
// environment contract (PACER_JOB_NAME, PACER_JOB_NAMESPACE, RANK, the
// backend in use, PACER_GPU_TYPE); see docs/metrics.md.
struct MetricsLabels {
  std::string trainjob;        // TrainJob name; exported as label "trainjob"
  std::string namespace_name;  // TrainJob namespace; exported as label "namespace"
  std::string rank;            // global rank, decimal
  std::string backend;         // "gpu" or "cpu" (PACER_BACKEND once resolved)
  std::string gpu_type;        // PACER_GPU_TYPE, a catalog name; "cpu" on the CPU backend
  // PACER_ATTEMPT, decimal; "" when not given (Prometheus then has no
  // `attempt` label: an empty label value is an absent label).
  std::string attempt;
};

// The plan the worker runs, exported as pacer_worker_info{...} 1.
struct PlanInfo {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;
  int micro_batch = 1;
  int grad_accum = 1;
  std::string precision;  // "bf16", "fp16", "fp32"
};

// One finished training step as this rank measured it.
struct StepMeasurement {
  int64_t step = 0;         // global steps completed after this one (1 after the first)
  double step_seconds = 0;  // wall time of the step on this rank
  // Throughput of the whole job: samples and tokens of the global batch this
  // step consumed (the same on every rank).
  int64_t global_samples = 0;
  int64_t global_tokens = 0;
  double model_flops = 0;  // model FLOPs this GPU (or CPU rank) executed in the step
  // Communication: time inside collectives (overlapped or not), their payload
  // (nccl-tests' "size" summed over the step's collectives) and the bus factor
  // that turns algorithm bandwidth into bus bandwidth (2(n-1)/n for
  // all-reduce, (n-1)/n for all-gather and reduce-scatter).
  double collective_seconds = 0;
  double collective_bytes = 0;
  double collective_bus_factor = 1;
  double exposed_communication_seconds = 0;  // communication not hidden behind compute
  // Wall clock (seconds since the Unix epoch) when the step ended; 0: not
  // given, pacer_worker_last_step_timestamp_seconds keeps its value.
  double finished_unix_seconds = 0;
};

class WorkerMetrics {
 public:
  // Starts the HTTP exporter on `bind_address` ("host:port", e.g.
  // "0.0.0.0:9400"); port 0 picks a free port, reported by port(). Errors:
  // kInvalidArgument for a malformed address, kFailedPrecondition when it
  // cannot listen (port taken, no permission). Without `publish`, /metrics
  // answers with no series until Publish(): the worker binds its port
  // before the rendezvous (a taken port fails at once, not after every
  // peer has joined and waits on it) and shows its values once they are
  // set (a resumed run would otherwise show step 0 for a moment).
  static StatusOr<std::unique_ptr<WorkerMetrics>> Create(const MetricsLabels& labels,
                                                         const std::string& bind_address,
                                                         bool publish = true);
  // Serves the metrics (once; later calls do nothing).
  void Publish();
  ~WorkerMetrics();

  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // The TCP port the exporter listens on.
  int port() const { return port_; }

  // Records a step: histogram, last-step gauges, the step gauge, and the
  // derived rates. A negative or non-finite step_seconds updates only the
  // step gauge and the counter; derived values whose denominator is 0 are
  // left unchanged rather than set to inf.
  void ObserveStep(const StepMeasurement& m);

  // The first step of a process (its warm-up, no measurement of the step
  // time): the step gauge, pacer_worker_steps_completed_total and
  // pacer_worker_last_step_timestamp_seconds.
  // Until a step ended, that gauge reads the time Create() ran, so a worker
  // that never completes one looks ever more stalled.
  void ObserveWarmUpStep(int64_t step, double finished_unix_seconds);

  void SetTotalSteps(int64_t total_steps);
  // Sets pacer_worker_step on resume (the counter of steps this process ran
  // starts at 0 in every process; the step gauge continues).
  void SetStepsCompleted(int64_t steps_completed);
  void SetPeakMemoryBytes(double peak_memory_bytes);
  // The planner's prediction for this plan, to compare with the measurement;
  // a prediction not given stays NaN (a launch by hand may give one only).
  void SetPredicted(std::optional<double> step_seconds, std::optional<double> peak_memory_bytes);
  // Per-GPU peak FLOP/s for MFU: the catalog's datasheet figure and the one
  // measured by `pacer-worker calibrate` (0 = unknown, MFU stays NaN).
  void SetPeaks(double catalog_peak_flops_per_second, double calibrated_peak_flops_per_second);
  // 1 for the full model; below 1 when the run was shrunk (--scale on CPU).
  void SetModelScale(double scale);
  // Replaces the pacer_worker_info child (a setup call, not for the hot loop).
  void SetPlanInfo(const PlanInfo& plan);
  // A checkpoint was written and took `seconds`; it finished at
  // `finished_unix_seconds` (wall clock, seconds since the Unix epoch), which
  // pacer_worker_last_checkpoint_timestamp_seconds reports. Until the first
  // call that gauge reads the time Create() ran (the worker's start), so a
  // worker that never saves looks ever more overdue.
  void ObserveCheckpoint(double seconds, double finished_unix_seconds);
  // Steps between two periodic checkpoints (0: only when stopped), for the
  // checkpoint-age alert: expected age = interval x step time.
  void SetCheckpointIntervalSteps(int64_t steps);
  // Steps of training thrown away on resume because the newest checkpoint
  // was unusable and an older one was used (0: none lost).
  void SetResumeStepsLost(int64_t steps);

 private:
  WorkerMetrics() = default;
  // pacer_worker_last_step_timestamp_seconds, when the time is one.
  void NoteStepEnded(double finished_unix_seconds);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::atomic<bool> published_{false};
  int port_ = 0;

  prometheus::Histogram* step_duration_ = nullptr;
  prometheus::Gauge* last_step_seconds_ = nullptr;
  prometheus::Gauge* last_step_timestamp_seconds_ = nullptr;
  prometheus::Gauge* predicted_step_seconds_ = nullptr;
  prometheus::Counter* steps_completed_total_ = nullptr;
  prometheus::Gauge* step_ = nullptr;
  prometheus::Gauge* total_steps_ = nullptr;
  prometheus::Gauge* samples_per_second_ = nullptr;
  prometheus::Gauge* tokens_per_second_ = nullptr;
  prometheus::Gauge* achieved_tflops_ = nullptr;
  prometheus::Gauge* mfu_catalog_ = nullptr;
  prometheus::Gauge* mfu_calibrated_ = nullptr;
  prometheus::Gauge* collective_seconds_ = nullptr;
  prometheus::Gauge* collective_busbw_ = nullptr;
  prometheus::Gauge* exposed_communication_seconds_ = nullptr;
  prometheus::Gauge* peak_memory_bytes_ = nullptr;
  prometheus::Gauge* predicted_peak_memory_bytes_ = nullptr;
  prometheus::Gauge* model_scale_ = nullptr;
  prometheus::Counter* checkpoints_total_ = nullptr;
  prometheus::Gauge* last_checkpoint_seconds_ = nullptr;
  prometheus::Gauge* resume_steps_lost_ = nullptr;
  prometheus::Gauge* last_checkpoint_timestamp_seconds_ = nullptr;
  prometheus::Gauge* checkpoint_interval_steps_ = nullptr;
  prometheus::Family<prometheus::Gauge>* info_family_ = nullptr;
  std::mutex info_mutex_;
  prometheus::Gauge* info_ = nullptr;  // guarded by info_mutex_

  // Peaks in FLOP/s; written by SetPeaks, read by ObserveStep.
  std::atomic<double> catalog_peak_flops_per_second_{0};
  std::atomic<double> calibrated_peak_flops_per_second_{0};
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_METRICS_H_
