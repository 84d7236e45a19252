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
  std::optional<double> step_seconds;      // mean step time over the window; none before a step
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

// The instant queries MeasureJob sends, one per field of JobMeasurement.
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
  std::string steps_completed;
  std::string total_steps;
  std::string ranks_reporting;
};
JobMeasurementQueries MeasureJobQueries(const std::string& namespace_name,
                                        const std::string& job_name, std::chrono::seconds window,
                                        std::optional<int64_t> attempt = std::nullopt);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_PROMQL_PROMETHEUS_CLIENT_H_
