#include "core/metrics.h"

#include <CivetServer.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::worker {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// 1 ms .. 1000 s, four buckets per decade (x1.78): step times range from
// milliseconds (a scaled-down CPU run) to minutes (a large model with deep
// gradient accumulation). Quantiles interpolate inside a bucket; the mean
// (_sum / _count) is exact whatever the buckets.
prometheus::Histogram::BucketBoundaries StepDurationBuckets() {
  prometheus::Histogram::BucketBoundaries bounds;
  for (int k = -12; k <= 12; ++k) bounds.push_back(std::pow(10.0, k / 4.0));
  return bounds;
}

// "host:port" with a decimal port in [0, 65535].
Status CheckBindAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("metrics address \"" + address + "\" is not host:port");
  }
  std::string_view port = std::string_view(address).substr(colon + 1);
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 ||
      value > 65535) {
    return InvalidArgumentError("metrics address \"" + address +
                                "\" needs a port between 0 and 65535");
  }
  return Status::Ok();
}

void SetIfFinite(prometheus::Gauge* gauge, double value) {
  if (std::isfinite(value)) gauge->Set(value);
}

// A scrape finds no /metrics handler on a metrics server between its start
// and the registration of the metrics: while any server of this process is
// being started (its port is not known yet), and on the ports of servers
// created unpublished until Publish().
std::atomic<int> g_exposers_starting{0};
std::mutex g_unpublished_mu;
std::multiset<int>& UnpublishedPorts() {
  // Never destroyed: used by server threads. A multiset: a server that
  // reuses the port of one not yet gone keeps its own mark.
  static std::multiset<int>* ports = new std::multiset<int>();
  return *ports;
}
bool Unpublished(int port) {
  std::lock_guard<std::mutex> lock(g_unpublished_mu);
  return UnpublishedPorts().count(port) > 0;
}
void UnmarkUnpublished(int port) {
  std::lock_guard<std::mutex> lock(g_unpublished_mu);
  auto it = UnpublishedPorts().find(port);
  if (it != UnpublishedPorts().end()) UnpublishedPorts().erase(it);  // one mark only
}

// Counts a metrics server as starting while it lives (exceptions included).
class StartingExposer {
 public:
  StartingExposer() { ++g_exposers_starting; }
  ~StartingExposer() { --g_exposers_starting; }
  StartingExposer(const StartingExposer&) = delete;
  StartingExposer& operator=(const StartingExposer&) = delete;
};

// The whole response; a HEAD's has the length but not the body.
std::string FixedResponse(const char* status_line, const char* extra_headers, const char* body,
                          bool head) {
  return std::string("HTTP/1.1 ") + status_line +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(std::strlen(body)) + "\r\n" + extra_headers + "Connection: close\r\n\r\n" +
         (head ? "" : body);
}

// civetweb's begin_request: answers, with fixed bytes, every request the
// /metrics handler would not take. civetweb's own answer to those (404,
// 405, or 404 for a scrape before RegisterCollectable) formats an error
// page on its worker thread, whose stack Debian's build caps at 100 KB;
// libquadmath (loaded with OpenBLAS through libgfortran) registers printf
// hooks that send every printf through glibc's positional path, and that
// page then overflows the stack: a GET of any other path on the metrics
// port killed the worker with SIGSEGV (civetweb issue 1259 is the same
// overflow under AddressSanitizer, where CI met it).
int AnswerWhatTheMetricsHandlerWouldNot(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  const char* uri = request != nullptr && request->local_uri != nullptr ? request->local_uri : "";
  const char* method =
      request != nullptr && request->request_method != nullptr ? request->request_method : "";
  const bool metrics = std::strcmp(uri, "/metrics") == 0;
  const bool head = std::strcmp(method, "HEAD") == 0;
  int status = 0;
  std::string response;
  if (!metrics) {
    status = 404;
    response =
        FixedResponse("404 Not Found", "", "not found: this port serves /metrics only\n", head);
  } else if (std::strcmp(method, "GET") != 0) {
    status = 405;
    response = FixedResponse("405 Method Not Allowed", "Allow: GET\r\n",
                             "method not allowed: GET /metrics\n", head);
  } else if (g_exposers_starting.load() > 0 ||
             (request != nullptr && Unpublished(request->server_port))) {
    status = 503;
    response = FixedResponse("503 Service Unavailable", "Retry-After: 1\r\n",
                             "the metrics are not registered yet; retry\n", head);
  } else {
    return 0;  // prometheus-cpp's handler serves it
  }
  mg_write(conn, response.data(), response.size());
  return status;
}

}  // namespace

StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(const MetricsLabels& labels,
                                                               const std::string& bind_address,
                                                               bool publish) {
  RETURN_IF_ERROR(CheckBindAddress(bind_address));
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& registry = *m->registry_;
  prometheus::Labels constant = {{"trainjob", labels.trainjob},
                                 {"namespace", labels.namespace_name},
                                 {"rank", labels.rank},
                                 {"backend", labels.backend},
                                 {"gpu_type", labels.gpu_type}};
  if (!labels.attempt.empty()) constant["attempt"] = labels.attempt;

  auto gauge = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Labels(constant).Register(registry).Add(
        {});
  };
  auto counter = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildCounter()
                .Name(name)
                .Help(help)
                .Labels(constant)
                .Register(registry)
                .Add({});
  };

  m->step_duration_ = &prometheus::BuildHistogram()
                           .Name("pacer_worker_step_duration_seconds")
                           .Help("Wall time of each training step on this rank.")
                           .Labels(constant)
                           .Register(registry)
                           .Add({}, StepDurationBuckets());
  m->last_step_seconds_ =
      gauge("pacer_worker_last_step_seconds", "Wall time of the last training step.");
  m->last_step_timestamp_seconds_ =
      gauge("pacer_worker_last_step_timestamp_seconds",
            "Unix time the last training step ended; before the first, the worker's start.");
  m->predicted_step_seconds_ = gauge("pacer_worker_predicted_step_seconds",
                                     "Step time the planner predicted for this plan (NaN: none).");
  m->steps_completed_total_ = counter("pacer_worker_steps_completed_total",
                                      "Training steps this process completed (restarts at 0).");
  m->step_ = gauge("pacer_worker_step",
                   "Global training steps completed by the job, kept across restarts.");
  m->total_steps_ = gauge("pacer_worker_total_steps", "Training steps in the plan.");
  m->samples_per_second_ = gauge("pacer_worker_samples_per_second",
                                 "Job throughput in samples per second over the last step.");
  m->tokens_per_second_ = gauge("pacer_worker_tokens_per_second",
                                "Job throughput in tokens per second over the last step.");
  m->achieved_tflops_ = gauge("pacer_worker_achieved_tflops",
                              "Model TFLOP/s (10^12 FLOP/s) this GPU achieved in the last step.");
  auto& mfu = prometheus::BuildGauge()
                  .Name("pacer_worker_mfu_ratio")
                  .Help(
                      "Model FLOPs utilization of the last step, 0..1, against a peak "
                      "(catalog: datasheet; calibrated: measured). NaN: peak unknown.")
                  .Labels(constant)
                  .Register(registry);
  m->mfu_catalog_ = &mfu.Add({{"peak", "catalog"}});
  m->mfu_calibrated_ = &mfu.Add({{"peak", "calibrated"}});
  m->collective_seconds_ = gauge("pacer_worker_collective_seconds",
                                 "Time inside collectives in the last step (overlapped or not).");
  m->collective_busbw_ = gauge("pacer_worker_collective_busbw_bytes_per_second",
                               "Collective bus bandwidth of the last step (nccl-tests busbw).");
  m->exposed_communication_seconds_ =
      gauge("pacer_worker_exposed_communication_seconds",
            "Communication time of the last step not overlapped with compute.");
  m->peak_memory_bytes_ =
      gauge("pacer_worker_peak_memory_bytes", "Peak device (or host, on CPU) memory of this rank.");
  m->predicted_peak_memory_bytes_ =
      gauge("pacer_worker_predicted_peak_memory_bytes",
            "Peak memory the planner predicted for this rank (NaN: none).");
  m->model_scale_ = gauge("pacer_worker_model_scale",
                          "Model size relative to the plan's model: 1 full, below 1 scaled down.");
  m->checkpoints_total_ =
      counter("pacer_worker_checkpoints_total", "Checkpoints this process wrote.");
  m->last_checkpoint_seconds_ =
      gauge("pacer_worker_last_checkpoint_seconds", "Wall time of the last checkpoint save.");
  m->resume_steps_lost_ =
      gauge("pacer_worker_resume_steps_lost",
            "Steps lost on resume: the newest checkpoint was unusable and an older one was used.");
  m->last_checkpoint_timestamp_seconds_ =
      gauge("pacer_worker_last_checkpoint_timestamp_seconds",
            "Unix time the last checkpoint finished; before the first, the worker's start.");
  m->checkpoint_interval_steps_ =
      gauge("pacer_worker_checkpoint_interval_steps",
            "Steps between periodic checkpoints (0: only when stopped).");
  m->info_family_ = &prometheus::BuildGauge()
                         .Name("pacer_worker_info")
                         .Help("The plan this worker runs (value always 1).")
                         .Labels(constant)
                         .Register(registry);

  m->predicted_step_seconds_->Set(kNaN);
  m->predicted_peak_memory_bytes_->Set(kNaN);
  m->mfu_catalog_->Set(kNaN);
  m->mfu_calibrated_->Set(kNaN);
  m->model_scale_->Set(1);
  // The ages of "no checkpoint yet" and "no step yet" count from now (see
  // ObserveCheckpoint, ObserveWarmUpStep).
  const double started_unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  m->last_checkpoint_timestamp_seconds_->Set(started_unix_seconds);
  m->last_step_timestamp_seconds_->Set(started_unix_seconds);

  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c{};
    c.begin_request = AnswerWhatTheMetricsHandlerWouldNot;
    return c;
  }();
  {
    const StartingExposer starting;
    try {
      m->exposer_ = std::make_unique<prometheus::Exposer>(bind_address, 2, &callbacks);
    } catch (const std::exception& e) {  // civetweb reports bind failures by throwing
      return FailedPreconditionError(
          "cannot serve metrics on " + bind_address + ": " + e.what() +
          "; another process holds the port: free it, or set --metrics-port / "
          "PACER_METRICS_PORT to a free port (0 picks one)");
    }
    std::vector<int> ports = m->exposer_->GetListeningPorts();
    if (ports.empty()) {
      return FailedPreconditionError("metrics server on " + bind_address + " listens on no port");
    }
    m->port_ = ports.front();
    // Still starting: until Publish(), this port answers 503.
    std::lock_guard<std::mutex> lock(g_unpublished_mu);
    UnpublishedPorts().insert(m->port_);
  }
  if (publish) m->Publish();
  return m;
}

