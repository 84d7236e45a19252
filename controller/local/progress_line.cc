#include "local/progress_line.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>
#include <vector>

#include "cli/format.h"
#include "pacer/planner/calibration.h"
#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

// UTC, as every timestamp Pacer writes: the time of day when `unix_seconds`
// falls on the same UTC day as `now`, else with the date ("Nov 24 14:02:31"),
// so that a deadline tomorrow does not read as one today.
std::string ClockTime(int64_t unix_seconds, int64_t now_unix_seconds) {
  const std::string rfc = planner::FormatRfc3339(unix_seconds);  // 2026-11-22T14:02:31Z
  if (rfc.size() < 19) return rfc;
  const std::string time = rfc.substr(11, 8);
  if (rfc.substr(0, 10) == planner::FormatRfc3339(now_unix_seconds).substr(0, 10)) return time;
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const int month = std::stoi(rfc.substr(5, 2));
  const std::string month_name = month >= 1 && month <= 12 ? kMonths[month - 1] : rfc.substr(5, 2);
  return month_name + " " + std::to_string(std::stoi(rfc.substr(8, 2))) + " " + time;
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

// One field of the progress line; the lowest-priority fields (largest
// number) are dropped first when the line would not fit.
struct Field {
  std::string text;
  int priority;
};

}  // namespace

std::string ProgressLine::Render(const JobView& v, int64_t now_unix_seconds, int columns) {
  // Within [0, 1] whatever the view says: past it the bar's unfilled part
  // was a negative length (a crash in std::string).
  const double fraction =
      v.total_steps > 0
          ? std::clamp(static_cast<double>(v.steps_completed) / static_cast<double>(v.total_steps),
                       0.0, 1.0)
          : 0.0;
  // The bar shrinks on narrow terminals before any field is dropped.
  const int bar_width = columns >= 120 ? 20 : columns >= 100 ? 10 : 6;
  const int filled = static_cast<int>(std::floor(fraction * bar_width));
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%3.0f%%", fraction * 100);
  std::vector<Field> fields;
  fields.push_back({"[" + std::string(static_cast<size_t>(filled), '#') +
                        std::string(static_cast<size_t>(bar_width - filled), '-') + "] " + pct,
                    0});
  fields.push_back(
      {"step " + std::to_string(v.steps_completed) + "/" + std::to_string(v.total_steps), 0});
  if (v.measured_step_seconds) {
    fields.push_back({Seconds(*v.measured_step_seconds) + "/step", 3});
    if (v.plan) fields.push_back({"(predicted " + Seconds(v.plan->step.step_seconds) + ")", 6});
  } else if (v.plan) {
    fields.push_back({"predicted " + Seconds(v.plan->step.step_seconds) + "/step", 5});
  }
  if (v.projected_completion_unix_seconds) {
    fields.push_back(
        {"ETA " + ClockTime(*v.projected_completion_unix_seconds, now_unix_seconds), 2});
  }
  if (v.deadline_unix_seconds) {
    fields.push_back({"deadline " + ClockTime(*v.deadline_unix_seconds, now_unix_seconds), 4});
    if (v.slack_seconds)
      fields.push_back({"slack " + cli::FormatSignedDuration(*v.slack_seconds), 2});
  }
  fields.push_back({"replans " + std::to_string(v.replans), 7});
  if (v.restarts > 0) fields.push_back({"restarts " + std::to_string(v.restarts), 5});
  fields.push_back({PhaseName(v.phase), 1});

  // The last column stays empty: a character there makes some terminals wrap.
  const size_t limit = static_cast<size_t>(std::max(columns - 1, 1));
  auto join = [&fields]() {
    std::string line;
    for (const Field& f : fields) line += (line.empty() ? "" : "  ") + f.text;
    return line;
  };
  std::string line = join();
  while (line.size() > limit && fields.size() > 1) {
    auto lowest =
        std::max_element(fields.begin(), fields.end(),
                         [](const Field& a, const Field& b) { return a.priority < b.priority; });
    if (lowest->priority == 0) break;
    fields.erase(lowest);
    line = join();
  }
  if (line.size() > limit) line.resize(limit);
  return line;
}

void ProgressLine::ClearLive() {
  if (live_drawn_) {
    out_ << "\r\033[2K";
    live_drawn_ = false;
  }
}

void ProgressLine::Update(const JobView& view, int64_t now_unix_seconds) {
  if (mode_ == Mode::kNone) return;
  if (mode_ == Mode::kLive) {
    const std::string line =
        Render(view, now_unix_seconds, width_ ? width_->Columns() : kFallbackTerminalColumns);
    ClearLive();
    out_ << line;
    out_.flush();
    live_drawn_ = true;
    return;
  }
  const std::string line = Render(view, now_unix_seconds, kPlainColumns);
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
                       std::optional<double> run_step_seconds, std::ostream& out) const {
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
  const std::optional<double> measured =
      run_step_seconds ? run_step_seconds : view.measured_step_seconds;
  // A broken exporter's number is no measurement (the reconciler says so in
  // Degraded/MetricsImplausible); printed in full, 1e300 took 300 digits.
  if (measured && view.plan &&
      planner::PlausibleStepTimeRatio(*measured / view.plan->step.step_seconds)) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2f", *measured / view.plan->step.step_seconds);
    out << "  step time    measured " << Seconds(*measured) << ", predicted "
        << Seconds(view.plan->step.step_seconds) << " (measured/predicted " << ratio << ")\n";
  }
  if (first_eta_) {
    out << "  first ETA    " << planner::FormatRfc3339(*first_eta_) << " (at step "
        << first_eta_step_ << ", " << ClockTime(first_eta_at_, ended_unix_seconds) << ")\n";
    if (view.phase == Phase::kSucceeded) {
      out << "  finished     " << planner::FormatRfc3339(ended_unix_seconds) << " ("
          << cli::FormatSignedDuration(static_cast<double>(ended_unix_seconds - *first_eta_))
          << " against the first ETA)\n";
    }
  }
  if (view.deadline_unix_seconds) {
    const double margin = static_cast<double>(*view.deadline_unix_seconds - ended_unix_seconds);
    out << "  deadline     " << planner::FormatRfc3339(*view.deadline_unix_seconds);
    if (view.phase == Phase::kSucceeded) {
      out << (margin >= 0 ? " met, " : " missed, ") << cli::FormatSignedDuration(margin) << '\n';
    } else {
      out << '\n';
    }
  }
  out << "  replans      " << view.replans << ", restarts " << view.restarts << '\n';
  out << "  logs         " << work_dir << "/logs\n";
  (void)job;
}

}  // namespace pacer::controller
