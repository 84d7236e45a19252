// Free GPUs of one pool over future time, as a step function: the admission
// test reserves each job's plan here (ElasticFlow's "reservation timeline").
// Internal to the scheduler. Units: seconds, GPUs.
// Thread-safety: none; one pass owns one timeline.
#ifndef PACER_SCHED_FREE_TIMELINE_H_
#define PACER_SCHED_FREE_TIMELINE_H_

#include <cstddef>
#include <limits>
#include <vector>

namespace pacer::sched {

inline constexpr double kForever = std::numeric_limits<double>::infinity();

class FreeTimeline {
 public:
  // All `gpus` free from `now_seconds` on.
  FreeTimeline(double now_seconds, int gpus);

  // Makes `t` a breakpoint (t >= now) and returns the index of the segment
  // that starts there. Times within 1 ms of a breakpoint snap to it.
  // `from`: a caller walking ascending times passes the index the previous
  // Split returned (every breakpoint before it lies more than 1 ms before
  // t), and the search starts there instead of at the front: a pass
  // reserves thousands of spans on a timeline of thousands of breakpoints,
  // and the binary search over all of it was most of the pass.
  size_t Split(double t, size_t from = 0);
  // Subtracts `gpus` on [t0, t1); `from` as for Split (for t0). Returns the
  // index of the segment that starts at t1 (size() for t1 = kForever), the
  // `from` of a next span that starts at or after t1; `from` when it
  // reserves nothing.
  size_t Reserve(double t0, double t1, int gpus, size_t from = 0);

  size_t size() const { return starts_.size(); }
  double start(size_t i) const { return starts_[i]; }
  double end(size_t i) const { return i + 1 < starts_.size() ? starts_[i + 1] : kForever; }
  int free(size_t i) const { return free_[i]; }

 private:
  std::vector<double> starts_;
  std::vector<int> free_;
};

}  // namespace pacer::sched

#endif  // PACER_SCHED_FREE_TIMELINE_H_
