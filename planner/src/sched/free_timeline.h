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
  size_t Split(double t);
  // Subtracts `gpus` on [t0, t1).
  void Reserve(double t0, double t1, int gpus);

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
