#include "local/progress_line.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

std::string TimeOfDay(int64_t unix_seconds) {
  // UTC, as every timestamp Pacer writes.
  const std::string rfc = planner::FormatRfc3339(unix_seconds);  // 2026-11-22T14:02:31Z
  return rfc.size() >= 19 ? rfc.substr(11, 8) : rfc;
}

std::string Seconds(double s) {
  char buffer[32];
  if (s < 10) {
    std::snprintf(buffer, sizeof(buffer), "%.3g s", s);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.0f s", s);
  }
  return buffer;
}

std::string Signed(double seconds) {
  return (seconds >= 0 ? "+" : "-") + planner::FormatDurationHuman(std::fabs(seconds));
}

}  // namespace

std::string ProgressLine::Render(const JobView& v, int64_t now_unix_seconds) {
  (void)now_unix_seconds;
  std::ostringstream line;
  const double fraction = v.total_steps > 0 ? static_cast<double>(v.steps_completed) /
                                                  static_cast<double>(v.total_steps)
                                            : 0.0;
  const int width = 20;
  const int filled = static_cast<int>(std::floor(fraction * width));
  line << '[' << std::string(static_cast<size_t>(filled), '#')
       << std::string(static_cast<size_t>(width - filled), '-') << "] ";
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%3.0f%%", fraction * 100);
  line << pct << "  step " << v.steps_completed << '/' << v.total_steps;
  if (v.measured_step_seconds) {
    line << "  " << Seconds(*v.measured_step_seconds) << "/step";
    if (v.plan) line << " (predicted " << Seconds(v.plan->step.step_seconds) << ")";
  } else if (v.plan) {
    line << "  predicted " << Seconds(v.plan->step.step_seconds) << "/step";
  }
  if (v.projected_completion_unix_seconds) {
    line << "  ETA " << TimeOfDay(*v.projected_completion_unix_seconds);
  }
  if (v.deadline_unix_seconds) {
    line << ", deadline " << TimeOfDay(*v.deadline_unix_seconds);
    if (v.slack_seconds) line << " (slack " << Signed(*v.slack_seconds) << ")";
  }
  line << "  replans " << v.replans;
  if (v.restarts > 0) line << "  restarts " << v.restarts;
  line << "  " << PhaseName(v.phase);
  return line.str();
}

void ProgressLine::ClearLive() {
  if (live_drawn_) {
    out_ << "\r\033[2K";
    live_drawn_ = false;
  }
}

void ProgressLine::Update(const JobView& view, int64_t now_unix_seconds) {
  if (mode_ == Mode::kNone) return;
  const std::string line = Render(view, now_unix_seconds);
  if (mode_ == Mode::kLive) {
    ClearLive();
    out_ << line;
    out_.flush();
    live_drawn_ = true;
    return;
  }
  // Plain: one line per 10 % of progress or phase change, at most every 5 s
  // otherwise, so logs stay readable.
  const int64_t decile = view.total_steps > 0 ? view.steps_completed * 10 / view.total_steps : 0;
  const bool phase_changed =
      last_plain_.empty() || last_plain_.find(PhaseName(view.phase)) == std::string::npos;
  if (phase_changed || decile != last_plain_step_ || now_unix_seconds - last_plain_time_ >= 5) {
    if (line != last_plain_) out_ << line << '\n';
    last_plain_ = line;
    last_plain_step_ = decile;
    last_plain_time_ = now_unix_seconds;
    out_.flush();
  }
}

void ProgressLine::Event(const LocalEvent& event) {
  if (mode_ == Mode::kNone) return;
  ClearLive();
  out_ << (event.type == "Warning" ? "! " : "* ") << event.reason << ": " << event.message << '\n';
  out_.flush();
}

void ProgressLine::Message(const std::string& text) {
  if (mode_ == Mode::kNone) return;
  ClearLive();
  out_ << text << '\n';
  out_.flush();
}

void ProgressLine::Finish() {
  if (live_drawn_) {
    out_ << '\n';
    live_drawn_ = false;
  }
  out_.flush();
}

void RunSummary::Observe(const JobView& view, int64_t now_unix_seconds) {
  if (view.plan && !predicted_step_seconds_) predicted_step_seconds_ = view.plan->step.step_seconds;
  if (!first_eta_ && view.measured_step_seconds && view.projected_completion_unix_seconds &&
      view.phase == Phase::kRunning) {
    first_eta_ = *view.projected_completion_unix_seconds;
    first_eta_step_ = view.steps_completed;
    first_eta_at_ = now_unix_seconds;
  }
}

void RunSummary::Print(const JobView& view, const nlohmann::json& job, int64_t started_unix_seconds,
                       int64_t ended_unix_seconds, const std::string& work_dir,
                       std::ostream& out) const {
  out << "\nTrainJob " << view.job.key() << ": " << PhaseName(view.phase) << " after "
      << planner::FormatDurationHuman(
             static_cast<double>(ended_unix_seconds - started_unix_seconds))
      << '\n';
  for (const Condition& c : view.conditions) {
    if (c.status == kConditionTrue &&
        (c.type == kConditionInfeasible || c.type == kConditionFailed ||
         c.type == kConditionInvalidSpec)) {
      out << "  " << c.type << " (" << c.reason << "): " << c.message << '\n';
    }
  }
  if (view.plan) {
    out << "  plan         " << view.plan->layout.ToString() << " (attempt " << view.attempt
        << ")\n";
  }
  out << "  steps        " << view.steps_completed << " of " << view.total_steps << '\n';
  if (view.measured_step_seconds && view.plan) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2f",
                  *view.measured_step_seconds / view.plan->step.step_seconds);
    out << "  step time    measured " << Seconds(*view.measured_step_seconds) << ", predicted "
        << Seconds(view.plan->step.step_seconds) << " (measured/predicted " << ratio << ")\n";
  }
  if (first_eta_) {
    out << "  first ETA    " << planner::FormatRfc3339(*first_eta_) << " (at step "
        << first_eta_step_ << ", " << TimeOfDay(first_eta_at_) << ")\n";
    if (view.phase == Phase::kSucceeded) {
      out << "  finished     " << planner::FormatRfc3339(ended_unix_seconds) << " ("
          << Signed(static_cast<double>(ended_unix_seconds - *first_eta_))
          << " against the first ETA)\n";
    }
  }
  if (view.deadline_unix_seconds) {
    const double margin = static_cast<double>(*view.deadline_unix_seconds - ended_unix_seconds);
    out << "  deadline     " << planner::FormatRfc3339(*view.deadline_unix_seconds);
    if (view.phase == Phase::kSucceeded) {
      out << (margin >= 0 ? " met, " : " missed, ") << Signed(margin) << '\n';
    } else {
      out << '\n';
    }
  }
  out << "  replans      " << view.replans << ", restarts " << view.restarts << '\n';
  out << "  logs         " << work_dir << "/logs\n";
  (void)job;
}

}  // namespace pacer::controller
