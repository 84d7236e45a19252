// ControllerMetrics through its text exposition, as Prometheus reads it:
// reconcile counters and histogram, queue, leader and build info carry the
// recorded numbers; per-job gauges appear, disappear when absent or when the
// job is removed, and the phase is one-hot.
#include "observe/controller_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pacer::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

// Parses the sample lines of the text format (names, labels without escaped
// characters, values), skipping # HELP / # TYPE.
std::vector<Sample> ParseSamples(const std::string& text) {
  std::vector<Sample> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t pos = line.find_first_of("{ ");
    s.name = line.substr(0, pos);
    if (line[pos] == '{') {
      const size_t close = line.find('}', pos);
      std::string body = line.substr(pos + 1, close - pos - 1);
      size_t p = 0;
      while (p < body.size()) {
        const size_t eq = body.find('=', p);
        const size_t q1 = body.find('"', eq);
        const size_t q2 = body.find('"', q1 + 1);
        s.labels[body.substr(p, eq - p)] = body.substr(q1 + 1, q2 - q1 - 1);
        p = q2 + 1;
        if (p < body.size() && body[p] == ',') ++p;
      }
      pos = close + 1;
    }
    s.value = std::stod(line.substr(pos + 1));
    samples.push_back(std::move(s));
  }
  return samples;
}

// The value of the one series with exactly these labels, if present.
std::optional<double> Value(const ControllerMetrics& metrics, const std::string& name,
                            const Labels& labels = {}) {
  for (const Sample& s : ParseSamples(metrics.Serialize())) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

// All series of `name` whose labels include `subset`.
std::vector<Sample> Series(const ControllerMetrics& metrics, const std::string& name,
                           const Labels& subset = {}) {
  std::vector<Sample> out;
  for (const Sample& s : ParseSamples(metrics.Serialize())) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : subset) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) out.push_back(s);
  }
  return out;
}

Labels Job(const std::string& ns, const std::string& name) {
  return {{"namespace", ns}, {"trainjob", name}};
}

const std::vector<std::string> kJobGauges = {
    "pacer_trainjob_predicted_step_seconds",
    "pacer_trainjob_measured_step_seconds",
    "pacer_trainjob_projected_completion_timestamp_seconds",
    "pacer_trainjob_deadline_timestamp_seconds",
    "pacer_trainjob_deadline_slack_seconds",
    "pacer_trainjob_gpus",
    "pacer_trainjob_progress_ratio",
};

JobMetrics FullJob(const std::string& ns, const std::string& name) {
  JobMetrics job;
  job.namespace_name = ns;
  job.name = name;
  job.predicted_step_seconds = 1.25;
  job.measured_step_seconds = 1.5;
  job.projected_completion_timestamp_seconds = 1.8e9;
  job.deadline_timestamp_seconds = 1.8e9 + 3600;
  job.deadline_slack_seconds = 3600;
  job.gpus = 16;
  job.progress_ratio = 0.25;
  job.phase = "Running";
  return job;
}

TEST(ControllerMetricsTest, ControllerSeriesStartAtZeroWithBuildInfo) {
  ControllerMetrics metrics("1.2.3-test");
  EXPECT_EQ(Value(metrics, "pacer_controller_build_info", {{"version", "1.2.3-test"}}), 1.0);
  for (const char* result : {"success", "error", "requeue"}) {
    EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_total", {{"result", result}}), 0.0)
        << result;
  }
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_duration_seconds_count"), 0.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_workqueue_depth"), 0.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_workqueue_adds_total"), 0.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_leader"), 0.0);
  EXPECT_TRUE(Series(metrics, "pacer_controller_reconcile_errors_total").empty());

  ControllerMetrics default_version;
  const std::vector<Sample> info = Series(default_version, "pacer_controller_build_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_FALSE(info[0].labels.at("version").empty());
}

