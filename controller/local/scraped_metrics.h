// Local mode's metrics source: reads every rank's /metrics endpoint directly
// (no Prometheus), the worker -> controller contract of docs/metrics.md:
//   progress     = max over ranks of pacer_worker_step
//   step seconds = the slowest rank's mean step time since the previous
//                  scrape (pacer_worker_step_duration_seconds sum/count
//                  deltas; the cumulative mean on the first scrape)
//   model scale  = pacer_worker_model_scale
// No endpoint answering is Unavailable (endpoints that never answered yet
// belong to workers still starting and do not count), unless every worker exits within
// `exit_grace` (a finished worker closes its endpoint just before it exits).
// Each launch attempt (JobRef::attempt) keeps its own per-rank history: the
// next attempt's worker may get a port the last one had, with new counters.
// Attempts only move forward: a Measure for attempt N drops the history of
// those before it (a concurrent Measure of an older attempt starts afresh).
// RunMeanStepSeconds: the slowest rank's mean over every step scraped in this
// run (the summary's "measured"), not just the last window.
//
// Units: seconds, steps. Thread-safety: Measure may be called concurrently
// (one mutex guards the per-rank history).
#ifndef PACER_CONTROLLER_LOCAL_SCRAPED_METRICS_H_
#define PACER_CONTROLLER_LOCAL_SCRAPED_METRICS_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reconcile/interfaces.h"

namespace pacer::controller {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the Prometheus text exposition format (comments skipped; label
// values unescaped). Malformed lines are skipped.
std::vector<MetricSample> ParseMetricsText(std::string_view text);

// A worker's metrics page is a few KiB; a larger one is refused
// (ResourceExhausted) rather than read into memory whole.
inline constexpr std::size_t kMaxScrapeBytes = 4u << 20;

// GETs http://127.0.0.1:<port>/metrics; Unavailable when it cannot,
// ResourceExhausted when the page is over kMaxScrapeBytes.
using ScrapeFn = std::function<StatusOr<std::string>(int port)>;
ScrapeFn HttpScraper(std::chrono::milliseconds timeout);

class ScrapedMetricsSource final : public MetricsSource {
 public:
  // `ports` lists the /metrics ports of a job's live ranks (the launcher's).
  ScrapedMetricsSource(std::function<std::vector<int>(const JobRef&)> ports, ScrapeFn scrape,
                       std::chrono::milliseconds exit_grace = std::chrono::milliseconds(2000));

  StatusOr<Measurement> Measure(const JobRef& job) override;

  // Seconds per step over all the steps measured so far (slowest rank of
  // each scrape window); nullopt before the first.
  std::optional<double> RunMeanStepSeconds() const;

 private:
  struct RankHistory {
    double sum_seconds = 0;
    double count = 0;
    double last_mean_seconds = 0;
  };
  std::function<std::vector<int>(const JobRef&)> ports_;
  ScrapeFn scrape_;
  std::chrono::milliseconds exit_grace_;
  mutable std::mutex mu_;
  std::map<std::pair<int64_t, int>, RankHistory> history_;  // by (attempt, port)
  double run_steps_ = 0;                // the run's measured steps and seconds
  double run_seconds_ = 0;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_SCRAPED_METRICS_H_
