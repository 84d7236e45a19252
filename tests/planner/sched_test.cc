// The multi-job scheduler (pacer/sched/scheduler.h) and its simulator:
// admission guarantees, allocation invariants, hysteresis, and the policies
// against each other on a crafted case.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "pacer/sched/scheduler.h"
#include "pacer/sched/simulator.h"

namespace pacer::sched {
namespace {

ThroughputCurve Curve(std::vector<ThroughputPoint> points, int max_gpus = 64,
                      bool drop_past_peak = true) {
  StatusOr<ThroughputCurve> curve =
      ThroughputCurve::Create(std::move(points), max_gpus, drop_past_peak);
  EXPECT_TRUE(curve.ok()) << curve.status().message();
  return curve.ok() ? *curve : ThroughputCurve();
}

// T(g) = g iterations/s at 1, 2, 4, 8 GPUs.
ThroughputCurve Linear() { return Curve({{1, 1}, {2, 2}, {4, 4}, {8, 8}}); }

SchedJob Job(std::string id, double remaining, std::optional<double> deadline,
             ThroughputCurve curve, int current = 0, bool admitted = false) {
  SchedJob job;
  job.id = std::move(id);
  job.remaining_iterations = remaining;
  job.deadline_seconds = deadline;
  job.curve = std::move(curve);
  job.current_gpus = current;
  job.admitted = admitted;
  return job;
}

// Exact curves: no restart cost, a decision at every event.
SchedOptions Exact(Policy policy) {
  SchedOptions options;
  options.policy = policy;
  options.restart = RestartModel::None();
  options.decision_interval_seconds = 0;
  options.stall_headroom_factor = 0;
  return options;
}

TEST(ThroughputCurveTest, DropsCountsPastThePeakAndAboveTheCap) {
  ThroughputCurve curve = Curve({{1, 1}, {2, 1.5}, {4, 1.4}, {8, 1.6}, {16, 3}}, 8);
  ASSERT_EQ(curve.levels().size(), 3u);  // 1, 2, 8: 4 is slower than 2, 16 over the cap
  EXPECT_EQ(curve.FloorLevel(7), 2);
  EXPECT_EQ(curve.NextLevel(2), 8);
  EXPECT_EQ(curve.NextLevel(8), 0);
  EXPECT_DOUBLE_EQ(curve.IterationsPerSecond(5), 1.5);
  EXPECT_EQ(curve.FloorLevel(0), 0);
}

TEST(ThroughputCurveTest, KeepsSlowerCountsForTheBaselines) {
  ThroughputCurve curve = Curve({{1, 1}, {2, 1.5}, {4, 1.4}}, 8, /*drop_past_peak=*/false);
  EXPECT_EQ(curve.max_gpus(), 4);
}

TEST(ThroughputCurveTest, RejectsACurveWithoutThroughput) {
  EXPECT_FALSE(ThroughputCurve::Create({{1, 0}, {2, -1}}, 8, true).ok());
  EXPECT_FALSE(ThroughputCurve::Create({{16, 3}}, 8, true).ok());
}

TEST(ScheduleTest, RefusesAllocationsLargerThanThePool) {
  std::vector<SchedJob> jobs = {Job("a", 10, 100.0, Linear(), 8, true),
                                Job("b", 10, 100.0, Linear(), 4, true)};
  EXPECT_EQ(Schedule(jobs, 8, 0, Exact(Policy::kPacer)).status().code(),
            StatusCode::kInvalidArgument);
}

// The deadline guard moves plans, not deadlines: a plan finishes the guard
// before its deadline, and a job inside the guard is still on time (it keeps
// its GPUs from a waiting job; an arrival there is not "past its deadline").
TEST(ScheduleTest, TheDeadlineGuardMovesPlansNotDeadlines) {
  SchedOptions options = Exact(Policy::kPacer);
  options.deadline_guard_seconds = 60;
  StatusOr<ScheduleResult> planned =
      Schedule({Job("far", 800, 1000.0, Linear(), 0, true)}, 8, 0, options);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_TRUE(planned->decisions[0].planned_finish_seconds.has_value());
  EXPECT_DOUBLE_EQ(*planned->decisions[0].planned_finish_seconds, 940);

  // 240 iterations at 8/s: 30 s of work, 50 s before the deadline.
  StatusOr<ScheduleResult> closing = Schedule(
      {Job("closing", 240, 50.0, Linear(), 8, true), Job("waiting", 800, 5000.0, Linear(), 0, true),
       Job("late arrival", 8, 30.0, Linear())},
      8, 0, options);
  ASSERT_TRUE(closing.ok()) << closing.status().ToString();
  EXPECT_EQ(closing->decisions[0].gpus, 8);
  EXPECT_EQ(closing->decisions[1].gpus, 0);
  EXPECT_EQ(closing->decisions[2].admission, Admission::kRejected);
  EXPECT_EQ(closing->decisions[2].reason.find("its deadline has passed"), std::string::npos)
      << closing->decisions[2].reason;
  EXPECT_NE(closing->decisions[2].reason.find("plans finish 60 s before it"), std::string::npos)
      << closing->decisions[2].reason;
}

// Every plan compares and splits times: a NaN among them left the order of
// FreeTimeline::Split undefined (the simulator's flags once let one in).
// Each is refused, named, before any planning.
TEST(ScheduleTest, RefusesTimesAndFactorsThatAreNotFiniteNumbers) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto refused = [](std::vector<SchedJob> jobs, double now, SchedOptions options,
                    const std::string& words) {
    const StatusOr<ScheduleResult> result = Schedule(jobs, 8, now, options);
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << words;
    EXPECT_NE(result.status().message().find(words), std::string::npos)
        << result.status().message();
  };
  const SchedOptions options = Exact(Policy::kPacer);
  refused({Job("a", 10, nan, Linear())}, 0, options, "job a has a deadline that is not a finite");
  refused({Job("a", 10, inf, Linear())}, 0, options, "job a has a deadline that is not a finite");
  refused({Job("a", inf, 100.0, Linear())}, 0, options, "job a has no finite remaining");
  SchedJob arrival = Job("a", 10, 100.0, Linear());
  arrival.arrival_seconds = nan;
  refused({arrival}, 0, options, "job a has no finite arrival time");
  SchedJob span = Job("a", 10, 100.0, Linear(), 0, true);
  span.reservation = {{0, nan, 4}};
  refused({span}, 0, options, "job a carries a reservation span");
  refused({Job("a", 10, 100.0, Linear())}, nan, options, "now is not a finite time");
  for (double SchedOptions::*factor :
       {&SchedOptions::hysteresis_factor, &SchedOptions::stall_headroom_factor,
        &SchedOptions::decision_interval_seconds, &SchedOptions::overhead_fraction,
        &SchedOptions::deadline_guard_seconds}) {
    SchedOptions bad = options;
    bad.*factor = nan;
    refused({Job("a", 10, 100.0, Linear())}, 0, bad, "");
  }
  SchedOptions negative_guard = options;
  negative_guard.deadline_guard_seconds = -1;
  refused({Job("a", 10, 100.0, Linear())}, 0, negative_guard, "the deadline guard");
  // What is finite still plans, and a measured overhead share past 0.5 is
  // clamped (the simulator's may be), not refused.
  SchedOptions high = options;
  high.overhead_fraction = 0.8;
  EXPECT_TRUE(Schedule({Job("a", 10, 100.0, Linear())}, 8, 0, high).ok());
  span.reservation = {{-inf, inf, 4}};
  EXPECT_TRUE(Schedule({span}, 8, 0, options).ok());
}

// The controller builds curves over the whole pool but schedules on the
// GPUs free or held now, which can be fewer than a job's smallest level:
// the reason says so instead of quoting an infinite time (an undefined
// conversion to integer seconds).
TEST(ScheduleTest, RejectsAJobWhoseSmallestLevelExceedsThePoolAndSaysSo) {
  std::vector<SchedJob> jobs = {Job("big", 1000, 100.0, Curve({{16, 16}, {32, 32}}))};
  StatusOr<ScheduleResult> result = Schedule(jobs, 8, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok()) << result.status().message();
  const JobDecision& decision = result->decisions[0];
  EXPECT_EQ(decision.admission, Admission::kRejected);
  EXPECT_EQ(decision.reason,
            "needs at least 16 GPUs (its smallest throughput level) and the pool has 8")
      << decision.reason;
}

TEST(ScheduleTest, RejectsAJobThatCannotMakeItAloneWithAdvice) {
  // 1,000 iterations at most 8 it/s: 125 s, the deadline is 100 s away.
  std::vector<SchedJob> jobs = {Job("late", 1000, 100.0, Linear())};
  SchedOptions options = Exact(Policy::kPacer);
  StatusOr<ScheduleResult> result = Schedule(jobs, 8, 0, options);
  ASSERT_TRUE(result.ok());
  const JobDecision& decision = result->decisions[0];
  EXPECT_EQ(decision.admission, Admission::kRejected);
  EXPECT_NE(decision.reason.find("even alone"), std::string::npos) << decision.reason;
  EXPECT_EQ(decision.gpus, 0);
  // Each piece of advice, applied, admits the job.
  ASSERT_TRUE(decision.advice.deadline_seconds.has_value());
  jobs[0].deadline_seconds = decision.advice.deadline_seconds;
  EXPECT_EQ(Schedule(jobs, 8, 0, options)->decisions[0].admission, Admission::kAdmitted);
  jobs[0].deadline_seconds = 100.0;
  ASSERT_TRUE(decision.advice.iterations.has_value());
  EXPECT_LT(*decision.advice.iterations, 1000);
  jobs[0].remaining_iterations = *decision.advice.iterations;
  EXPECT_EQ(Schedule(jobs, 8, 0, options)->decisions[0].admission, Admission::kAdmitted);
}

// The time a refusal quotes is what the admission test counted, stalls
// included: quoting the bare work, a job refused for its overhead read
// "need 95 s, the deadline is 100 s away".
TEST(ScheduleTest, ARefusalQuotesTheTimeTheAdmissionTestCounted) {
  // 760 iterations at most 8 it/s: 95 s of work; a 20% overhead share makes
  // it 760 / 0.8 = 950 iterations, 119 s, past the deadline 100 s away.
  std::vector<SchedJob> jobs = {Job("tight", 760, 100.0, Linear())};
  SchedOptions options = Exact(Policy::kPacer);
  options.overhead_fraction = 0.2;
  StatusOr<ScheduleResult> result = Schedule(jobs, 8, 0, options);
  ASSERT_TRUE(result.ok());
  const JobDecision& decision = result->decisions[0];
  ASSERT_EQ(decision.admission, Admission::kRejected);
  std::smatch need;
  ASSERT_TRUE(std::regex_search(decision.reason, need, std::regex(R"(need (\d+) s)")))
      << decision.reason;
  EXPECT_EQ(std::stoi(need[1]), 119) << decision.reason;
  EXPECT_NE(decision.reason.find("95 s of work"), std::string::npos) << decision.reason;
  EXPECT_NE(decision.reason.find("the deadline is 100 s away"), std::string::npos)
      << decision.reason;
}

TEST(ScheduleTest, AdviceForMoreGpusAdmitsOnTheLargerPool) {
  // Busy pool: an admitted job needs all 4 GPUs until its deadline.
  std::vector<SchedJob> jobs = {Job("first", 400, 100.0, Linear(), 4, true),
                                Job("second", 200, 100.0, Linear())};
  SchedOptions options = Exact(Policy::kPacer);
  StatusOr<ScheduleResult> result = Schedule(jobs, 4, 0, options);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->decisions[1].admission, Admission::kRejected);
  EXPECT_NE(result->decisions[1].reason.find("reserved"), std::string::npos);
  ASSERT_TRUE(result->decisions[1].advice.cluster_gpus.has_value());
  const int gpus = *result->decisions[1].advice.cluster_gpus;
  EXPECT_GT(gpus, 4);
  EXPECT_EQ(Schedule(jobs, gpus, 0, options)->decisions[1].admission, Admission::kAdmitted);
  EXPECT_EQ(Schedule(jobs, gpus - 1, 0, options)->decisions[1].admission, Admission::kRejected);
}