TEST(ControllerMetricsTest, ReconcileCountsResultsReasonsAndDurations) {
  ControllerMetrics metrics("test");
  struct Call {
    double seconds;
    Status result;
    bool requeued;
  };
  const std::vector<Call> calls = {
      {0.0001, Status::Ok(), false},
      {0.003, Status::Ok(), false},
      {0.2, Status::Ok(), true},
      {5.0, UnavailableError("apiserver 503"), true},  // an error is an error, requeued or not
      {0.04, UnavailableError("apiserver 503"), false},
      {20.0, InternalError("bug"), false},
      {0.0005, Status(StatusCode::kAborted, "conflict"), false},
      {std::nan(""), Status::Ok(), false},  // counted, but not observed
  };
  double sum = 0;
  std::vector<double> observed;
  for (const Call& c : calls) {
    metrics.RecordReconcile(c.seconds, c.result, c.requeued);
    if (std::isfinite(c.seconds)) {
      sum += c.seconds;
      observed.push_back(c.seconds);
    }
  }

  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_total", {{"result", "success"}}), 3.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_total", {{"result", "requeue"}}), 1.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_total", {{"result", "error"}}), 4.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_errors_total", {{"reason", "UNAVAILABLE"}}),
            2.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_errors_total", {{"reason", "INTERNAL"}}),
            1.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_errors_total", {{"reason", "ABORTED"}}),
            1.0);
  EXPECT_EQ(Series(metrics, "pacer_controller_reconcile_errors_total").size(), 3u);

  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_duration_seconds_count"),
            static_cast<double>(observed.size()));
  EXPECT_NEAR(Value(metrics, "pacer_controller_reconcile_duration_seconds_sum").value_or(-1), sum,
              1e-9);
  // Cumulative buckets: each counts the observations at or below its bound.
  const std::vector<Sample> buckets =
      Series(metrics, "pacer_controller_reconcile_duration_seconds_bucket");
  const std::vector<double> bounds = ControllerMetrics::ReconcileDurationBuckets();
  ASSERT_EQ(buckets.size(), bounds.size() + 1);  // + le="+Inf"
  for (const Sample& bucket : buckets) {
    const std::string le = bucket.labels.at("le");
    const double bound = le == "+Inf" ? INFINITY : std::stod(le);
    double expected = 0;
    for (double s : observed) expected += s <= bound ? 1 : 0;
    EXPECT_EQ(bucket.value, expected) << "le=" << le;
  }
}

TEST(ControllerMetricsTest, DurationBucketsAreExponentialFromHalfAMillisecondPastTenSeconds) {
  const std::vector<double> bounds = ControllerMetrics::ReconcileDurationBuckets();
  ASSERT_GE(bounds.size(), 2u);
  EXPECT_DOUBLE_EQ(bounds.front(), 0.0005);
  EXPECT_GE(bounds.back(), 10.0);
  EXPECT_LT(bounds[bounds.size() - 2], 10.0) << "no bucket wasted far beyond 10 s";
  for (size_t i = 1; i < bounds.size(); ++i) {
    EXPECT_DOUBLE_EQ(bounds[i] / bounds[i - 1], bounds[1] / bounds[0]);
  }
}

TEST(ControllerMetricsTest, QueueAndLeaderGauges) {
  ControllerMetrics metrics("test");
  metrics.SetQueueDepth(7);
  for (int i = 0; i < 5; ++i) metrics.CountQueueAdd();
  metrics.SetLeader(true);
  EXPECT_EQ(Value(metrics, "pacer_controller_workqueue_depth"), 7.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_workqueue_adds_total"), 5.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_leader"), 1.0);
  metrics.SetQueueDepth(0);
  metrics.SetLeader(false);
  EXPECT_EQ(Value(metrics, "pacer_controller_workqueue_depth"), 0.0);
  EXPECT_EQ(Value(metrics, "pacer_controller_leader"), 0.0);
}

TEST(ControllerMetricsTest, SetJobExportsEveryGaugeAndAbsentValuesRemoveSeries) {
  ControllerMetrics metrics("test");
  JobMetrics job = FullJob("research", "llama");
  job.progress_ratio = 1.5;  // clamped: a ratio never passes 1
  metrics.SetJob(job);
  const Labels labels = Job("research", "llama");
  EXPECT_EQ(Value(metrics, "pacer_trainjob_predicted_step_seconds", labels), 1.25);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_measured_step_seconds", labels), 1.5);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_projected_completion_timestamp_seconds", labels), 1.8e9);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_deadline_timestamp_seconds", labels), 1.8e9 + 3600);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_deadline_slack_seconds", labels), 3600.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_gpus", labels), 16.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_progress_ratio", labels), 1.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_replans_total", labels), 0.0) << "counters start at 0";
  EXPECT_EQ(Value(metrics, "pacer_trainjob_restarts_total", labels), 0.0);

  // The measurement is lost (Prometheus down): its series goes, others stay
  // and take the new values.
  job.measured_step_seconds.reset();
  job.deadline_slack_seconds = -120;
  job.progress_ratio = -0.5;
  metrics.SetJob(job);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_measured_step_seconds", labels), std::nullopt);
  EXPECT_TRUE(Series(metrics, "pacer_trainjob_measured_step_seconds").empty());
  EXPECT_EQ(Value(metrics, "pacer_trainjob_deadline_slack_seconds", labels), -120.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_progress_ratio", labels), 0.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_gpus", labels), 16.0);

  job.measured_step_seconds = 1.75;  // and back
  metrics.SetJob(job);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_measured_step_seconds", labels), 1.75);
}

