// Readers for the public elastic-scheduling data sets (ElasticFlow, ASPLOS'23;
// see data/elasticflow/SOURCE.md): job traces, long-format throughput tables
// and per-model GPU caps, and the glue that turns them into simulator jobs.
//
// Trace columns (either spelling; extra columns are ignored):
//   job_id | submission_time or submit_time (s) | num_iteration or iteration |
//   model_name | deadline or ddl (s, absolute; empty = best effort) |
//   batch_size | num_gpu (optional) | duration (s, optional)
// Throughput columns: gpu_type, model, global_batch_size, num_gpus,
//   iters_per_sec (empty = not profiled; other columns ignored).
// GPU caps columns: gpu_type, model, global_batch_size, ef_max_gpus,
//   baseline_max_gpus.
// Errors name the source, the 1-based line and the column.
// Thread-safety: pure functions.
#ifndef PACER_SCHED_TRACE_CSV_H_
#define PACER_SCHED_TRACE_CSV_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "pacer/sched/scheduler.h"
#include "pacer/sched/simulator.h"
#include "pacer/status.h"

namespace pacer::sched {

struct TraceJob {
  std::string id;
  double arrival_seconds = 0;
  double iterations = 0;
  std::optional<double> deadline_seconds;
  std::string model;
  int batch_size = 0;
  int requested_gpus = 0;  // 0 when the trace has no num_gpu column
  int line = 0;            // in the trace file, for error messages
};

StatusOr<std::vector<TraceJob>> ParseTraceCsv(std::string_view text, std::string_view source);

// (gpu_type, model, global batch size).
using CurveKey = std::tuple<std::string, std::string, int>;

struct ThroughputTable {
  std::map<CurveKey, std::vector<ThroughputPoint>> points;
  std::map<CurveKey, int> pacer_max_gpus;     // ElasticFlow's cap (ef_max_gpus)
  std::map<CurveKey, int> baseline_max_gpus;  // the baselines' cap
};

StatusOr<ThroughputTable> ParseThroughputCsv(std::string_view text, std::string_view source);
// Adds the caps to `table`.
Status ParseMaxGpusCsv(std::string_view text, std::string_view source, ThroughputTable& table);

// The GPU type whose curves cover every (model, batch) of the trace (the
// first by name when several do). NotFound names a missing pair otherwise.
StatusOr<std::string> ChooseGpuType(const std::vector<TraceJob>& trace,
                                    const ThroughputTable& table);

// Simulator jobs on `gpu_type`: each job's curve capped by the policy's cap
// (kPacer: pacer_max_gpus, else baseline_max_gpus; the largest profiled count
// when the table has none) and by the pool. kPacer drops levels past a
// curve's peak; the baselines keep them, as ElasticFlow's baselines do.
// NotFound for a (model, batch) without a curve, naming the trace line.
StatusOr<std::vector<SimJob>> BuildSimJobs(const std::vector<TraceJob>& trace,
                                           const ThroughputTable& table,
                                           const std::string& gpu_type, int cluster_gpus,
                                           Policy policy, std::string_view trace_source);

}  // namespace pacer::sched

#endif  // PACER_SCHED_TRACE_CSV_H_