TEST(ScheduleTest, BestEffortJobsAreShrunkFirst) {
  // A best-effort job holds the whole pool; a deadline job arrives that
  // needs 4 GPUs from now on.
  std::vector<SchedJob> jobs = {Job("best-effort", 1e6, std::nullopt, Linear(), 8, true),
                                Job("deadline", 400, 100.0, Linear())};
  StatusOr<ScheduleResult> result = Schedule(jobs, 8, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->decisions[1].admission, Admission::kAdmitted);
  EXPECT_GE(result->decisions[1].gpus, 4);
  EXPECT_LE(result->decisions[0].gpus + result->decisions[1].gpus, 8);
  EXPECT_LT(result->decisions[0].gpus, 8);
}

// A job that can no longer make its deadline takes what the others leave,
// also before its deadline: its reservation of the most it can get held 8
// GPUs now, and the running job whose latest-start plan begins at 500 s was
// stopped for it, a relaunch its plan (at its current size) did not count.
TEST(ScheduleTest, ALateJobNeverStopsARunningJobThatIsOnTime) {
  std::vector<SchedJob> jobs = {Job("on-time", 8000, 1500.0, Linear(), 8, true),
                                Job("late", 1e5, 1000.0, Linear(), 0, true)};
  StatusOr<ScheduleResult> result = Schedule(jobs, 8, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->decisions[0].gpus, 8);
  ASSERT_TRUE(result->decisions[0].planned_finish_seconds.has_value());
  EXPECT_EQ(result->decisions[1].admission, Admission::kAdmitted) << "admitted jobs stay admitted";
  EXPECT_EQ(result->decisions[1].gpus, 0);
  EXPECT_FALSE(result->decisions[1].planned_finish_seconds.has_value());
  // Once the on-time job is done, the late one takes the pool.
  jobs = {Job("late", 1e5, 1000.0, Linear(), 0, true)};
  result = Schedule(jobs, 8, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->decisions[0].gpus, 8);
}

