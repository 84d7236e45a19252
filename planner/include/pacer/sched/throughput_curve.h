// A job's throughput curve T(g): training iterations per second (one
// iteration = one global batch, kept fixed) at each GPU count the job may run
// on. The allowed counts are the curve's levels; the scheduler never gives a
// job a count between two levels.
//
// Created from measured or predicted points (the planner's steps/s at g GPUs,
// or a profiled table such as ElasticFlow's): points above `max_gpus` are
// dropped, and with `drop_past_peak` so is every point that is not faster
// than all smaller counts, because more GPUs for no more throughput only
// waste GPUs.
// Thread-safety: immutable after Create(); safe for concurrent reads.
#ifndef PACER_SCHED_THROUGHPUT_CURVE_H_
#define PACER_SCHED_THROUGHPUT_CURVE_H_

#include <vector>

#include "pacer/status.h"

namespace pacer::sched {

struct ThroughputPoint {
  int gpus = 0;
  double iterations_per_second = 0;
};

class ThroughputCurve {
 public:
  ThroughputCurve() = default;

  // InvalidArgument when no usable point remains (no positive throughput at
  // 1..max_gpus GPUs).
  static StatusOr<ThroughputCurve> Create(std::vector<ThroughputPoint> points, int max_gpus,
                                          bool drop_past_peak);

  // Ascending by gpus.
  const std::vector<ThroughputPoint>& levels() const { return levels_; }
  int min_gpus() const { return levels_.empty() ? 0 : levels_.front().gpus; }
  int max_gpus() const { return levels_.empty() ? 0 : levels_.back().gpus; }

  // The largest level <= gpus, 0 when gpus is below the smallest level.
  int FloorLevel(int gpus) const;
  // The smallest level > gpus, 0 when there is none.
  int NextLevel(int gpus) const;
  // Iterations/s on FloorLevel(gpus) GPUs (0 below the smallest level).
  double IterationsPerSecond(int gpus) const;

 private:
  std::vector<ThroughputPoint> levels_;
};

}  // namespace pacer::sched

#endif  // PACER_SCHED_THROUGHPUT_CURVE_H_
