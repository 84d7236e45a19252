#include "pacer/sched/throughput_curve.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pacer::sched {

StatusOr<ThroughputCurve> ThroughputCurve::Create(std::vector<ThroughputPoint> points, int max_gpus,
                                                  bool drop_past_peak) {
  std::sort(points.begin(), points.end(),
            [](const ThroughputPoint& a, const ThroughputPoint& b) { return a.gpus < b.gpus; });
  ThroughputCurve curve;
  double best = 0;
  for (const ThroughputPoint& point : points) {
    if (point.gpus < 1 || point.gpus > max_gpus) continue;
    if (!std::isfinite(point.iterations_per_second) || point.iterations_per_second <= 0) continue;
    if (!curve.levels_.empty() && curve.levels_.back().gpus == point.gpus) {
      return InvalidArgumentError("throughput curve lists " + std::to_string(point.gpus) +
                                  " GPUs twice; give one throughput per GPU count");
    }
    if (drop_past_peak && point.iterations_per_second <= best) continue;
    best = std::max(best, point.iterations_per_second);
    curve.levels_.push_back(point);
  }
  if (curve.levels_.empty()) {
    return InvalidArgumentError("throughput curve has no positive throughput at 1.." +
                                std::to_string(max_gpus) + " GPUs");
  }
  return curve;
}

int ThroughputCurve::FloorLevel(int gpus) const {
  int level = 0;
  for (const ThroughputPoint& point : levels_) {
    if (point.gpus > gpus) break;
    level = point.gpus;
  }
  return level;
}

int ThroughputCurve::NextLevel(int gpus) const {
  for (const ThroughputPoint& point : levels_) {
    if (point.gpus > gpus) return point.gpus;
  }
  return 0;
}

double ThroughputCurve::IterationsPerSecond(int gpus) const {
  double rate = 0;
  for (const ThroughputPoint& point : levels_) {
    if (point.gpus > gpus) break;
    rate = point.iterations_per_second;
  }
  return rate;
}

}  // namespace pacer::sched