TEST(ScheduleTest, HysteresisKeepsASizeWhenGrowingDoesNotPay) {
  SchedOptions options;  // ElasticFlow-like restart costs: relaunch on 4 GPUs = 8 s
  options.restart = RestartModel::ElasticFlow(8);
  options.decision_interval_seconds = 0;
  // 20 iterations left on 2 GPUs: 10 s; on 4: 5 s, saving 5 s < 2 x 8 s.
  std::vector<SchedJob> small = {Job("a", 20, 1000.0, Curve({{1, 1}, {2, 2}, {4, 4}}), 2, true)};
  EXPECT_EQ(Schedule(small, 4, 0, options)->decisions[0].gpus, 2);
  // 2,000 iterations left: growing saves 500 s, it pays.
  std::vector<SchedJob> large = {Job("a", 2000, 5000.0, Curve({{1, 1}, {2, 2}, {4, 4}}), 2, true)};
  EXPECT_EQ(Schedule(large, 4, 0, options)->decisions[0].gpus, 4);
}

// A free GPU that no running job's growth pays for stays free, however many
// jobs it is offered to in turn: each revert handed it to the next job, and
// after 8 rounds the ninth job's growth was never checked (it was resized
// from 1 to 2 GPUs for 0.01% more throughput, a relaunch for nothing).
TEST(ScheduleTest, HysteresisHoldsForEveryJobAFreeGpuIsOfferedTo) {
  SchedOptions options;
  options.restart = RestartModel::ElasticFlow(8);
  options.decision_interval_seconds = 0;
  for (int running : {8, 9, 12}) {
    std::vector<SchedJob> jobs;
    for (int i = 0; i < running; ++i) {
      jobs.push_back(
          Job("j" + std::to_string(i), 1000, std::nullopt, Curve({{1, 1}, {2, 1.0001}}), 1, true));
    }
    StatusOr<ScheduleResult> result = Schedule(jobs, running + 1, 0, options);
    ASSERT_TRUE(result.ok()) << result.status().message();
    for (const JobDecision& decision : result->decisions) {
      EXPECT_EQ(decision.gpus, 1) << decision.id << " of " << running << " grew";
    }
  }
}