void WorkerMetrics::Publish() {
  if (published_.exchange(true)) return;
  exposer_->RegisterCollectable(registry_);
  UnmarkUnpublished(port_);
}

WorkerMetrics::~WorkerMetrics() {
  // Stop serving before the registry and the metrics go away, and before
  // the port stops answering 503: unmarked first, a scrape in between met
  // civetweb's 404 page (see AnswerWhatTheMetricsHandlerWouldNot).
  exposer_.reset();
  if (port_ != 0 && !published_.exchange(true)) UnmarkUnpublished(port_);
}

void WorkerMetrics::NoteStepEnded(double finished_unix_seconds) {
  // 0 (not given) or no time at all keeps the last step's end.
  if (std::isfinite(finished_unix_seconds) && finished_unix_seconds > 0) {
    last_step_timestamp_seconds_->Set(finished_unix_seconds);
  }
}

void WorkerMetrics::ObserveWarmUpStep(int64_t step, double finished_unix_seconds) {
  step_->Set(static_cast<double>(step));
  // Completed, only not a timing sample (it holds one-time start-up work).
  steps_completed_total_->Increment();
  NoteStepEnded(finished_unix_seconds);
}

void WorkerMetrics::ObserveStep(const StepMeasurement& m) {
  step_->Set(static_cast<double>(m.step));
  steps_completed_total_->Increment();
  NoteStepEnded(m.finished_unix_seconds);
  // A broken clock reading must not poison the histogram's sum forever.
  if (!std::isfinite(m.step_seconds) || m.step_seconds < 0) return;
  step_duration_->Observe(m.step_seconds);
  last_step_seconds_->Set(m.step_seconds);
  collective_seconds_->Set(m.collective_seconds);
  exposed_communication_seconds_->Set(m.exposed_communication_seconds);
  if (m.collective_seconds > 0) {
    collective_busbw_->Set(m.collective_bytes * m.collective_bus_factor / m.collective_seconds);
  }
  if (m.step_seconds == 0) return;  // no rates from a zero duration
  samples_per_second_->Set(static_cast<double>(m.global_samples) / m.step_seconds);
  tokens_per_second_->Set(static_cast<double>(m.global_tokens) / m.step_seconds);
  const double flops_per_second = m.model_flops / m.step_seconds;
  achieved_tflops_->Set(flops_per_second / 1e12);
  const double catalog_peak = catalog_peak_flops_per_second_.load(std::memory_order_relaxed);
  const double calibrated_peak = calibrated_peak_flops_per_second_.load(std::memory_order_relaxed);
  if (catalog_peak > 0) SetIfFinite(mfu_catalog_, flops_per_second / catalog_peak);
  if (calibrated_peak > 0) SetIfFinite(mfu_calibrated_, flops_per_second / calibrated_peak);
}