TEST(ControllerMetricsTest, PhaseIsOneHot) {
  ControllerMetrics metrics("test");
  JobMetrics job = FullJob("ns", "job");
  auto phases = [&] {
    std::map<std::string, double> out;
    for (const Sample& s : Series(metrics, "pacer_trainjob_phase", Job("ns", "job"))) {
      out[s.labels.at("phase")] = s.value;
    }
    return out;
  };
  auto expect_one_hot = [&](const std::string& current, size_t series) {
    const std::map<std::string, double> p = phases();
    EXPECT_EQ(p.size(), series) << current;
    for (const std::string& known : ControllerMetrics::KnownPhases()) {
      EXPECT_TRUE(p.count(known)) << known << " missing while " << current;
    }
    for (const auto& [name, value] : p) {
      EXPECT_EQ(value, name == current ? 1.0 : 0.0) << name << " while " << current;
    }
  };
  const size_t known = ControllerMetrics::KnownPhases().size();
  EXPECT_EQ(known, 7u);

  for (const char* phase : {"Pending", "Planning", "Running", "Replanning", "Succeeded"}) {
    job.phase = phase;
    metrics.SetJob(job);
    expect_one_hot(phase, known);
  }
  job.phase = "Suspended";  // not a phase we know: its own series, still one-hot
  metrics.SetJob(job);
  expect_one_hot("Suspended", known + 1);
  job.phase = "Failed";  // and the unknown one goes once the job leaves it
  metrics.SetJob(job);
  expect_one_hot("Failed", known);
  job.phase.clear();
  metrics.SetJob(job);
  EXPECT_TRUE(phases().empty());
}

TEST(ControllerMetricsTest, ReplansAndRestartsCountPerJob) {
  ControllerMetrics metrics("test");
  metrics.AddReplan("a", "job");
  metrics.AddReplan("a", "job");
  metrics.AddRestart("a", "job");
  metrics.AddReplan("b", "job");  // same name, other namespace: another job
  EXPECT_EQ(Value(metrics, "pacer_trainjob_replans_total", Job("a", "job")), 2.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_restarts_total", Job("a", "job")), 1.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_replans_total", Job("b", "job")), 1.0);
  EXPECT_EQ(Value(metrics, "pacer_trainjob_restarts_total", Job("b", "job")), 0.0);
  metrics.SetJob(FullJob("a", "job"));  // SetJob keeps the counts
  EXPECT_EQ(Value(metrics, "pacer_trainjob_replans_total", Job("a", "job")), 2.0);
}

TEST(ControllerMetricsTest, RemoveJobRemovesEverySeriesOfThatJobOnly) {
  ControllerMetrics metrics("test");
  JobMetrics job = FullJob("research", "gone");
  job.phase = "Suspended";  // an unknown phase's series must go too
  metrics.SetJob(job);
  metrics.AddReplan("research", "gone");
  metrics.AddRestart("research", "gone");
  metrics.SetJob(FullJob("research", "stays"));
  metrics.SetJob(FullJob("other", "gone"));
  ASSERT_THAT(metrics.Serialize(), HasSubstr("trainjob=\"gone\""));

  metrics.RemoveJob("research", "gone");
  metrics.RemoveJob("research", "never-existed");  // harmless

  for (const Sample& s : ParseSamples(metrics.Serialize())) {
    const bool removed_job = s.labels.count("trainjob") && s.labels.at("trainjob") == "gone" &&
                             s.labels.at("namespace") == "research";
    EXPECT_FALSE(removed_job) << "stale series " << s.name;
  }
  for (const std::string& name : kJobGauges) {
    EXPECT_TRUE(Value(metrics, name, Job("research", "stays")).has_value()) << name;
    EXPECT_TRUE(Value(metrics, name, Job("other", "gone")).has_value()) << name;
  }
  EXPECT_EQ(Series(metrics, "pacer_trainjob_phase", Job("other", "gone")).size(),
            ControllerMetrics::KnownPhases().size());

  // A job that comes back with the same name starts from scratch.
  metrics.SetJob(FullJob("research", "gone"));
  EXPECT_EQ(Value(metrics, "pacer_trainjob_replans_total", Job("research", "gone")), 0.0);
  EXPECT_THAT(metrics.Serialize(), Not(HasSubstr("Suspended")));
}

TEST(ControllerMetricsTest, ConcurrentUpdatesAndScrapesAddUp) {
  ControllerMetrics metrics("test");
  constexpr int kThreads = 4;
  constexpr int kIterations = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      const std::string ns = "ns" + std::to_string(t);
      for (int i = 0; i < kIterations; ++i) {
        metrics.RecordReconcile(0.001, Status::Ok(), false);
        metrics.CountQueueAdd();
        metrics.SetJob(FullJob(ns, "job"));
        metrics.AddReplan(ns, "job");
        if (i % 10 == 0) metrics.RemoveJob(ns, "job");
        if (i % 50 == 0) (void)metrics.Serialize();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(Value(metrics, "pacer_controller_reconcile_total", {{"result", "success"}}),
            kThreads * kIterations);
  EXPECT_EQ(Value(metrics, "pacer_controller_workqueue_adds_total"), kThreads * kIterations);
  // The last removal was at i = 290: the replans since.
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(Value(metrics, "pacer_trainjob_replans_total", Job("ns" + std::to_string(t), "job")),
              kIterations - 1 - 290);
  }
}

}  // namespace
}  // namespace pacer::controller
