// Local mode's progress line: it fits the terminal (the least useful fields
// go first) and dates the times that are not today.
#include "local/progress_line.h"

#include <gtest/gtest.h>

#include <sstream>

#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

constexpr int64_t kNowUnixSeconds = 1795852800;  // 2026-11-28T08:00:00Z

JobView RunningView() {
  JobView v;
  v.job = JobRef{"default", "quickstart", "", std::nullopt, std::nullopt};
  v.phase = Phase::kRunning;
  planner::Evaluation plan;
  plan.step.step_seconds = 0.79;
  v.plan = plan;
  v.steps_completed = 108;
  v.total_steps = 150;
  v.measured_step_seconds = 0.19;
  v.projected_completion_unix_seconds = kNowUnixSeconds + 8;
  v.deadline_unix_seconds = kNowUnixSeconds + 9 * 60 + 32;
  v.slack_seconds = 9 * 60 + 24;
  v.replans = 1;
  v.restarts = 2;
  return v;
}

TEST(ProgressLineTest, WideTerminalShowsEveryField) {
  ASSERT_EQ(planner::FormatRfc3339(kNowUnixSeconds), "2026-11-28T08:00:00Z");
  const std::string line = ProgressLine::Render(RunningView(), kNowUnixSeconds, 200);
  EXPECT_LT(line.size(), 200u);
  for (const char* field : {"[##############------]", "72%", "step 108/150", "0.19 s/step",
                            "(predicted 0.79 s)", "ETA 08:00:08", "deadline 08:09:32",
                            "slack +9m24s", "replans 1", "restarts 2", "Running"}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;
  }
}

TEST(ProgressLineTest, NarrowTerminalsDropTheLeastUsefulFieldsFirst) {
  for (int columns : {40, 60, 80, 100, 120}) {
    const std::string line = ProgressLine::Render(RunningView(), kNowUnixSeconds, columns);
    // The last column stays empty, so the terminal never wraps the line.
    EXPECT_LT(line.size(), static_cast<size_t>(columns)) << line;
    EXPECT_NE(line.find("step 108/150"), std::string::npos) << line;
  }
  const std::string line80 = ProgressLine::Render(RunningView(), kNowUnixSeconds, 80);
  for (const char* kept : {"72%", "ETA 08:00:08", "slack +9m24s", "Running", "0.19 s/step"}) {
    EXPECT_NE(line80.find(kept), std::string::npos) << kept << " in " << line80;
  }
  EXPECT_EQ(line80.find("replans"), std::string::npos) << line80;
}

// More steps done than the job has (a status from a larger spec), or fewer
// than none: the bar stays within its width. Its unfilled part was a
// negative length, a crash in std::string.
TEST(ProgressLineTest, TheBarStaysFullOrEmptyPastItsEnds) {
  JobView v = RunningView();
  v.steps_completed = 200;
  std::string line = ProgressLine::Render(v, kNowUnixSeconds, 200);
  EXPECT_NE(line.find("[####################] 100%"), std::string::npos) << line;
  v.steps_completed = -5;
  line = ProgressLine::Render(v, kNowUnixSeconds, 200);
  EXPECT_NE(line.find("[--------------------]   0%"), std::string::npos) << line;
}

TEST(ProgressLineTest, TimesOnAnotherDayCarryTheirDate) {
  JobView v = RunningView();
  v.deadline_unix_seconds = kNowUnixSeconds + 26 * 3600;  // tomorrow 10:00
  v.slack_seconds = 26 * 3600 - 8;
  const std::string line = ProgressLine::Render(v, kNowUnixSeconds, 200);
  EXPECT_NE(line.find("deadline Nov 29 10:00:00"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 08:00:08"), std::string::npos) << line;  // today: no date
}

// The summary quotes a measured step time only when a worker could have
// taken it: a broken exporter's 1e300 s was printed in full, 300 digits.
TEST(RunSummaryTest, AStepTimeNoWorkerCouldTakeIsNotQuotedAsMeasured) {
  const JobView view = RunningView();
  const RunSummary summary;
  std::ostringstream plausible, absurd;
  summary.Print(view, nlohmann::json::object(), kNowUnixSeconds - 60, kNowUnixSeconds, "/tmp/w",
                0.19, plausible);
  summary.Print(view, nlohmann::json::object(), kNowUnixSeconds - 60, kNowUnixSeconds, "/tmp/w",
                1e300, absurd);
  EXPECT_NE(plausible.str().find("measured/predicted 0.24"), std::string::npos) << plausible.str();
  EXPECT_EQ(absurd.str().find("step time"), std::string::npos) << absurd.str();
  EXPECT_LT(absurd.str().size(), plausible.str().size());
}

}  // namespace
}  // namespace pacer::controller