// Two admitted jobs on 8 GPUs. `later` keeps its reservation, 4 GPUs on
// [30, 230), which covers its 800 iterations exactly (its curve stops at 4
// GPUs). `sooner` (deadline 60) has none and is planned afresh. Alone it would
// take 8 GPUs on [22.5, 60), the slots `later` holds, and `later` could not
// make it on what is left. Planned around the kept reservation it fits: 8
// GPUs before 30, 4 after.
TEST(ScheduleTest, AFreshPlanNeverTakesTheSlotsAKeptReservationHolds) {
  SchedJob later = Job("later", 800, 230.0, Curve({{1, 1}, {2, 2}, {4, 4}}), 0, true);
  later.reservation = {{30, 230, 4}};
  std::vector<SchedJob> jobs = {Job("sooner", 300, 60.0, Linear(), 0, true), later};
  StatusOr<ScheduleResult> result = Schedule(jobs, 8, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok());
  for (const JobDecision& decision : result->decisions) {
    EXPECT_TRUE(decision.planned_finish_seconds.has_value()) << decision.id << " is late";
  }
  ASSERT_EQ(result->decisions[1].reservation.size(), 1u);
  EXPECT_DOUBLE_EQ(result->decisions[1].reservation[0].start_seconds, 30);
  // The reservations together never ask for more than the pool.
  for (double t = 0; t < 230; t += 0.5) {
    int reserved = 0;
    for (const JobDecision& decision : result->decisions) {
      for (const ReservedSpan& span : decision.reservation) {
        if (span.start_seconds <= t && t < span.end_seconds) reserved += span.gpus;
      }
    }
    EXPECT_LE(reserved, 8) << "at " << t;
  }
}

