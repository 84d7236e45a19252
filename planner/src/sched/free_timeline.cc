#include "free_timeline.h"

#include <algorithm>
#include <cmath>

namespace pacer::sched {
namespace {
constexpr double kSnapSeconds = 1e-3;
}  // namespace

FreeTimeline::FreeTimeline(double now_seconds, int gpus) : starts_{now_seconds}, free_{gpus} {}

size_t FreeTimeline::Split(double t) {
  if (t <= starts_.front() + kSnapSeconds) return 0;
  auto it = std::lower_bound(starts_.begin(), starts_.end(), t - kSnapSeconds);
  size_t i = static_cast<size_t>(it - starts_.begin());
  if (i < starts_.size() && std::fabs(starts_[i] - t) <= kSnapSeconds) return i;
  // Segment i-1 contains t: split it.
  starts_.insert(starts_.begin() + static_cast<std::ptrdiff_t>(i), t);
  free_.insert(free_.begin() + static_cast<std::ptrdiff_t>(i), free_[i - 1]);
  return i;
}

void FreeTimeline::Reserve(double t0, double t1, int gpus) {
  if (gpus == 0 || t1 <= t0) return;
  size_t first = Split(t0);
  size_t last = std::isinf(t1) ? starts_.size() : Split(t1);
  for (size_t i = first; i < last; ++i) free_[i] -= gpus;
}

}  // namespace pacer::sched
