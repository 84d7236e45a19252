// Local mode's terminal output: a live progress line (redrawn in place on a
// terminal, one line per change otherwise), events above it, and the final
// summary with the first ETA against the actual finish.
//
//   [#########-----------]  45%  step 135/300  0.21 s/step (predicted 0.18)
//       ETA 14:02:31, deadline 14:10:00 (slack +7m29s)  replans 0  Running
//
// Units: Unix seconds in, human-readable durations out.
// Thread-safety: not thread-safe; one thread draws.
#ifndef PACER_CONTROLLER_LOCAL_PROGRESS_LINE_H_
#define PACER_CONTROLLER_LOCAL_PROGRESS_LINE_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "local/local_store.h"
#include "reconcile/reconciler.h"

namespace pacer::controller {

class ProgressLine {
 public:
  enum class Mode { kLive, kPlain, kNone };
  ProgressLine(std::ostream& out, Mode mode) : out_(out), mode_(mode) {}

  void Update(const JobView& view, int64_t now_unix_seconds);
  void Event(const LocalEvent& event);
  void Message(const std::string& line);
  void Finish();  // ends the live line

  // The line for `view` (no terminal control characters), for tests.
  static std::string Render(const JobView& view, int64_t now_unix_seconds);

 private:
  void ClearLive();
  std::ostream& out_;
  Mode mode_;
  bool live_drawn_ = false;
  std::string last_plain_;
  int64_t last_plain_step_ = -1;
  int64_t last_plain_time_ = 0;
};

// What the summary needs from the whole run.
class RunSummary {
 public:
  void Observe(const JobView& view, int64_t now_unix_seconds);
  void Print(const JobView& view, const nlohmann::json& job, int64_t started_unix_seconds,
             int64_t ended_unix_seconds, const std::string& work_dir, std::ostream& out) const;

  // The first projection made from a measured step time, and when.
  std::optional<int64_t> first_eta_unix_seconds() const { return first_eta_; }

 private:
  std::optional<int64_t> first_eta_;
  int64_t first_eta_step_ = 0;
  int64_t first_eta_at_ = 0;
  std::optional<double> predicted_step_seconds_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_PROGRESS_LINE_H_