// A reservation kept from the last pass at a count the job's curve no
// longer has (its maxGPUs lowered, nodes excluded): planned anew within the
// curve. Kept, it gave the job 8 GPUs on a curve that ends at 4, a size no
// layout of the job runs.
TEST(ScheduleTest, AKeptReservationBeyondTheCurveIsPlannedAnew) {
  SchedJob job = Job("shrunk", 3000, 1000.0, Curve({{1, 1}, {2, 2}, {4, 3.5}}), 4, true);
  job.reservation = {{0, 1000, 8}};  // 1000 s x T(4) covers the work: it was kept
  StatusOr<ScheduleResult> result = Schedule({job}, 8, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->decisions.size(), 1u);
  EXPECT_LE(result->decisions[0].gpus, 4);
  for (const ReservedSpan& span : result->decisions[0].reservation) {
    EXPECT_LE(span.gpus, 4) << span.start_seconds << ".." << span.end_seconds;
  }
}

// Three jobs on 4 GPUs: `b` scales badly (its deadline is first), `c`
// linearly. EDF gives `b` the whole pool, FIFO keeps the first job's GPUs;
// either way `c` (or `b`) misses. Pacer gives `b` one or two GPUs and meets
// all three.
std::vector<SimJob> ThreeJobs() {
  ThroughputCurve poor = Curve({{1, 1}, {2, 1.2}, {4, 1.3}});
  ThroughputCurve linear = Curve({{1, 1}, {2, 2}, {4, 4}});
  return {{"b", 0, 90, 100.0, poor}, {"c", 0, 260, 115.0, linear}, {"d", 0, 100, 400.0, linear}};
}

TEST(SimulateTest, PacerMeetsAllThreeDeadlinesWhereEdfAndFifoMissOne) {
  for (Policy policy : {Policy::kPacer, Policy::kEdf, Policy::kFifo}) {
    SimOptions options{4, Exact(policy)};
    StatusOr<SimResult> result = Simulate(ThreeJobs(), options);
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->jobs_with_deadline, 3);
    if (policy == Policy::kPacer) {
      EXPECT_EQ(result->met_deadline, 3) << PolicyName(policy);
      EXPECT_EQ(result->rejected, 0);
    } else {
      EXPECT_LT(result->met_deadline, 3) << PolicyName(policy);
    }
  }
}

