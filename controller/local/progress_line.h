// Local mode's terminal output: a live progress line (redrawn in place on a
// terminal, one line per change otherwise), events above it, and the final
// summary with the first ETA against the actual finish.
//
//   [#########-----------]  45%  step 135/300  0.21 s/step  (predicted 0.18 s)
//       ETA 14:02:31  deadline Nov 24 09:10:00  slack +19h7m  replans 0  Running
//
// The live line fits the terminal (terminal_width.h): on a narrow one the bar
// shrinks and the least useful fields go first (replans, the prediction, the
// deadline), so it never wraps and "\r" redraws it in place. Times are UTC,
// with the date when not today.
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
#include "local/terminal_width.h"
#include "reconcile/reconciler.h"

namespace pacer::controller {

class ProgressLine {
 public:
  enum class Mode { kLive, kPlain, kNone };
  // `width` (live mode) gives the terminal's columns; null = 80.
  ProgressLine(std::ostream& out, Mode mode, TerminalWidth* width = nullptr)
      : out_(out), mode_(mode), width_(width) {}

  void Update(const JobView& view, int64_t now_unix_seconds);
  void Event(const LocalEvent& event);
  void Message(const std::string& line);
  void Finish();  // ends the live line

  // The line for `view` in at most `columns` - 1 characters (no terminal
  // control characters). Plain mode (logs) renders for kPlainColumns.
  static constexpr int kPlainColumns = 1000;
  static std::string Render(const JobView& view, int64_t now_unix_seconds, int columns);

 private:
  void ClearLive();
  std::ostream& out_;
  Mode mode_;
  TerminalWidth* width_;
  bool live_drawn_ = false;
  std::string last_plain_;
  int64_t last_plain_step_ = -1;
  int64_t last_plain_time_ = 0;
};

// What the summary needs from the whole run.
class RunSummary {
 public:
  void Observe(const JobView& view, int64_t now_unix_seconds);
  // `run_step_seconds`: the whole run's mean step time (the scrape source's),
  // printed as "measured"; the last scrape window's when absent.
  void Print(const JobView& view, const nlohmann::json& job, int64_t started_unix_seconds,
             int64_t ended_unix_seconds, const std::string& work_dir,
             std::optional<double> run_step_seconds, std::ostream& out) const;

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
