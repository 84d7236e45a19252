#include "free_timeline.h"

#include <algorithm>
#include <cmath>

namespace pacer::sched {
namespace {
constexpr double kSnapSeconds = 1e-3;
}  // namespace

FreeTimeline::FreeTimeline(double now_seconds, int gpus) : starts_{now_seconds}, free_{gpus} {}

size_t FreeTimeline::Split(double t, size_t from) {
  if (t <= starts_.front() + kSnapSeconds) return 0;
  // The first breakpoint at or after t - 1 ms, searched from `from` with
  // doubling steps (it is most often a few segments on), then bisected.
  const double key = t - kSnapSeconds;
  const size_t n = starts_.size();
  size_t lo = std::min(from, n);
  // A hint past t (spans out of order) would insert t out of order: search
  // from the front instead.
  if (lo > 0 && starts_[lo - 1] >= key) lo = 0;
  size_t hi = lo;
  for (size_t step = 1; hi < n && starts_[hi] < key; step *= 2) {
    lo = hi + 1;
    hi += step;
  }
  hi = std::min(hi, n);
  auto it = std::lower_bound(starts_.begin() + static_cast<std::ptrdiff_t>(lo),
                             starts_.begin() + static_cast<std::ptrdiff_t>(hi), key);
  size_t i = static_cast<size_t>(it - starts_.begin());
  if (i < n && std::fabs(starts_[i] - t) <= kSnapSeconds) return i;
  // Segment i-1 contains t: split it.
  starts_.insert(starts_.begin() + static_cast<std::ptrdiff_t>(i), t);
  free_.insert(free_.begin() + static_cast<std::ptrdiff_t>(i), free_[i - 1]);
  return i;
}

size_t FreeTimeline::Reserve(double t0, double t1, int gpus, size_t from) {
  if (gpus == 0 || t1 <= t0) return from;
  const size_t first = Split(t0, from);
  const size_t last = std::isinf(t1) ? starts_.size() : Split(t1, first);
  for (size_t i = first; i < last; ++i) free_[i] -= gpus;
  return last;
}

}  // namespace pacer::sched