// A deterministic mix of jobs, all arriving at once, with exact curves:
// the ones pacer admits all meet their deadlines, and none is dropped.
// Failed (3 of 24 admitted jobs late) while each pass re-planned every job
// from scratch: a job that ran ahead re-planned onto a lower level over a
// longer window and took slots a later-deadline job relied on. Passes now keep
// each job's reservation (SchedJob::reservation) while it holds.
TEST(SimulateTest, AdmittedJobsMeetTheirDeadlinesWhenCurvesAreExact) {
  std::vector<SimJob> jobs;
  unsigned state = 12345;
  auto next = [&state] {
    state = state * 1103515245u + 12345u;
    return static_cast<double>((state >> 8) % 1000) / 1000.0;
  };
  for (int i = 0; i < 24; ++i) {
    const double scale = 0.5 + next();
    ThroughputCurve curve =
        Curve({{1, scale}, {2, 1.8 * scale}, {4, 3.0 * scale}, {8, 4.2 * scale}});
    const double iterations = 200 + 2000 * next();
    const double deadline = iterations / scale * (0.3 + 1.2 * next());
    jobs.push_back({"job-" + std::to_string(i), 0, iterations, deadline, curve});
  }
  SimOptions options{16, Exact(Policy::kPacer)};
  StatusOr<SimResult> result = Simulate(jobs, options);
  ASSERT_TRUE(result.ok());
  EXPECT_GT(result->admitted, 0);
  EXPECT_GT(result->rejected, 0);  // the mix is tight enough to refuse some
  EXPECT_EQ(result->admitted_missed, 0);
  for (const JobOutcome& outcome : result->outcomes) {
    if (outcome.admitted) {
      EXPECT_TRUE(outcome.finished && outcome.met_deadline) << outcome.id;
    }
  }
}

// The GPUs held at any time never exceed the pool, for every policy, with
// arrivals spread out and ElasticFlow's restart costs.
TEST(SimulateTest, AllocationsNeverExceedThePool) {
  std::vector<SimJob> jobs;
  for (int i = 0; i < 40; ++i) {
    const double arrival = 37.0 * i;
    jobs.push_back({"j" + std::to_string(i), arrival, 500.0 + 90.0 * (i % 7),
                    i % 5 == 0 ? std::optional<double>() : arrival + 300.0 + 40.0 * (i % 4),
                    Curve({{1, 1}, {2, 1.9}, {4, 3.5}, {8, 6}})});
  }
  for (Policy policy : {Policy::kPacer, Policy::kEdf, Policy::kFifo}) {
    SimOptions options;
    options.cluster_gpus = 12;
    options.sched.policy = policy;
    options.sched.restart = RestartModel::ElasticFlow(12);
    StatusOr<SimResult> result = Simulate(jobs, options);
    ASSERT_TRUE(result.ok());
    std::map<double, int> delta;
    for (const AllocationSpan& span : result->spans) {
      delta[span.start_seconds] += span.gpus;
      delta[span.end_seconds] -= span.gpus;
    }
    int held = 0;
    for (const auto& [time, change] : delta) {
      held += change;
      EXPECT_LE(held, 12) << PolicyName(policy) << " at " << time;
    }
    // Admitted jobs are never dropped: every one finishes.
    for (const JobOutcome& outcome : result->outcomes) {
      if (outcome.admitted) {
        EXPECT_TRUE(outcome.finished) << PolicyName(policy) << outcome.id;
      }
    }
    EXPECT_EQ(result->admitted + result->rejected, 40);
    EXPECT_LE(result->utilisation, 1.0 + 1e-9);
  }
}

