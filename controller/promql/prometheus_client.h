// PrometheusClient: the controller's reads of what workers measured, through
// Prometheus' HTTP API (GET /api/v1/query, instant queries). The re-plan loop
// asks it for a job's measured step time and progress (docs/metrics.md, "How
// the controller reads them").
//
// Errors say whether to retry (status.h): Prometheus unreachable, timing out
// or answering 5xx -> Unavailable (the job keeps running on predictions and
// gets a Degraded condition); a query Prometheus rejects (HTTP 400/422,
// "bad_data") -> InvalidArgument with Prometheus' message; an answer that is
// not the documented JSON -> Internal; an answer over kMaxResponseBytes ->
// ResourceExhausted.
//
// Units: seconds; Unix seconds for timestamps. Thread-safety: a client may be
// used from several threads at once (cpprestsdk's http_client is).
#ifndef PACER_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_
#define PACER_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pacer/status.h"

namespace web::http::client {
class http_client;
}

namespace pacer::controller {

// One element of an instant vector (or the scalar, with no labels).
struct PromSample {
  std::map<std::string, std::string> labels;
  double value = 0;
  double timestamp_unix_seconds = 0;
};

// What the workers of one job have measured, as the re-plan loop needs it.
struct JobMeasurement {
  // Mean step time over the window; when the window held no step (steps
  // longer than it), the slowest process's mean over all its steps; none
  // before a step.
  std::optional<double> step_seconds;
  std::optional<int64_t> steps_completed;  // the furthest any rank got
  std::optional<int64_t> total_steps;
  int ranks_reporting = 0;
};

// An answer of GET /api/v1/query (`body`, with its HTTP status): the
// samples of an instant vector or the scalar, or the coded error above.
// Malformed answers of every shape are Internal, never undefined
// behaviour. Pure.
StatusOr<std::vector<PromSample>> ParsePromAnswer(const std::string& body, int http_status,
                                                  std::string_view promql);

// MeasureJob's reading of its four answers (the queries of
// MeasureJobQueries), pure: the first sample of each; a step time that is
// not finite, or a count that is not a finite number in [0, 2^53] (a
// broken exporter's 1e30 or -5), is none; a count is rounded down.
JobMeasurement JobMeasurementFromAnswers(const std::vector<PromSample>& step_seconds,
                                         const std::vector<PromSample>& steps_completed,
                                         const std::vector<PromSample>& total_steps,
                                         const std::vector<PromSample>& ranks_reporting);

class PrometheusClient {
 public:
  // Bounds what a single answer may cost the controller.
  static constexpr std::size_t kMaxResponseBytes = 16u << 20;

  // `base_url` like "http://prometheus.monitoring:9090"; every request is
  // bounded by `timeout`.
  PrometheusClient(const std::string& base_url, std::chrono::milliseconds timeout);
  ~PrometheusClient();
  PrometheusClient(const PrometheusClient&) = delete;
  PrometheusClient& operator=(const PrometheusClient&) = delete;

  // Evaluates `promql` now. A scalar answer comes back as one sample.
  StatusOr<std::vector<PromSample>> Query(std::string_view promql) const;

  // The job's mean step time over `window` (rate of the step histogram's sum
  // over the rate of its count, slowest rank), furthest step and total steps.
  // When no rank completed a step in `window`, the step time is the slowest
  // rank's last measured step (a fifth query; see MeasureJobWith).
  // `attempt` (when given): only that launch attempt's series (see
  // MeasureJobQueries).
  StatusOr<JobMeasurement> MeasureJob(const std::string& namespace_name,
                                      const std::string& job_name, std::chrono::seconds window,
                                      std::optional<int64_t> attempt = std::nullopt) const;

  const std::string& base_url() const { return base_url_; }

 private:
  std::string base_url_;
  std::unique_ptr<web::http::client::http_client> client_;
};

// Quotes a label value for a PromQL selector (backslash, quote, newline).
std::string PromQuote(std::string_view value);

// The instant queries MeasureJob sends: one per field of JobMeasurement, and
// step_seconds_last_step for when the window holds no step.
// Workers name their TrainJob in the `trainjob` label; workers built before
// that named it in `job` (which collides with Prometheus' own scrape job
// label). Each query matches both: `trainjob` = the name, or `trainjob`
// empty and `job` = the name, so series of either kind still count.
// With `attempt`, only series whose `attempt` label is that attempt or
// absent (workers that do not export it): the previous attempt's pods stay
// in the rate window after a relaunch, and their step time (of another
// layout) was read as the new attempt's.
struct JobMeasurementQueries {
  std::string step_seconds;
  // Without a window: the slowest rank's last measured step
  // (pacer_worker_last_step_seconds; its warm-up step is not one, and the
  // gauge's 0 before the first measured step is dropped). The last step,
  // not the mean of the process's whole run: a job that slowed down part way
  // through is as slow as its newest steps, and its older fast steps held
  // the whole-run mean down for as many slow steps as they were.
  std::string step_seconds_last_step;
  std::string steps_completed;
  std::string total_steps;
  std::string ranks_reporting;
};
JobMeasurementQueries MeasureJobQueries(const std::string& namespace_name,
                                        const std::string& job_name, std::chrono::seconds window,
                                        std::optional<int64_t> attempt = std::nullopt);

// MeasureJob over any query function (a test's answers): the four queries'
// answers read by JobMeasurementFromAnswers; when they hold no step time,
// the fifth, step_seconds_last_step, asked only then. The first error of the
// four is returned; an error of the fifth leaves the step time none.
using PromQuery = std::function<StatusOr<std::vector<PromSample>>(std::string_view promql)>;
StatusOr<JobMeasurement> MeasureJobWith(const JobMeasurementQueries& q, const PromQuery& query);

// The rate window in which to measure a job whose steps are expected to take
// `expected_step_seconds`: `configured`, or kStepsPerMeasurementWindow steps
// when that is longer, widened no further than kMaxMeasurementWindow (a
// `configured` window longer than that stays). A window shorter than a step
// holds no completed step, so the rate says nothing about a slow job. No
// expectation, or one that is not a positive finite number, leaves
// `configured`. Pure.
inline constexpr int kStepsPerMeasurementWindow = 3;
inline constexpr std::chrono::seconds kMaxMeasurementWindow{6 * 3600};
std::chrono::seconds MeasurementWindow(std::chrono::seconds configured,
                                       std::optional<double> expected_step_seconds);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_