void WorkerMetrics::SetTotalSteps(int64_t total_steps) {
  total_steps_->Set(static_cast<double>(total_steps));
}

void WorkerMetrics::SetStepsCompleted(int64_t steps_completed) {
  step_->Set(static_cast<double>(steps_completed));
}

void WorkerMetrics::SetResumeStepsLost(int64_t steps) {
  resume_steps_lost_->Set(static_cast<double>(steps));
}

void WorkerMetrics::SetPeakMemoryBytes(double peak_memory_bytes) {
  peak_memory_bytes_->Set(peak_memory_bytes);
}

void WorkerMetrics::SetPredicted(std::optional<double> step_seconds,
                                 std::optional<double> peak_memory_bytes) {
  if (step_seconds) predicted_step_seconds_->Set(*step_seconds);
  if (peak_memory_bytes) predicted_peak_memory_bytes_->Set(*peak_memory_bytes);
}

void WorkerMetrics::SetPeaks(double catalog_peak_flops_per_second,
                             double calibrated_peak_flops_per_second) {
  catalog_peak_flops_per_second_.store(catalog_peak_flops_per_second, std::memory_order_relaxed);
  calibrated_peak_flops_per_second_.store(calibrated_peak_flops_per_second,
                                          std::memory_order_relaxed);
  // A peak that became unknown must not leave a stale ratio behind.
  if (!(catalog_peak_flops_per_second > 0)) mfu_catalog_->Set(kNaN);
  if (!(calibrated_peak_flops_per_second > 0)) mfu_calibrated_->Set(kNaN);
}

void WorkerMetrics::SetModelScale(double scale) { model_scale_->Set(scale); }

void WorkerMetrics::SetPlanInfo(const PlanInfo& plan) {
  std::lock_guard<std::mutex> lock(info_mutex_);
  if (info_ != nullptr) info_family_->Remove(info_);
  info_ = &info_family_->Add({{"tp", std::to_string(plan.tp)},
                              {"pp", std::to_string(plan.pp)},
                              {"dp", std::to_string(plan.dp)},
                              {"zero", std::to_string(plan.zero_stage)},
                              {"micro_batch", std::to_string(plan.micro_batch)},
                              {"grad_accum", std::to_string(plan.grad_accum)},
                              {"precision", plan.precision}});
  info_->Set(1);
}

void WorkerMetrics::ObserveCheckpoint(double seconds, double finished_unix_seconds) {
  checkpoints_total_->Increment();
  last_checkpoint_seconds_->Set(seconds);
  last_checkpoint_timestamp_seconds_->Set(finished_unix_seconds);
}

void WorkerMetrics::SetCheckpointIntervalSteps(int64_t steps) {
  checkpoint_interval_steps_->Set(static_cast<double>(steps));
}

}  // namespace pacer::worker