// An admitted job that fell behind finds no room around the others' kept
// reservations, but a plan from scratch holds both: it got no plan and no
// GPUs, and missed a deadline it could have met.
TEST(ScheduleTest, AJobThatFellBehindIsReplannedFromScratchWhenKeepingLeavesItNoPlan) {
  const ThroughputCurve linear = Curve({{1, 1}, {2, 2}, {4, 4}});
  SchedJob a = Job("a", 400, 300.0, linear, 0, true);
  a.reservation = {{0, 100, 4}};
  SchedJob b = Job("b", 100, 100.0, linear, 0, true);
  b.reservation = {{80, 100, 4}};  // covers 80 of its 100 iterations
  StatusOr<ScheduleResult> result = Schedule({a, b}, 4, 0, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok()) << result.status().message();
  for (const JobDecision& d : result->decisions) {
    ASSERT_TRUE(d.planned_finish_seconds.has_value()) << d.id << " has no plan";
  }
  EXPECT_LE(*result->decisions[1].planned_finish_seconds, 100.0);
  EXPECT_LE(*result->decisions[0].planned_finish_seconds, 300.0);
  EXPECT_EQ(result->decisions[1].gpus, 4) << "the earlier deadline runs now";
}

// A pass less than 1 ms before a boundary of an exactly fitting reservation
// clipped the span before the boundary to under 1 ms and dropped it, while
// still asking for its work: the job lost its plan.
TEST(ScheduleTest, AReservationClippedToUnderAMillisecondStillHoldsItsWork) {
  const ThroughputCurve curve = Curve({{1, 1.3 / 4}, {2, 1.3 / 2}, {4, 1.3}});
  const double now = 330 - 0.000147;
  SchedJob job = Job("j", (0.000147 * 1.3 + 350 * 1.3) * (1 + 4e-16), 680.0, curve, 4, true);
  job.reservation = {{0, 330, 4}, {330, 680, 4}};
  StatusOr<ScheduleResult> result = Schedule({job}, 4, now, Exact(Policy::kPacer));
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->decisions[0].planned_finish_seconds.has_value());
  EXPECT_EQ(result->decisions[0].gpus, 4);
}

// Plans that together ask for more than the pool before the next pass: the
// latest deadline waits. A plan that shrinks within the interval has its
// peak now, and was skipped, so the earliest deadline was cut instead.
TEST(ScheduleTest, WhenPlansAskForMoreThanThePoolTheLatestDeadlineWaits) {
  const ThroughputCurve linear = Curve({{1, 1}, {2, 2}, {4, 4}});
  SchedOptions options = Exact(Policy::kPacer);
  options.decision_interval_seconds = 60;
  SchedJob late = Job("late", 2000, 1000.0, linear, 4, true);
  late.reservation = {{0, 30, 4}, {30, 1000, 2}};
  SchedJob early = Job("early", 140, 100.0, linear, 0, true);
  early.reservation = {{30, 100, 2}};
  StatusOr<ScheduleResult> result = Schedule({late, early}, 4, 0, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_GE(result->decisions[1].gpus, 2) << "the earliest deadline holds its plan's GPUs";
  EXPECT_LE(result->decisions[0].gpus + result->decisions[1].gpus, 4);
}

// Plans end exactly at deadlines; the sliver of work rounding left made a
// job that finished on time run again later and count as late.
TEST(SimulateTest, AJobFinishingOnItsDeadlineWithinRoundingIsOnTime) {
  std::vector<SimJob> jobs = {{"a", 0, 14, 108.0, Curve({{1, 0.6}, {2, 0.72}})},
                              {"b", 0, 84, 271.0, Curve({{1, 0.6}, {2, 0.78}})},
                              {"c", 0, 92, 228.0, Curve({{1, 0.4}, {2, 0.68}})}};
  SimOptions options{2, Exact(Policy::kPacer)};
  StatusOr<SimResult> result = Simulate(jobs, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->admitted_missed, 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobOutcome& outcome = result->outcomes[i];
    if (!outcome.admitted) continue;
    ASSERT_TRUE(outcome.finish_seconds.has_value()) << outcome.id;
    EXPECT_LE(*outcome.finish_seconds, *jobs[i].deadline_seconds + 1e-6) << outcome.id;
  }
}

}  // namespace
}  // namespace pacer::sched