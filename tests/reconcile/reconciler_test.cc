// The reconciler against in-memory fakes: launch, progress, re-plan, restart,
// infeasible and invalid jobs, deletion, and a controller restart.
#include "reconcile/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "core/clock.h"
#include "daemon/worker_pods.h"
#include "fakes.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"
#include "pacer/planner/units.h"
#include "reconcile/job_object.h"
#include "reconcile/worker_env.h"
#include "test_jobs.h"

namespace pacer::controller {
namespace {

using testing::FakeInventory;
using testing::FakeJobStore;
using testing::FakeLauncher;
using testing::FakeMetrics;
using testing::H100Cluster;
using testing::LlamaJob;

constexpr char kKey[] = "research/llama";

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest() { inventory_.inventory = H100Cluster(); }

  Reconciler& reconciler() {
    if (!reconciler_) {
      ReconcilerDeps deps{&store_, &launcher_, &metrics_, &inventory_, &clock_};
      reconciler_ = std::make_unique<Reconciler>(deps, reconciler_options_);
    }
    return *reconciler_;
  }
  ReconcileResult Pass(const std::string& key = kKey) { return reconciler().Reconcile(key); }
  nlohmann::json Status(const std::string& key = kKey) { return store_.StatusOf(key); }
  std::string ConditionReason(const std::string& type, const std::string& key = kKey) {
    const nlohmann::json status = Status(key);
    for (const auto& c : status["conditions"]) {
      if (c["type"] == type)
        return c["status"].get<std::string>() + "/" + c["reason"].get<std::string>();
    }
    return "";
  }
  std::string ConditionMessage(const std::string& type, const std::string& key = kKey) {
    const nlohmann::json status = Status(key);
    for (const auto& c : status["conditions"]) {
      if (c["type"] == type) return c["message"].get<std::string>();
    }
    return "";
  }
  // Launches the job and brings its workers up.
  void LaunchAndRun() {
    ASSERT_TRUE(Pass().status.ok());
    ASSERT_EQ(launcher_.launches.size(), 1u);
    launcher_.SetAll(kKey, WorkerPhase::kRunning);
  }
  // The Llama job launched, running an hour at its predicted step time with
  // 1000 steps done.
  void LaunchAndRunThousandSteps() {
    store_.Put(LlamaJob());
    LaunchAndRun();
    metrics_.measurements[kKey] =
        Measurement{launcher_.launches.at(0).plan.step.step_seconds, 1000, 1.0};
    clock_.Advance(std::chrono::hours(1));
    ASSERT_TRUE(Pass().status.ok());
    ASSERT_EQ(Status()["phase"], "Running");
  }
  // The Llama job launched and run to Succeeded; its pods stay.
  void RunToSuccess() {
    store_.Put(LlamaJob());
    LaunchAndRun();
    launcher_.SetAll(kKey, WorkerPhase::kSucceeded, 0);
    ASSERT_TRUE(Pass().status.ok());
    ASSERT_EQ(Status()["phase"], "Succeeded");
  }
  // The Llama job launched and running, three hours later measured at twice
  // its predicted step time: the next pass re-plans it. Returns the plan.
  planner::Evaluation LaunchAndRunSlowerThanPredicted() {
    store_.Put(LlamaJob());
    LaunchAndRun();
    const planner::Evaluation first = launcher_.launches.at(0).plan;
    metrics_.measurements[kKey] = Measurement{first.step.step_seconds * 2.0, 500, 1.0};
    clock_.Advance(std::chrono::hours(3));
    return first;
  }

  FakeClock clock_;
  FakeJobStore store_;
  FakeLauncher launcher_;
  FakeMetrics metrics_;
  FakeInventory inventory_;
  ReconcilerOptions reconciler_options_;  // before the first Pass()
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(ReconcilerTest, NewJobIsPlannedAndLaunchedWithTheExactGlobalBatch) {
  store_.Put(LlamaJob());
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const LaunchSpec& launch = launcher_.launches[0];
  EXPECT_EQ(launch.plan.layout.global_batch(), 1024);
  EXPECT_EQ(launch.plan.layout.gpu_type, "H100-SXM");
  EXPECT_EQ(launch.attempt, 1);
  EXPECT_EQ(launch.total_steps, 33379);
  EXPECT_EQ(launch.job.uid, "uid-llama");
  EXPECT_EQ(Status()["phase"], "Planning");
  EXPECT_EQ(Status()["attempt"], 1);
  EXPECT_EQ(Status()["plan"]["gpus"], launch.plan.layout.gpus());
  EXPECT_EQ(ConditionReason("Planned"), "True/Planned");
  EXPECT_EQ(store_.CountEvents("Launched"), 1);
  EXPECT_EQ(store_.jobs[kKey]["metadata"]["finalizers"][0], kFinalizer);
  EXPECT_TRUE(r.requeue_after.has_value());

  // A second pass while the pods start launches nothing new.
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(store_.CountEvents("Launched"), 1);
}

// While the workers start (no metrics yet) the ETA is the plan's own
// completion less its start-up: every step at the predicted time with its
// share of the plan's checkpoint writes and expected failure rework. (It
// once counted the steps alone, 27 minutes earlier than the plan's
// predicted completion beside it for this job.)
TEST_F(ReconcilerTest, StartingJobsEtaIsThePlansCompletionLessStartUp) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const planner::TotalTimeBreakdown& total = launcher_.launches[0].plan.total;
  ASSERT_GT(total.checkpoint_overhead_seconds + total.failure_rework_seconds, 600);
  clock_.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Planning");
  auto view = reconciler().View(kKey);
  ASSERT_TRUE(view.has_value());
  ASSERT_TRUE(view->projected_completion_unix_seconds.has_value());
  EXPECT_NEAR(
      static_cast<double>(*view->projected_completion_unix_seconds),
      static_cast<double>(clock_.WallUnixSeconds()) + total.total_seconds - total.startup_seconds,
      2.0);
}

// The metrics backend is told how long a step should take, so that its rate
// window holds steps. The measurement window is sized from the plan's prediction whatever was
// measured: sized from a slow measurement it held the fast steps before a
// slowdown and flapped (PrometheusClientTest.AJobThatSlowedDownIsMeasuredByItsNewestStep).
TEST_F(ReconcilerTest, MeasurementsExpectThePredictedStep) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  clock_.Advance(std::chrono::minutes(10));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_FALSE(metrics_.asked.empty());
  EXPECT_EQ(metrics_.asked.back().attempt, 1);
  ASSERT_TRUE(metrics_.asked.back().expected_step_seconds.has_value());
  EXPECT_DOUBLE_EQ(*metrics_.asked.back().expected_step_seconds, predicted);

  for (double ratio : {1.05, 0.5}) {
    metrics_.measurements[kKey] = Measurement{predicted * ratio, 100, 1.0};
    clock_.Advance(std::chrono::minutes(10));
    ASSERT_TRUE(Pass().status.ok());
    ASSERT_EQ(launcher_.launches.size(), 1u) << ratio << " times the prediction re-planned the job";
    ASSERT_TRUE(Pass().status.ok());
    ASSERT_TRUE(metrics_.asked.back().expected_step_seconds.has_value());
    EXPECT_DOUBLE_EQ(*metrics_.asked.back().expected_step_seconds, predicted) << ratio;
  }
}

TEST_F(ReconcilerTest, RunningJobReportsProgressAndEtaFromMetrics) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  metrics_.measurements[kKey] = Measurement{predicted, 1000, 1.0};
  clock_.Advance(std::chrono::hours(6));
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Status()["phase"], "Running");
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000);
  EXPECT_EQ(Status()["progress"]["totalSteps"], 33379);
  EXPECT_NEAR(Status()["measuredStepSeconds"].get<double>(), predicted, 1e-3);
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
  // ETA = now + remaining x (measured + the plan's checkpoint and failure
  // time per step: its total less start-up and training, over its steps).
  const planner::TotalTimeBreakdown& total = launcher_.launches[0].plan.total;
  const double overhead_per_step =
      (total.total_seconds - total.startup_seconds - total.training_seconds) / 33379;
  EXPECT_GT(overhead_per_step, 0);
  const int64_t eta =
      clock_.WallUnixSeconds() + static_cast<int64_t>(32379 * (predicted + overhead_per_step));
  auto view = reconciler().View(kKey);
  ASSERT_TRUE(view.has_value());
  ASSERT_TRUE(view->projected_completion_unix_seconds.has_value());
  EXPECT_NEAR(static_cast<double>(*view->projected_completion_unix_seconds),
              static_cast<double>(eta), 2.0);
  EXPECT_GT(Status()["deadlineSlackSeconds"].get<int64_t>(), 0);
  // Re-checked every spec.replan.interval.
  ASSERT_TRUE(r.requeue_after.has_value());
  EXPECT_EQ(*r.requeue_after, std::chrono::seconds(60));
}

// A step time no rank could have taken (a broken exporter's 1e300 s) is no
// measurement: it once made the job re-plan at a ratio of 1e296 and was
// written into the status and the ETA. The steps still count; the ETA uses
// the prediction, Degraded says why, and a plausible time clears it.
TEST_F(ReconcilerTest, AStepTimeNoRankCouldTakeIsNoMeasurement) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  for (const double absurd : {1e300, predicted * 2e6, predicted * 1e-7}) {
    SCOPED_TRACE(absurd);
    metrics_.measurements[kKey] = Measurement{absurd, 1000, 1.0};
    clock_.Advance(std::chrono::hours(3));
    ASSERT_TRUE(Pass().status.ok());
    EXPECT_EQ(Status()["phase"], "Running");
    EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000);
    EXPECT_FALSE(Status().contains("measuredStepSeconds")) << Status()["measuredStepSeconds"];
    EXPECT_EQ(ConditionReason("Degraded"), "True/MetricsImplausible");
    EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
    EXPECT_EQ(launcher_.stops.size(), 0u);
  }
  EXPECT_EQ(store_.CountEvents("MetricsImplausible"), 1) << "one event per transition";
  // A shrunk CPU run computes less than the full model: any amount faster
  // than the full model's plan is plausible, but it is not the job's step
  // time, and it stays out of the status (the cluster scheduler scaled the
  // full model's curve by it, clamped to 5x faster).
  metrics_.measurements[kKey] = Measurement{predicted * 1e-7, 1100, 1e-6};
  clock_.Advance(std::chrono::minutes(5));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Degraded"), "");
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1100);
  EXPECT_FALSE(Status().contains("measuredStepSeconds")) << Status()["measuredStepSeconds"];
  // But not a broken exporter's number: it was written into the status.
  metrics_.measurements[kKey] = Measurement{1e300, 1150, 1e-6};
  clock_.Advance(std::chrono::minutes(5));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_FALSE(Status().contains("measuredStepSeconds")) << Status()["measuredStepSeconds"];
  EXPECT_EQ(ConditionReason("Degraded"), "True/MetricsImplausible");
  EXPECT_NE(ConditionMessage("Degraded").find("shrunk to scale 1e-06"), std::string::npos)
      << ConditionMessage("Degraded");
  metrics_.measurements[kKey] = Measurement{predicted, 1200, 1.0};
  clock_.Advance(std::chrono::minutes(5));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Degraded"), "");
  EXPECT_NEAR(Status()["measuredStepSeconds"].get<double>(), predicted, 1e-3);
}

// A job at risk that is kept (here: re-planning disabled) says so once as
// a Warning event when the risk appears, not at every pass; it was only the
// DeadlineAtRisk condition, which `pacer run` does not print.
TEST_F(ReconcilerTest, AJobKeptAtRiskSaysSoOnceAsAnEvent) {
  nlohmann::json job = LlamaJob();
  job["spec"]["replan"]["enabled"] = false;
  store_.Put(job);
  LaunchAndRun();
  const planner::Evaluation first = launcher_.launches.at(0).plan;
  metrics_.measurements[kKey] = Measurement{first.step.step_seconds * 2.0, 500, 1.0};
  clock_.Advance(std::chrono::hours(3));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "True/ReplanDisabled");
  EXPECT_EQ(launcher_.stops.size(), 0u);
  ASSERT_EQ(store_.CountEvents("DeadlineAtRisk"), 1);
  for (int i = 0; i < 3; ++i) {
    *metrics_.measurements[kKey].steps_completed += 100;
    clock_.Advance(std::chrono::minutes(5));
    ASSERT_TRUE(Pass().status.ok());
  }
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "True/ReplanDisabled");
  EXPECT_EQ(store_.CountEvents("DeadlineAtRisk"), 1) << "one event per transition";
}

TEST_F(ReconcilerTest, SlowerThanPredictedReplansToMoreGpusWithTheSameGlobalBatch) {
  const planner::Evaluation first = LaunchAndRunSlowerThanPredicted();
  ASSERT_TRUE(Pass().status.ok());

  // Stopped gracefully (SIGTERM -> checkpoint), recorded in status and events.
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  EXPECT_EQ(Status()["phase"], "Replanning");
  EXPECT_EQ(Status()["replans"], 1);
  EXPECT_EQ(store_.CountEvents("Replanning"), 1);
  EXPECT_NEAR(Status()["calibration"]["H100-SXM"]["stepTimeRatio"].get<double>(), 2.0, 0.05);

  // While they checkpoint, the job says it is relaunching on a new plan.
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Replanning"), "True/Relaunching");
  EXPECT_EQ(ConditionReason("WorkerFailure"), "");

  // Workers checkpoint and exit with code 6; the next passes remove them and
  // launch the new plan.
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  EXPECT_EQ(store_.CountEvents("WorkerFailed"), 0) << "a planned stop is not a failure";
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  const LaunchSpec& second = launcher_.launches[1];
  EXPECT_EQ(second.attempt, 2);
  EXPECT_GT(second.plan.layout.gpus(), first.layout.gpus());
  EXPECT_EQ(second.plan.layout.global_batch(), 1024);
  EXPECT_EQ(second.total_steps, 33379);
  EXPECT_EQ(Status()["restarts"], 0);
  EXPECT_EQ(Status()["replans"], 1);
}

// The API server refusing a status write (422: a field the CRD of another
// release validates differently) answered InvalidArgument, which the work
// queue takes as terminal: the job left the queue, and with it its re-plan
// requeue. The refusal is retried with backoff and named in an event; a
// conflict is retried as before, without one.
TEST_F(ReconcilerTest, AStatusWriteTheServerRefusesIsRetriedWithAnEvent) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  store_.fail_next_status_writes = 1;
  store_.fail_status_code = StatusCode::kInvalidArgument;
  const ReconcileResult refused = Pass();
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.code(), StatusCode::kInvalidArgument) << refused.status.ToString();
  EXPECT_EQ(store_.CountEvents("StatusWriteRefused"), 1);
  EXPECT_THAT(
      store_.LastEventMessage("StatusWriteRefused"),
      ::testing::HasSubstr("TrainJob.pacer.dev \"llama\" is invalid; retrying with backoff"));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Running");

  clock_.Advance(std::chrono::minutes(1));
  metrics_.measurements[kKey] =
      Measurement{launcher_.launches.at(0).plan.step.step_seconds, 10, 1.0};
  store_.fail_next_status_writes = 1;
  store_.fail_status_code = StatusCode::kAborted;
  EXPECT_EQ(Pass().status.code(), StatusCode::kAborted);
  EXPECT_EQ(store_.CountEvents("StatusWriteRefused"), 1);
}

// The status write after a re-plan's graceful stop can fail (a conflict):
// the next pass then saw stopping pods, a Running status and no Replanning
// condition, and reported the controller's own stop as a node drain. And
// what the re-plan decided (replans, lastReplanTime, the measured step-time
// ratio, nextPlan) was lost with the write: the relaunch planned afresh
// from the old calibration, and the minimum interval between re-plans
// started from the previous one.
TEST_F(ReconcilerTest, AReplansStopWhoseStatusWriteFailedIsStillTheControllers) {
  const planner::Evaluation first = LaunchAndRunSlowerThanPredicted();
  store_.fail_next_status_writes = 1;
  (void)Pass();
  ASSERT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  ASSERT_NE(Status()["phase"], "Replanning") << "the status write was lost";
  ASSERT_FALSE(Status().contains("nextPlan"));

  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 0);
  EXPECT_EQ(ConditionReason("WorkerFailure"), "");
  EXPECT_EQ(ConditionReason("Replanning"), "True/Relaunching");
  EXPECT_EQ(Status()["phase"], "Replanning");
  EXPECT_EQ(Status()["replans"], 1);
  EXPECT_TRUE(Status().contains("lastReplanTime")) << Status().dump(2);
  EXPECT_NEAR(Status()["calibration"]["H100-SXM"]["stepTimeRatio"].get<double>(), 2.0, 0.05);
  const std::optional<planner::Layout> chosen = LayoutFromPlanJson(Status()["nextPlan"]);
  ASSERT_TRUE(chosen.has_value()) << Status().dump(2);
  EXPECT_GT(chosen->gpus(), first.layout.gpus());

  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].plan.layout.ToString(), chosen->ToString())
      << "the re-plan's layout, launched";
  EXPECT_EQ(Status()["restarts"], 0);
  EXPECT_EQ(Status()["replans"], 1);

  // A drain of the next attempt is still an external stop.
  metrics_.measurements[kKey] =
      Measurement{launcher_.launches[1].plan.step.step_seconds, 600, 1.0};  // on pace
  launcher_.SetAll(kKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  launcher_.groups[kKey].stopping = true;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 1);
}

// A re-plan whose stop failed before deleting anything (the API server did
// not answer) left the workers running: the next pass decides and stops
// again, counting one re-plan. Its remembered decision is not replayed
// (which would count it twice and hold the retry back by the minimum
// interval between re-plans).
TEST_F(ReconcilerTest, AReplanWhoseStopFailedIsDecidedAgainAndCountedOnce) {
  LaunchAndRunSlowerThanPredicted();
  launcher_.fail_next_stops = 1;
  EXPECT_FALSE(Pass().status.ok());
  ASSERT_EQ(launcher_.CountStops(StopMode::kGraceful), 0);
  ASSERT_FALSE(launcher_.groups[kKey].stopping);

  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1) << "stopped on the retry";
  EXPECT_EQ(Status()["phase"], "Replanning");
  EXPECT_EQ(Status()["replans"], 1);
  EXPECT_TRUE(Status().contains("nextPlan")) << Status().dump(2);
}

// A failed stop whose re-plan the next pass no longer wants (the pace
// recovered) leaves nothing behind: a later drain of that attempt is an
// external stop, planned afresh, with no re-plan counted and no nextPlan.
TEST_F(ReconcilerTest, AFailedStopThatWasNotRetriedIsNotReplayedByALaterDrain) {
  const planner::Evaluation first = LaunchAndRunSlowerThanPredicted();
  launcher_.fail_next_stops = 1;
  EXPECT_FALSE(Pass().status.ok());
  metrics_.measurements[kKey] = Measurement{first.step.step_seconds, 600, 1.0};  // on pace
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.CountStops(StopMode::kGraceful), 0);
  ASSERT_EQ(Status()["phase"], "Running");

  launcher_.groups[kKey].stopping = true;  // a node drain
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 1);
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/StoppedExternally");
  EXPECT_EQ(Status()["replans"], 0);
  EXPECT_FALSE(Status().contains("nextPlan")) << Status().dump(2);
  EXPECT_FALSE(Status().contains("lastReplanTime")) << Status().dump(2);
}

// Workers whose node went down stay Terminating for ever (no kubelet
// confirms they ended): the job waited, polling, with a condition that said
// it would relaunch and nothing naming the pods or the fix. Past the bound
// it says which workers, on which nodes, and how to release them; the wait
// itself goes on (two attempts must never write the checkpoint volume).
TEST_F(ReconcilerTest, WorkersStuckStoppingAreNamedWithTheFix) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  WorkerGroup& group = launcher_.groups.at(kKey);
  for (WorkerState& w : group.workers) w.node_name = "gpu-" + std::to_string(w.node_rank);
  group.stopping = true;  // a drain; one node then goes down
  ASSERT_TRUE(Pass().status.ok());
  clock_.Advance(std::chrono::minutes(9));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("WorkersStuckTerminating"), 0);
  EXPECT_EQ(ConditionReason("Degraded"), "");

  clock_.Advance(std::chrono::minutes(2));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("WorkersStuckTerminating"), 1) << "once per attempt";
  EXPECT_EQ(ConditionReason("Degraded"), "True/WorkersStuckTerminating");
  const std::string message = ConditionMessage("Degraded");
  EXPECT_NE(message.find("have been stopping for 11 minutes (worker 0 on node gpu-0"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("kubectl delete pod -n research -l pacer.dev/job=llama --force "
                         "--grace-period=0"),
            std::string::npos)
      << message;
  EXPECT_TRUE(launcher_.groups.count(kKey)) << "still waiting for them";

  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);  // the node came back; they ended
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Degraded"), "");
}

// Re-plans to what is slow and stops the workers: the layout the policy chose
// is in status.nextPlan; the workers exit at their checkpoint and are removed.
// Returns that layout.
planner::Layout ReplanAndStop(FakeLauncher& launcher, FakeMetrics& metrics, FakeClock& clock,
                              const std::function<ReconcileResult()>& pass,
                              const std::function<nlohmann::json()>& status) {
  const planner::Evaluation first = launcher.launches[0].plan;
  metrics.measurements[kKey] = Measurement{first.step.step_seconds * 2.0, 500, 1.0};
  clock.Advance(std::chrono::hours(3));
  EXPECT_TRUE(pass().status.ok());
  EXPECT_EQ(status()["phase"], "Replanning");
  const std::optional<planner::Layout> chosen = LayoutFromPlanJson(status()["nextPlan"]);
  EXPECT_TRUE(chosen.has_value()) << status().dump(2);
  launcher.SetAll(kKey, WorkerPhase::kFailed, 6);
  EXPECT_TRUE(pass().status.ok());  // removed
  return chosen.value_or(planner::Layout{});
}

// Defect: the re-plan the policy chose was only put in an event; the
// relaunch planned from scratch and could launch something else (here: the
// cheaper pool that appeared meanwhile). Now exactly the chosen layout is
// launched, and status.nextPlan is cleared.
TEST_F(ReconcilerTest, TheRelaunchAfterAReplanLaunchesExactlyTheLayoutThePolicyChose) {
  inventory_.inventory.inventory.node_pools[0].price_per_gpu_hour = 4.0;
  store_.Put(LlamaJob());
  LaunchAndRun();
  const planner::Layout chosen = ReplanAndStop(
      launcher_, metrics_, clock_, [&] { return Pass(); }, [&] { return Status(); });
  EXPECT_GT(chosen.gpus(), launcher_.launches[0].plan.layout.gpus());
  EXPECT_EQ(chosen.pool, "h100");
  planner::NodePool cheaper = inventory_.inventory.inventory.node_pools[0];
  cheaper.name = "h100-spot";
  cheaper.price_per_gpu_hour = 1.0;
  inventory_.inventory.inventory.node_pools.push_back(cheaper);

  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  const planner::Layout launched = launcher_.launches[1].plan.layout;
  EXPECT_EQ(launched.ToString(), chosen.ToString());
  EXPECT_EQ(launched.pool, "h100");
  EXPECT_EQ(launched.zero_stage, chosen.zero_stage);
  EXPECT_EQ(launched.recompute, chosen.recompute);
  EXPECT_EQ(Status()["plan"]["pool"], "h100");
  EXPECT_FALSE(Status().contains("nextPlan")) << Status().dump(2);
  EXPECT_EQ(store_.CountEvents("ReplanChanged"), 0);
}

// The relaunch of a re-plan whose status write was lost (the controller
// stopped in between) is adopted with the layout it runs; the nextPlan it
// used is cleared, or a later drain or failure would relaunch exactly that
// old choice instead of planning afresh.
TEST_F(ReconcilerTest, AnAdoptedRelaunchClearsTheNextPlanItUsed) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const planner::Layout chosen = ReplanAndStop(
      launcher_, metrics_, clock_, [&] { return Pass(); }, [&] { return Status(); });
  store_.fail_next_status_writes = 1;
  (void)Pass();
  ASSERT_EQ(launcher_.launches.size(), 2u);
  ASSERT_EQ(launcher_.launches[1].plan.layout.ToString(), chosen.ToString());
  ASSERT_TRUE(Status().contains("nextPlan")) << "the launch's write was lost";

  clock_.Advance(std::chrono::seconds(30));
  launcher_.SetAll(kKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["attempt"], 2);
  EXPECT_FALSE(Status().contains("nextPlan")) << Status().dump(2);
  // Its own launch time (it used to keep attempt 1's, and its predicted
  // completion counted from there).
  ASSERT_NE(launcher_.launches[1].plan_unix_seconds, launcher_.launches[0].plan_unix_seconds);
  EXPECT_EQ(Status()["launchTime"],
            planner::FormatRfc3339(launcher_.launches[1].plan_unix_seconds));
}

// The GPUs the re-plan counted on were taken while its workers stopped: the
// job says so and is planned again, not held to a layout that cannot start.
TEST_F(ReconcilerTest, AReplanWhoseGpusWereTakenMeanwhileIsPlannedAgainAndSaysWhy) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const planner::Layout chosen = ReplanAndStop(
      launcher_, metrics_, clock_, [&] { return Pass(); }, [&] { return Status(); });
  ASSERT_GT(chosen.gpus(), 8);
  inventory_.inventory.inventory.node_pools[0].free_gpus = chosen.gpus() - 8;

  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(store_.CountEvents("ReplanChanged"), 1);
  EXPECT_NE(store_.LastEventMessage("ReplanChanged").find("free GPUs now"), std::string::npos)
      << store_.LastEventMessage("ReplanChanged");
  // Planned afresh: what is free now cannot meet the deadline, so it waits
  // for GPUs as any job would, and no longer for the chosen layout.
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(ConditionReason("Planned"), "False/InsufficientGpus");
  EXPECT_FALSE(Status().contains("nextPlan"));
  inventory_.inventory.inventory.node_pools[0].free_gpus = 128;
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(store_.CountEvents("ReplanChanged"), 1);
}

TEST_F(ReconcilerTest, FasterThanPredictedCausesNoChurn) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  for (int i = 1; i <= 5; ++i) {
    metrics_.measurements[kKey] = Measurement{predicted * 0.8, 300 * i, 1.0};
    clock_.Advance(std::chrono::minutes(30));
    ASSERT_TRUE(Pass().status.ok());
  }
  EXPECT_EQ(launcher_.stops.size(), 0u);
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(Status()["replans"], 0);
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
}

TEST_F(ReconcilerTest, ImpossibleDeadlineIsInfeasibleWithTheFix) {
  store_.Put(LlamaJob("llama", "6h"));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Infeasible");
  EXPECT_EQ(ConditionReason("Infeasible"), "True/DeadlineUnreachable");
  ASSERT_EQ(store_.CountEvents("DeadlineUnreachable"), 1);
  std::string message;
  const nlohmann::json status = Status();
  for (const auto& c : status["conditions"]) {
    if (c["type"] == "Infeasible") message = c["message"];
  }
  EXPECT_NE(message.find("GPU"), std::string::npos) << message;  // says what would fix it
  // Terminal: another pass changes nothing and records no new event.
  const int writes = store_.status_writes;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.status_writes, writes);
  EXPECT_EQ(store_.CountEvents("DeadlineUnreachable"), 1);
}

// A deadline no layout meets even with the whole cluster free, arriving
// while every GPU is busy: Infeasible because of the deadline, with what
// would meet it, not because no GPU is free now (the message was "0 free
// GPUs; 2 needed", which waiting would never fix).
TEST_F(ReconcilerTest, ImpossibleDeadlineOnABusyClusterSaysTheDeadlineIsTheReason) {
  inventory_.inventory = H100Cluster(16, 0);
  store_.Put(LlamaJob("llama", "6h"));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Infeasible");
  EXPECT_EQ(ConditionReason("Infeasible"), "True/DeadlineUnreachable");
  std::string message;
  const nlohmann::json status = Status();
  for (const auto& c : status["conditions"]) {
    if (c["type"] == "Infeasible") message = c["message"];
  }
  EXPECT_NE(message.find("even with every GPU of the cluster free"), std::string::npos) << message;
  EXPECT_NE(message.find("GPU"), std::string::npos) << message;
  EXPECT_EQ(message.find("0 free"), std::string::npos) << message;
  EXPECT_EQ(store_.CountEvents("NoLayoutFits"), 0);
}

TEST_F(ReconcilerTest, AJobThatAlreadyRanKeepsRunningOnTheFastestPlanWhenLate) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  // A restart after the deadline became unreachable (6 hours left for 7 days
  // of work): not Infeasible, the fastest plan with DeadlineAtRisk.
  store_.jobs[kKey]["spec"]["maxDuration"] = "6h";
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 4);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(Status()["phase"], "Planning");
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "True/DeadlineUnreachable");
  EXPECT_EQ(store_.CountEvents("DeadlineUnreachable"), 1);
  EXPECT_GT(launcher_.launches[1].plan.layout.gpus(), launcher_.launches[0].plan.layout.gpus());
}

// A job that restarts after its deadline has passed runs on, late, on the
// fastest plan. The planner refused a past deadline as an error in the
// spec, and the restart failed the job as InvalidSpec with its work lost.
TEST_F(ReconcilerTest, AJobThatRestartsAfterItsDeadlinePassedRunsOnLate) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  store_.jobs[kKey]["spec"]["maxDuration"] = "6h";
  clock_.Advance(std::chrono::hours(7));  // the deadline passed an hour ago
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 4);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_NE(Status()["phase"], "Failed") << Status().dump();
  EXPECT_EQ(ConditionReason("InvalidSpec"), "") << Status().dump();
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "True/DeadlineUnreachable");
  ASSERT_EQ(store_.CountEvents("DeadlineUnreachable"), 1);
  bool said = false;
  for (const auto& e : store_.events) {
    said = said || e.message.find("The deadline passed at") != std::string::npos;
  }
  EXPECT_TRUE(said);
  // The fastest plan: no smaller than the one that ran on time.
  EXPECT_GE(launcher_.launches[1].plan.layout.gpus(), launcher_.launches[0].plan.layout.gpus());
}

// An edit that makes a running job's spec invalid stops its workers at a
// checkpoint instead of deleting them (which lost every step since the
// last periodic checkpoint); fixing the spec relaunches the job.
TEST_F(ReconcilerTest, AnInvalidEditStopsTheWorkersAtACheckpointAndAFixRelaunches) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  nlohmann::json& job = store_.jobs[kKey];
  const nlohmann::json good_batch = job["spec"]["training"]["globalBatchSize"];
  job["spec"]["training"]["globalBatchSize"] = -4;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(ConditionReason("InvalidSpec"), "True/InvalidSpec");
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  // The workers checkpoint and exit; the user fixes the edit.
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  job["spec"]["training"]["globalBatchSize"] = good_batch;
  job["metadata"]["generation"] = 3;
  for (int i = 0; i < 3 && launcher_.launches.size() < 2; ++i) ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_NE(Status()["phase"], "Failed") << Status().dump();
  EXPECT_EQ(Status().value("restarts", 0), 0) << "a stop at a checkpoint is no failure";
}

// The invalid edit keeps what the job has done: progress, plan and measured
// pace stay in the status, and the fix resumes from them instead of planning
// the whole job again (it used to write a status without them).
TEST_F(ReconcilerTest, AnInvalidEditKeepsTheProgressPlanAndPaceAndTheFixResumesFromThem) {
  LaunchAndRunThousandSteps();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["training"]["globalBatchSize"] = -4;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000) << Status().dump();
  EXPECT_EQ(Status()["progress"]["totalSteps"], 33379);
  EXPECT_EQ(Status()["plan"]["gpus"], launcher_.launches[0].plan.layout.gpus());
  EXPECT_NEAR(Status().value("measuredStepSeconds", 0.0), predicted, predicted * 0.01);
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  job["spec"]["training"]["globalBatchSize"] = 1024;
  job["metadata"]["generation"] = 3;
  for (int i = 0; i < 3 && launcher_.launches.size() < 2; ++i) ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000) << Status().dump();
  EXPECT_EQ(Status().value("restarts", 0), 0);
}

// An edit of a field the workers use reaches them: they stop at a
// checkpoint and are relaunched with it (they used to run the old spec to
// its end). An edit of a planning-only field does not stop them.
TEST_F(ReconcilerTest, ASpecEditTheWorkersSeeStopsThemAtACheckpointAndRelaunchesWithIt) {
  LaunchAndRunThousandSteps();
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["maxDuration"] = "20d";
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.stops.empty()) << "the deadline applies at the next plan";
  EXPECT_EQ(Status()["phase"], "Running");

  job["spec"]["data"]["tokens"] = 280e9;
  job["metadata"]["generation"] = 3;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  EXPECT_EQ(Status()["phase"], "Replanning");
  EXPECT_EQ(ConditionReason("Replanning"), "True/SpecChanged");
  EXPECT_EQ(store_.CountEvents("SpecChanged"), 1);
  EXPECT_THAT(store_.LastEventMessage("SpecChanged"), ::testing::HasSubstr("66758"));
  EXPECT_EQ(Status().value("replans", 0), 0) << "an edit is no re-plan";

  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);  // stopped at a checkpoint
  for (int i = 0; i < 3 && launcher_.launches.size() < 2; ++i) ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(launcher_.launches[1].total_steps, 66758);
  EXPECT_EQ(launcher_.launches[1].attempt, 2);
  EXPECT_NE(launcher_.launches[1].spec_hash, launcher_.launches[0].spec_hash);
  EXPECT_EQ(launcher_.launches[1].spec_hash, WorkerSpecHash(launcher_.launches[1].spec));
  EXPECT_EQ(Status().value("restarts", 0), 0);
  EXPECT_EQ(ConditionReason("WorkerFailure"), "") << "the controller's own stop";
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000);
}

// Workers that exit 0 after the total they were launched with, when the spec
// has been edited to more steps meanwhile (before a pass saw the edit), have
// not finished the job: the rest is relaunched. It used to be Succeeded with
// "all 66758 steps completed" after 33379.
TEST_F(ReconcilerTest,
       WorkersThatFinishTheTotalTheyWereLaunchedWithAreNotSucceededWhenTheSpecHasMore) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kSucceeded, 0);
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["data"]["tokens"] = 280e9;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_NE(Status()["phase"], "Succeeded") << Status().dump();
  EXPECT_EQ(store_.CountEvents("Completed"), 0);
  EXPECT_EQ(ConditionReason("Replanning"), "True/SpecChanged");
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 33379);

  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(launcher_.launches[1].total_steps, 66758);
  EXPECT_EQ(reconciler().View(kKey)->steps_completed, 33379);

  launcher_.SetAll(kKey, WorkerPhase::kSucceeded, 0);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Succeeded");
  EXPECT_EQ(Status()["progress"]["totalSteps"], 66758);
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 66758);
}

// A finished job stays finished after an edit that leaves nothing to train,
// with its pods or without: it used to take the new, smaller total as what
// it trained, and with its pods gone any edit relaunched it for one step.
TEST_F(ReconcilerTest, ASucceededJobStaysSucceededAfterAnEditThatLeavesNothingToTrain) {
  RunToSuccess();
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["data"]["tokens"] = 14e9;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Succeeded");
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(Status()["progress"]["totalSteps"], 33379) << Status().dump();
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 33379);
  EXPECT_EQ(Status()["observedGeneration"], 2);
  EXPECT_EQ(ConditionReason("Succeeded"), "True/Completed");

  launcher_.groups.erase(kKey);  // the pods are gone
  job["spec"]["maxDuration"] = "20d";
  job["metadata"]["generation"] = 3;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u) << Status().dump();
  EXPECT_EQ(Status()["phase"], "Succeeded");
  EXPECT_EQ(store_.CountEvents("Completed"), 1);
  EXPECT_EQ(Status()["plan"]["gpus"], launcher_.launches[0].plan.layout.gpus());
}

// A finished job whose data grows trains the new steps only.
TEST_F(ReconcilerTest, ASucceededJobWhoseDataGrewTrainsOnlyTheRest) {
  RunToSuccess();
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["data"]["tokens"] = 280e9;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Pending") << Status().dump();
  EXPECT_EQ(ConditionReason("Replanning"), "True/SpecChanged");
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(launcher_.launches[1].total_steps, 66758);
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 33379);
  // Planned for the 33379 steps left, not all 66758.
  const planner::Evaluation& plan = launcher_.launches[1].plan;
  EXPECT_LT(plan.total.training_seconds, 0.6 * 66758 * plan.step.step_seconds);
}

// Steps are counted at the global batch and sequence length they were
// trained at (status.stepUnit): an edit of either after steps were done is
// refused, and setting it back resumes. It used to relaunch and count the
// old batch's steps as steps of the new one.
TEST_F(ReconcilerTest, AGlobalBatchSizeEditAfterStepsWereDoneIsRefusedAndARevertResumes) {
  LaunchAndRunThousandSteps();
  ASSERT_EQ(Status()["stepUnit"]["globalBatchSize"], 1024) << Status().dump();
  ASSERT_EQ(Status()["stepUnit"]["sequenceLength"], 4096);
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["training"]["globalBatchSize"] = 2048;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(ConditionReason("InvalidSpec"), "True/StepUnitChanged");
  const std::string message = ConditionMessage("InvalidSpec");
  EXPECT_THAT(message, ::testing::HasSubstr("globalBatchSize"));
  EXPECT_THAT(message, ::testing::HasSubstr("1024"));
  EXPECT_THAT(message, ::testing::HasSubstr("2048"));
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr("sequenceLength")));
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000);
  EXPECT_EQ(Status()["progress"]["totalSteps"], 33379);
  EXPECT_TRUE(Status()["plan"].is_object());
  EXPECT_EQ(Status()["stepUnit"]["globalBatchSize"], 1024);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("StepUnitChanged"), 1) << "one event per transition";
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1) << "checked once, for the edit";
  EXPECT_EQ(ConditionReason("InvalidSpec"), "True/StepUnitChanged");

  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  job["spec"]["training"]["globalBatchSize"] = 1024;
  job["metadata"]["generation"] = 3;
  for (int i = 0; i < 3 && launcher_.launches.size() < 2; ++i) ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(launcher_.launches[1].total_steps, 33379);
  EXPECT_NE(Status()["phase"], "Failed");
  EXPECT_EQ(Status()["progress"]["stepsCompleted"], 1000);
}

// Before any step was counted the batch may change: the workers are
// relaunched with it.
TEST_F(ReconcilerTest, AGlobalBatchSizeEditBeforeAnyStepRelaunchesWithIt) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["training"]["globalBatchSize"] = 2048;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("InvalidSpec"), "");
  EXPECT_EQ(ConditionReason("Replanning"), "True/SpecChanged");
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  for (int i = 0; i < 3 && launcher_.launches.size() < 2; ++i) ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(launcher_.launches[1].plan.layout.global_batch(), 2048);
  EXPECT_EQ(Status()["stepUnit"]["globalBatchSize"], 2048);
}

// A batch edit before any step relaunches; that launch's status write is
// lost and the attempt adopted: its steps count at the new batch. The
// adoption kept the old stepUnit, and the next edit of anything refused the
// job as StepUnitChanged, telling the user to set back a batch it never ran.
TEST_F(ReconcilerTest, AnAdoptedLaunchAfterABatchEditCountsItsStepsAtTheNewBatch) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  nlohmann::json& job = store_.jobs[kKey];
  job["spec"]["training"]["globalBatchSize"] = 2048;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(ConditionReason("Replanning"), "True/SpecChanged");
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());  // the stopped gang is removed
  ASSERT_EQ(launcher_.launches.size(), 1u);
  store_.fail_next_status_writes = 1;
  (void)Pass();  // attempt 2 launches; its status write is lost
  ASSERT_EQ(launcher_.launches.size(), 2u);
  ASSERT_EQ(Status()["stepUnit"]["globalBatchSize"], 1024) << "the lost write";

  launcher_.SetAll(kKey, WorkerPhase::kRunning);
  metrics_.measurements[kKey] = Measurement{launcher_.launches[1].plan.step.step_seconds, 50, 1.0};
  clock_.Advance(std::chrono::minutes(10));
  ASSERT_TRUE(Pass().status.ok());  // adopted
  EXPECT_EQ(Status()["attempt"], 2);
  EXPECT_EQ(Status()["stepUnit"]["globalBatchSize"], 2048) << Status().dump();
  job["spec"]["maxDuration"] = "20d";
  job["metadata"]["generation"] = 3;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("InvalidSpec"), "") << Status().dump();
  EXPECT_EQ(Status()["phase"], "Running");
}

// Local mode resuming a checkpoint (the status did not outlive the last
// run) continues a job that has run: past its deadline it runs on late
// instead of failing with "in the past" beside its checkpoints.
TEST_F(ReconcilerTest, AResumedEarlierRunPastItsDeadlineRunsOnLate) {
  reconciler_options_.resumes_earlier_run = true;
  nlohmann::json job = LlamaJob();
  job["spec"]["maxDuration"] = "6h";
  store_.Put(job);
  clock_.Advance(std::chrono::hours(7));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u) << Status().dump();
  EXPECT_EQ(ConditionReason("InvalidSpec"), "");
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "True/DeadlineUnreachable");
}

TEST_F(ReconcilerTest, InvalidSpecSetsAConditionAndOthersKeepBeingServed) {
  nlohmann::json bad = LlamaJob("bad");
  bad["spec"]["training"]["globalBatchSize"] = -4;
  store_.Put(bad);
  store_.Put(LlamaJob());
  ReconcileResult r = Pass("research/bad");
  EXPECT_TRUE(r.status.ok());
  EXPECT_FALSE(r.requeue_after.has_value());
  EXPECT_EQ(Status("research/bad")["phase"], "Failed");
  EXPECT_EQ(ConditionReason("InvalidSpec", "research/bad"), "True/InvalidSpec");
  ASSERT_EQ(store_.CountEvents("InvalidSpec"), 1);
  EXPECT_NE(store_.events[0].message.find("globalBatchSize"), std::string::npos)
      << store_.events[0].message;
  ASSERT_TRUE(Pass("research/bad").status.ok());
  EXPECT_EQ(store_.CountEvents("InvalidSpec"), 1) << "no event storm on requeue";

  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.launches[0].job.name, "llama");
}

TEST_F(ReconcilerTest, FailedWorkerRestartsFromCheckpointUpToTheLimit) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  for (int restart = 1; restart <= 3; ++restart) {
    launcher_.SetAll(kKey, WorkerPhase::kFailed, 1);
    ASSERT_TRUE(Pass().status.ok());
    EXPECT_EQ(Status()["restarts"], restart);
    ASSERT_TRUE(Pass().status.ok());  // relaunch
    ASSERT_EQ(launcher_.launches.size(), static_cast<size_t>(restart + 1));
    EXPECT_EQ(launcher_.launches.back().attempt, restart + 1);
    launcher_.SetAll(kKey, WorkerPhase::kRunning);
  }
  EXPECT_EQ(store_.CountEvents("WorkerFailed"), 3);
  for (const auto& e : store_.events) {
    if (e.reason == "WorkerFailed") {
      EXPECT_NE(e.message.find("exit code 1"), std::string::npos) << e.message;
    }
  }
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 1);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(ConditionReason("Failed"), "True/RestartLimitExceeded");
  // What failed and that it was not restarted; it said "restarting from the
  // last checkpoint" of the failed job.
  const std::string message = ConditionMessage("Failed");
  EXPECT_NE(message.find("failed with exit code 1"), std::string::npos) << message;
  EXPECT_NE(message.find("; not restarted: 3 restarts used (the limit)"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("restarting"), std::string::npos) << message;
  EXPECT_EQ(launcher_.launches.size(), 4u);
  EXPECT_TRUE(launcher_.groups.empty());
}

// A worker failure is written (restarts, the memory margin) before its pods
// are removed. Before, the pods went first: a status write that failed then
// (a conflict) lost the failure, and the relaunch ran uncounted on the old
// margin.
TEST_F(ReconcilerTest, AWorkerFailureWhoseStatusWriteFailedIsCountedOnTheRetry) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 5);  // out of memory
  store_.fail_next_status_writes = 1;
  EXPECT_FALSE(Pass().status.ok());
  EXPECT_FALSE(launcher_.groups.empty()) << "the failed pods stay until the failure is written";
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["restarts"], 1);
  EXPECT_GT(Status().value("memoryMarginFraction", 0.0), 0.0);
  EXPECT_TRUE(launcher_.groups.empty());
  ASSERT_TRUE(Pass().status.ok());  // relaunch
  EXPECT_EQ(launcher_.launches.size(), 2u);
}

// ... and a removal that fails after the write does not count it twice.
TEST_F(ReconcilerTest, AFailureWhosePodRemovalFailedIsNotCountedTwice) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 1);
  launcher_.fail_next_stops = 1;
  EXPECT_FALSE(Pass().status.ok());
  EXPECT_EQ(Status()["restarts"], 1);
  EXPECT_FALSE(launcher_.groups.empty());
  ASSERT_TRUE(Pass().status.ok());  // removes them, counts nothing
  EXPECT_EQ(Status()["restarts"], 1);
  EXPECT_TRUE(launcher_.groups.empty());
  EXPECT_EQ(store_.CountEvents("WorkerFailed"), 1);
  ASSERT_TRUE(Pass().status.ok());  // relaunch
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches.back().attempt, 2);
}

TEST_F(ReconcilerTest, SucceededWhenEveryWorkerFinished) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kSucceeded, 0);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Succeeded");
  EXPECT_EQ(Status()["progress"]["percent"], 100.0);
  EXPECT_EQ(store_.CountEvents("Completed"), 1);
}

TEST_F(ReconcilerTest, UnreachableMetricsAreDegradedButTheJobRunsOnPredictions) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  metrics_.error = UnavailableError("prometheus at http://prom:9090: connection refused");
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Running");
  EXPECT_EQ(ConditionReason("Degraded"), "True/MetricsUnavailable");
  EXPECT_EQ(launcher_.stops.size(), 0u);
  EXPECT_TRUE(Status().contains("projectedCompletionTime"));
  // Metrics return: the condition goes away.
  metrics_.error.reset();
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Degraded"), "");
}

// The launch aims at the re-plan policy's at-risk threshold (the deadline
// minus the slack), as a re-plan does: the cheapest plan for the deadline
// itself (16 GPUs, 8.94 of 9 days) was at risk on its own prediction and
// relaunched on twice the GPUs at its first Running pass.
TEST_F(ReconcilerTest, ALaunchedPlanKeepsTheReplanSlack) {
  store_.Put(LlamaJob("llama", "9d"));
  LaunchAndRun();
  EXPECT_LE(launcher_.launches[0].plan.total.total_seconds, 0.95 * 9 * 86400)
      << launcher_.launches[0].plan.layout.ToString();
  clock_.Advance(std::chrono::minutes(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.stops.size(), 0u);
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
}

// When only the deadline itself can be met (16 GPUs in all), that plan is
// launched, not refused for the slack.
TEST_F(ReconcilerTest, APlanInsideTheSlackIsLaunchedWhenNoneKeepsIt) {
  inventory_.inventory = H100Cluster(2);
  store_.Put(LlamaJob("llama", "9d"));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.launches[0].plan.layout.gpus(), 16);
  EXPECT_GT(launcher_.launches[0].plan.total.total_seconds, 0.95 * 9 * 86400);
}

// A relaunch plans with the step-time ratio measured on the attempt before:
// it was kept only when a re-plan fired, so the restart of a job measured
// 1.3 times slower (on track) after a failure, or after a drain deleted its
// pods, planned on the raw model again.
TEST_F(ReconcilerTest, ARestartPlansWithTheMeasuredStepTimeRatio) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const planner::Evaluation first = launcher_.launches[0].plan;
  metrics_.measurements[kKey] = Measurement{first.step.step_seconds * 1.3, 1000, 1.0};
  clock_.Advance(std::chrono::hours(3));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
  ASSERT_EQ(launcher_.launches.size(), 1u);
  for (const bool drained : {false, true}) {
    if (drained) {
      // The relaunched attempt, measured as slow, loses its pods to a drain.
      launcher_.SetAll(kKey, WorkerPhase::kRunning);
      const planner::Evaluation second = launcher_.launches.back().plan;
      metrics_.measurements[kKey] =
          Measurement{second.step.step_seconds / second.step.calibration_ratio * 1.3, 2000, 1.0};
      clock_.Advance(std::chrono::hours(3));
      ASSERT_TRUE(Pass().status.ok());
      // The ratio kept from the failure is written again from this attempt's
      // measurement: cleared first, so that only the drain's path sets it.
      nlohmann::json object = store_.jobs[kKey];
      object["status"].erase("calibration");
      store_.Put(object);
      launcher_.groups.at(kKey).stopping = true;  // a node drain deletes the pods
      ASSERT_TRUE(Pass().status.ok());
      ASSERT_EQ(ConditionReason("WorkerFailure"), "True/StoppedExternally");
      launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
    } else {
      launcher_.SetAll(kKey, WorkerPhase::kFailed, 1);
    }
    const size_t launched = launcher_.launches.size();
    for (int i = 0; i < 3 && launcher_.launches.size() == launched; ++i) {
      ASSERT_TRUE(Pass().status.ok());
    }
    ASSERT_EQ(launcher_.launches.size(), launched + 1) << (drained ? "drained" : "failed");
    EXPECT_NEAR(launcher_.launches.back().plan.step.calibration_ratio, 1.3, 1e-4)
        << (drained ? "drained" : "failed");
  }
}

// During a metrics outage, and for an answer without a step time (the
// last-step query failed; no step ended in the window), the ETA keeps the
// attempt's last measured pace (it used the prediction, twice the measured
// step here, and moved days later). No re-plan acts on an outage's
// projection, whose progress is days old: progress is the last known, so an
// outage long enough made an on-track job look late and relaunched it.
TEST_F(ReconcilerTest, AnOutageKeepsTheLastMeasuredPaceAndRelaunchesNothing) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  metrics_.measurements[kKey] = Measurement{predicted * 0.5, 1000, 1.0};
  clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(Pass().status.ok());
  const std::string measured_eta = Status()["projectedCompletionTime"];
  ASSERT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
  // Within the rounding of the kept step time (6 significant digits, x 32k steps).
  auto eta_shift_seconds = [&] {
    return *planner::ParseRfc3339(Status()["projectedCompletionTime"].get<std::string>()) -
           *planner::ParseRfc3339(measured_eta);
  };

  metrics_.measurements[kKey] = Measurement{std::nullopt, 1000, 1.0};
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_LE(std::abs(eta_shift_seconds()), 10) << Status()["projectedCompletionTime"];
  ASSERT_TRUE(Status().contains("measuredStepSeconds"));
  EXPECT_NEAR(Status()["measuredStepSeconds"].get<double>(), predicted * 0.5, predicted * 1e-5);

  metrics_.error = UnavailableError("prometheus at http://prom:9090: connection refused");
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Degraded"), "True/MetricsUnavailable");
  EXPECT_LE(std::abs(eta_shift_seconds()), 10) << Status()["projectedCompletionTime"];
  EXPECT_NEAR(Status()["measuredStepSeconds"].get<double>(), predicted * 0.5, predicted * 1e-5);
  EXPECT_NE(ConditionMessage("Degraded").find("last measured step time"), std::string::npos)
      << ConditionMessage("Degraded");

  // Two days without metrics: the job runs on, unseen. Progress frozen at
  // the last known step slid the projection two days later and turned the
  // on-track job DeadlineAtRisk, naming a re-plan that was never made; the
  // projection from before the outage stands.
  clock_.Advance(std::chrono::hours(48));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_LE(std::abs(eta_shift_seconds()), 10) << Status()["projectedCompletionTime"];
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "False/OnTrack");

  clock_.Advance(std::chrono::hours(24 * 12));  // no progress seen for 12 days
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.stops.size(), 0u);
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(Status()["phase"], "Running");
  // Past the projection the job may finish at any moment: never in the past.
  EXPECT_GE(*planner::ParseRfc3339(Status()["projectedCompletionTime"].get<std::string>()),
            clock_.WallUnixSeconds());
  // Past the deadline: DeadlineExceeded, and no OnTrack kept from before.
  EXPECT_EQ(ConditionReason("DeadlineExceeded"), "True/DeadlinePassed");
  EXPECT_NE(ConditionReason("DeadlineAtRisk"), "False/OnTrack");
}

TEST_F(ReconcilerTest, WaitsForGpusWhenTheClusterIsBusy) {
  inventory_.inventory = H100Cluster(16, 0);
  store_.Put(LlamaJob());
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/InsufficientGpus");
  ASSERT_TRUE(r.requeue_after.has_value());
  // Still busy: the condition stays, and the event is not repeated.
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Planned"), "False/InsufficientGpus");
  EXPECT_EQ(store_.CountEvents("InsufficientGpus"), 1);
  // GPUs free up: the next pass launches.
  inventory_.inventory = H100Cluster(16);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
}

TEST_F(ReconcilerTest, WaitsForNodesOfAnAllowedGpuType) {
  inventory_.inventory.inventory.node_pools[0].gpu_type = "A100-80GB";
  store_.Put(LlamaJob());  // allows H100-SXM only
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/NoMatchingNodes");
  EXPECT_TRUE(r.requeue_after.has_value()) << "not terminal: nodes may join";
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("NoMatchingNodes"), 1) << "events on transitions only";
}

TEST_F(ReconcilerTest, AnUnknownGpuTypeIsAnInvalidSpecNotAWaitForNodes) {
  nlohmann::json job = LlamaJob();
  job["spec"]["resources"]["gpuTypes"] = {"H100-SXMM"};  // no catalog has it
  store_.Put(job);
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(ConditionReason("InvalidSpec"), "True/InvalidSpec");
  EXPECT_EQ(store_.CountEvents("NoMatchingNodes"), 0);
  EXPECT_FALSE(r.requeue_after.has_value()) << "terminal until the spec changes";
}

TEST_F(ReconcilerTest, DeletionRemovesWorkersThenTheFinalizer) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  store_.jobs[kKey]["metadata"]["deletionTimestamp"] = "2026-11-22T01:00:00Z";
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  EXPECT_EQ(store_.jobs.count(kKey), 0u) << "finalizer removed, object gone";
  EXPECT_FALSE(reconciler().View(kKey).has_value());
}

// The finalizer goes once the workers' pods are deleted, not once they are
// gone (Kubernetes' background deletion: a pod on an unreachable node can
// stay Terminating for good, and the TrainJob would never go). A TrainJob
// re-created under the same name meanwhile waits for those pods: two
// attempts never write one checkpoint volume.
TEST_F(ReconcilerTest, AJobRecreatedWhileTheDeletedOnesPodsTerminateWaitsForThem) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  store_.jobs[kKey]["metadata"]["deletionTimestamp"] = "2026-11-22T01:00:00Z";
  ASSERT_TRUE(Pass().status.ok());
  launcher_.terminating[kKey] = 4;  // deleted, in their grace period
  EXPECT_EQ(store_.jobs.count(kKey), 0u) << "finalizer removed, object gone";

  nlohmann::json again = LlamaJob();
  again["metadata"]["uid"] = "uid-llama-2";
  store_.Put(again);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u) << "not launched beside the old pods";
  EXPECT_EQ(ConditionReason("Planned"), "False/PreviousWorkersTerminating");
  launcher_.terminating[kKey] = 0;
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].job.uid, "uid-llama-2");
}

TEST_F(ReconcilerTest, RestartedControllerAdoptsRunningWorkersWithoutDuplicates) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  reconciler_.reset();  // a new controller process: only the store and the pods remain
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(Status()["phase"], "Running");
  EXPECT_EQ(Status()["attempt"], 1);
}

TEST_F(ReconcilerTest, StatusConflictIsRetryable) {
  store_.Put(LlamaJob());
  store_.fail_next_status_writes = 1;
  ReconcileResult r = Pass();
  EXPECT_EQ(r.status.code(), StatusCode::kAborted);
  EXPECT_TRUE(r.status.retryable());
  // The retry adopts the launched workers instead of launching again.
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
}

TEST_F(ReconcilerTest, PassedDeadlineSetsACondition) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  metrics_.measurements[kKey] = Measurement{predicted, 100, 1.0};
  clock_.Advance(std::chrono::hours(24 * 15));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("DeadlineExceeded"), "True/DeadlinePassed");
}

// The pods' pacer.dev/layout annotation is status.plan as the reconciler
// wrote it: its predictedCompletionTime counts from when the plan was made
// (it said 1970 when the pods were built with time 0).
TEST_F(ReconcilerTest, PodLayoutAnnotationPredictsTheSameCompletionAsStatus) {
  store_.Put(LlamaJob());  // created at the fake clock's start, 2026-11-22
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const LaunchSpec& launch = launcher_.launches[0];
  EXPECT_EQ(launch.plan_unix_seconds, clock_.WallUnixSeconds());
  const nlohmann::json pod = WorkerPodObject(launch, 0, PodTemplateOptions{});
  const nlohmann::json layout =
      nlohmann::json::parse(pod["metadata"]["annotations"]["pacer.dev/layout"].get<std::string>());
  const std::string predicted = layout["predictedCompletionTime"].get<std::string>();
  EXPECT_EQ(predicted, Status()["plan"]["predictedCompletionTime"]);
  EXPECT_EQ(predicted.rfind("2026-", 0), 0u) << predicted;  // ~7.7 days after the plan
  // What the workers were launched with, for the reconciler to see an edit.
  EXPECT_EQ(pod["metadata"]["annotations"]["pacer.dev/spec-hash"], WorkerSpecHash(launch.spec));
  EXPECT_EQ(pod["metadata"]["annotations"]["pacer.dev/total-steps"], "33379");
  // No prometheus.io/scrape annotations: an annotation scrape job beside
  // the PodMonitor scraped local rank 0 twice, and the other ranks never.
  for (const auto& [key, value] : pod["metadata"]["annotations"].items()) {
    EXPECT_EQ(key.rfind("prometheus.io/", 0), std::string::npos) << key;
  }
}

// A worker pod requests host CPU and memory per GPU it holds: without
// requests it was BestEffort (evicted first under node memory pressure) and
// refused in namespaces whose ResourceQuota covers requests.cpu/memory.
// Its memory-backed /dev/shm is bounded by the memory request.
TEST_F(ReconcilerTest, WorkerPodsRequestHostCpuAndMemoryPerGpu) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const LaunchSpec& launch = launcher_.launches[0];
  const int gpus = launch.plan.layout.gpus_per_node;
  ASSERT_GT(gpus, 0);
  PodTemplateOptions options;
  options.cpu_per_gpu = 2.5;
  options.memory_per_gpu_gib = 12;
  nlohmann::json pod = WorkerPodObject(launch, 0, options);
  const nlohmann::json& requests = pod["spec"]["containers"][0]["resources"]["requests"];
  EXPECT_EQ(requests["cpu"], std::to_string(2500 * gpus) + "m");
  EXPECT_EQ(requests["memory"], std::to_string(12 * gpus) + "Gi");
  EXPECT_FALSE(pod["spec"]["containers"][0]["resources"]["limits"].contains("memory"));
  nlohmann::json dshm;
  for (const auto& v : pod["spec"]["volumes"]) {
    if (v["name"] == "dshm") dshm = v["emptyDir"];
  }
  EXPECT_EQ(dshm["medium"], "Memory");
  EXPECT_EQ(dshm["sizeLimit"], std::to_string(12 * gpus) + "Gi");

  options.cpu_per_gpu = 0;
  options.memory_per_gpu_gib = 0;
  pod = WorkerPodObject(launch, 0, options);
  EXPECT_FALSE(pod["spec"]["containers"][0]["resources"]["requests"].contains("cpu"));
  EXPECT_FALSE(pod["spec"]["containers"][0]["resources"]["requests"].contains("memory"));
}

// The worker's stop grace fits inside the pod's: the worker kills ranks that
// have not stopped before the kubelet kills the worker, and the rest of the
// pod's grace is theirs to finish a step and write the checkpoint (a fixed
// 25 s inside the default 300 s killed every long-step job's stop).
TEST_F(ReconcilerTest, WorkersGetTheStopGraceOfThePodLessAMargin) {
  EXPECT_EQ(WorkerStopGraceSeconds(300), 270);
  EXPECT_EQ(WorkerStopGraceSeconds(30), 25);
  EXPECT_EQ(WorkerStopGraceSeconds(3600), 3240);
  EXPECT_EQ(WorkerStopGraceSeconds(6), 1);
  EXPECT_EQ(WorkerStopGraceSeconds(1), 1);
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  PodTemplateOptions options;
  options.termination_grace_seconds = 600;
  const nlohmann::json pod = WorkerPodObject(launcher_.launches[0], 0, options);
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 600);
  std::string grace;
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == "PACER_STOP_GRACE_SECONDS") grace = e["value"].get<std::string>();
  }
  EXPECT_EQ(grace, "540");
}

// A cluster plan is a GPU plan: the worker may not fall back to the CPU.
TEST_F(ReconcilerTest, WorkerPodsRunTheGpuBackend) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const nlohmann::json pod = WorkerPodObject(launcher_.launches[0], 0, PodTemplateOptions{});
  std::string backend;
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == "PACER_BACKEND") backend = e["value"].get<std::string>();
  }
  EXPECT_EQ(backend, "gpu");
}

// A status written with the wrong types (here by hand: phase a number) is
// read as no phase, not a type_error thrown out of the reconcile.
TEST_F(ReconcilerTest, StatusPhaseOfTheWrongTypeIsIgnored) {
  nlohmann::json job = LlamaJob();
  job["status"] = {{"phase", 5}};
  store_.Put(job);
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Status()["phase"], "Planning");
}

// A status that says more steps are done than the spec now has (its data
// shrunk since, or a copied `kubectl get -o yaml`): counted as all of them,
// never past 100 % (local mode's progress bar crashed on it). The workers'
// checkpoint, not the status, says where training resumes.
TEST_F(ReconcilerTest, MoreStepsDoneThanTheSpecHasAreCountedAsAllOfThem) {
  nlohmann::json job = LlamaJob();
  job["status"] = {{"progress", {{"stepsCompleted", 1000000000}}}};
  store_.Put(job);
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const nlohmann::json progress = Status()["progress"];
  ASSERT_TRUE(progress.is_object()) << Status().dump(2);
  EXPECT_EQ(progress["stepsCompleted"], progress["totalSteps"]) << Status().dump(2);
  EXPECT_LE(progress.value("percent", 0.0), 100.0);
}

// A ResourceQuota smaller than the gang: the API server refuses the pods
// (403). The refusal shows on the TrainJob (condition and event with the
// server's message); pod events do not retry it (a real cluster saw 280
// create/delete cycles in 28 s); the backoff doubles; a quota change
// (WakeRefusedLaunches) retries at once and the job launches.
TEST_F(ReconcilerTest, RefusedLaunchIsShownAndRetriedWithBackoffUntilTheQuotaChanges) {
  store_.Put(LlamaJob());
  const std::string quota =
      "POST /api/v1/namespaces/research/pods: 403 Forbidden: pods \"llama-a1-n0\" is "
      "forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=8, used: "
      "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4";
  launcher_.refuse = ::pacer::Status(StatusCode::kPermissionDenied, quota);
  // The delays are the options', so a changed default changes them here too.
  const std::chrono::milliseconds backoff = reconciler_options_.launch_refusal_base_delay;
  ASSERT_LE(2 * backoff, reconciler_options_.launch_refusal_max_delay) << "room to double";
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.requeue_after, backoff);
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(Status().value("attempt", 0), 0);  // a refused launch is no attempt
  EXPECT_EQ(ConditionReason("Planned"), "False/LaunchRefused");
  bool quoted = false;
  const nlohmann::json status = Status();
  for (const auto& c : status["conditions"]) {
    if (c["type"] == "Planned")
      quoted = c["message"].get<std::string>().find("exceeded quota: gpus") != std::string::npos;
  }
  EXPECT_TRUE(quoted) << status.dump();
  ASSERT_EQ(store_.CountEvents("LaunchRefused"), 1);
  EXPECT_NE(store_.events.back().message.find("exceeded quota: gpus"), std::string::npos);
  EXPECT_EQ(store_.events.back().type, "Warning");

  // Pod events (the deleted pod 0, the inventory) wake the job again and again.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(store_.CountEvents("LaunchRefused"), 1);

  clock_.Advance(backoff);
  r = Pass();
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(r.requeue_after, 2 * backoff);  // doubled
  EXPECT_EQ(store_.CountEvents("LaunchRefused"), 2);

  // The quota is removed: the change wakes the job, which launches at once.
  launcher_.refuse.reset();
  EXPECT_EQ(reconciler().WakeRefusedLaunches(), std::vector<std::string>{kKey});
  r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(launcher_.launches.size(), 3u);
  EXPECT_EQ(Status()["phase"], "Planning");
  EXPECT_EQ(Status()["attempt"], 1);
  EXPECT_EQ(ConditionReason("Planned"), "True/Planned");
  EXPECT_TRUE(reconciler().WakeRefusedLaunches().empty());  // launched: nothing refused
}

// 400/422: the server finds the workers invalid. The job used to be dropped
// from the queue as "terminal" with no condition and no event; now it is
// shown as refused, with the server's message, and retried with backoff.
TEST_F(ReconcilerTest, WorkersTheServerFindsInvalidAreShownAndRetriedWithBackoff) {
  store_.Put(LlamaJob());
  const std::string invalid =
      "POST /api/v1/namespaces/research/services: 422 Unprocessable Entity: Service "
      "\"llama-workers\" is invalid: metadata.name: Invalid value: \"llama-workers\"";
  launcher_.refuse = ::pacer::Status(StatusCode::kInvalidArgument, invalid);
  const std::chrono::milliseconds backoff = reconciler_options_.launch_refusal_base_delay;
  ASSERT_LE(2 * backoff, reconciler_options_.launch_refusal_max_delay) << "room to double";
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.requeue_after, backoff);
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/LaunchRefused");
  ASSERT_EQ(store_.CountEvents("LaunchRefused"), 1);
  EXPECT_NE(store_.events.back().message.find("the API server found the workers invalid"),
            std::string::npos)
      << store_.events.back().message;
  EXPECT_NE(store_.events.back().message.find("metadata.name: Invalid value"), std::string::npos);
  clock_.Advance(backoff);
  r = Pass();
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(r.requeue_after, 2 * backoff);
}

// The fix of a 400/422 is a spec edit: the job launches at that edit's
// pass, not when the backoff (up to minutes by then) ends.
TEST_F(ReconcilerTest, ASpecEditAfterARefusedLaunchIsTriedAtOnce) {
  store_.Put(LlamaJob());
  launcher_.refuse = ::pacer::Status(
      StatusCode::kInvalidArgument,
      "POST /api/v1/namespaces/research/pods: 422 Unprocessable Entity: Pod \"llama-a1-n0\" is "
      "invalid: spec.containers[0].env[0].name: Invalid value: \"1BAD\"");
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u) << "the backoff holds without an edit";
  launcher_.refuse.reset();
  store_.jobs[kKey]["metadata"]["generation"] = 2;  // the user fixed spec.worker.env
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(ConditionReason("Planned"), "True/Planned");
}

// Another object holding the workers' Service name (an earlier TrainJob's,
// waiting for the garbage collector, or a user's) is shown and retried.
TEST_F(ReconcilerTest, AServiceInTheWayIsShownAndRetriedWithBackoff) {
  store_.Put(LlamaJob());
  launcher_.refuse = ::pacer::Status(
      StatusCode::kFailedPrecondition,
      "Service llama-workers in namespace research is in the way: the workers need that name");
  const std::chrono::milliseconds backoff = reconciler_options_.launch_refusal_base_delay;
  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.requeue_after, backoff);
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/LaunchRefused");
  ASSERT_EQ(store_.CountEvents("LaunchRefused"), 1);
  EXPECT_NE(store_.events.back().message.find(
                "the workers cannot be launched yet: Service llama-workers in namespace "
                "research is in the way"),
            std::string::npos)
      << store_.events.back().message;
  launcher_.refuse.reset();  // the Service is gone
  clock_.Advance(backoff);
  r = Pass();
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_NE(ConditionReason("Planned"), "False/LaunchRefused");
}

// The launcher creates pod 0, is refused pod 1 and removes pod 0; the pod
// cache still shows pod 0 for a moment, and its events wake the job. That
// group is not a launch whose status write was lost: adopting it made the
// refused launch count as attempt 1 (seen in the end-to-end quota test,
// one run in a few). The refusal stands; the next launch is attempt 1.
TEST_F(ReconcilerTest, TheRefusedLaunchsRemovedPodsAreNotAdoptedWhileTheCacheLags) {
  store_.Put(LlamaJob());
  launcher_.refuse = ::pacer::Status(StatusCode::kPermissionDenied, "exceeded quota: one-pod");
  const std::chrono::milliseconds backoff = reconciler_options_.launch_refusal_base_delay;
  ASSERT_NE(backoff, reconciler_options_.transition_poll) << "else a poll looks like the backoff";
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(ConditionReason("Planned"), "False/LaunchRefused");
  ASSERT_EQ(launcher_.launches.size(), 1u);
  ASSERT_EQ(launcher_.launches[0].attempt, 1);

  // The cache's view: pod 0 of attempt 1, the gang's other pod never made.
  WorkerGroup stale;
  stale.attempt = 1;
  stale.expected_workers = 2;
  stale.layout = launcher_.launches[0].plan.layout;
  stale.workers.push_back({0, WorkerPhase::kPending, std::nullopt, "", ""});
  launcher_.groups[kKey] = stale;
  for (int i = 0; i < 5; ++i) {
    ReconcileResult r = Pass();
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.requeue_after, backoff);  // the backoff, not a poll
  }
  EXPECT_EQ(Status().value("attempt", 0), 0) << "a refused launch is no attempt";
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/LaunchRefused");
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0) << "already removed by the launcher";
  EXPECT_EQ(store_.CountEvents("LaunchRefused"), 1);

  // Still there when the backoff ends (the removal failed): removed again.
  clock_.Advance(backoff);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  EXPECT_EQ(Status().value("attempt", 0), 0);

  // Gone, quota lifted: the next launch is attempt 1.
  launcher_.refuse.reset();
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].attempt, 1);
  EXPECT_EQ(Status()["attempt"], 1);
  EXPECT_EQ(Status()["phase"], "Planning");
}

// A real API server keeps deleted pods Terminating for their grace period,
// holding their GPUs: the relaunch after a failure is planned only once the
// old attempt's pods are gone (it used to be planned at once, on the GPUs
// free at that instant, and the job stayed small).
TEST_F(ReconcilerTest, RelaunchWaitsUntilTheOldAttemptsPodsAreGone) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 4);
  ASSERT_TRUE(Pass().status.ok());  // the failure: the rest are deleted
  EXPECT_EQ(Status()["restarts"], 1);
  launcher_.terminating[kKey] = 2;  // their pods linger for the grace period

  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(launcher_.launches.size(), 1u);  // not relaunched yet
  EXPECT_EQ(r.requeue_after, reconciler_options_.transition_poll);
  EXPECT_EQ(ConditionReason("Planned"), "False/PreviousWorkersTerminating");
  EXPECT_EQ(Status()["phase"], "Pending");
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("PreviousWorkersTerminating"), 1);  // on the transition only

  launcher_.terminating[kKey] = 0;  // gone
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches.back().attempt, 2);
  EXPECT_EQ(Status()["restarts"], 1);
}

// A controller killed while creating a gang left 1 of its pods: the new
// leader adopts the attempt (by the pods' labels and layout annotation), and
// a gang still incomplete after gang_completion_timeout is removed and
// launched again, instead of holding its GPUs in Planning forever.
TEST_F(ReconcilerTest, PartialGangIsRemovedAndRelaunchedAfterTheBound) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  ASSERT_GE(launcher_.launches[0].plan.layout.nodes, 2);
  launcher_.groups[kKey].workers.resize(1);  // the rest were never created

  ReconcileResult r = Pass();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Status()["phase"], "Planning");
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  EXPECT_LE(r.requeue_after.value_or(std::chrono::milliseconds(0)),
            reconciler_options_.transition_poll);

  // A second before the bound, then at it (the bound is inclusive).
  const std::chrono::milliseconds bound = reconciler_options_.gang_completion_timeout;
  clock_.Advance(bound - std::chrono::seconds(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);  // within the bound

  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  ASSERT_EQ(store_.CountEvents("GangIncomplete"), 1);
  EXPECT_NE(store_.events.back().message.find("only 1 of"), std::string::npos)
      << store_.events.back().message;

  ASSERT_TRUE(Pass().status.ok());  // launched again, whole
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches.back().attempt, 2);
  EXPECT_EQ(Status().value("restarts", 0), 0);  // no worker failed
}

// A worker that exits with code 2 (invalid configuration) would fail the
// same way on every restart: the job fails at once, with the reason, and
// keeps its restarts (they were spent three times over before).
TEST_F(ReconcilerTest, InvalidWorkerConfigFailsTheJobWithoutRestarts) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 2);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(ConditionReason("Failed"), "True/InvalidWorkerConfig");
  EXPECT_EQ(Status().value("restarts", 0), 0);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);  // never relaunched
  EXPECT_EQ(store_.CountEvents("InvalidWorkerConfig"), 1);
}

// Exit code 5: the same plan would run out of memory again. The next plan
// holds back 10% more GPU memory, and the margin survives in the status.
TEST_F(ReconcilerTest, OutOfMemoryReplansWithALargerMemoryMargin) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  EXPECT_DOUBLE_EQ(launcher_.launches[0].spec.memory_margin_fraction, 0);
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 5);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_DOUBLE_EQ(Status()["memoryMarginFraction"].get<double>(), 0.1);
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/OutOfMemory");
  EXPECT_EQ(store_.CountEvents("OutOfMemory"), 1);
  EXPECT_EQ(Status()["restarts"], 1);
  ASSERT_TRUE(Pass().status.ok());  // relaunch on a new plan
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_DOUBLE_EQ(launcher_.launches[1].spec.memory_margin_fraction, 0.1);
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/OutOfMemory") << "stays visible";

  launcher_.SetAll(kKey, WorkerPhase::kFailed, 5);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 3u);
  EXPECT_DOUBLE_EQ(launcher_.launches[2].spec.memory_margin_fraction, 0.2);
}

TEST_F(ReconcilerTest, DataLossFailsTheJobWithoutRelaunching) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 8);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Failed");
  EXPECT_EQ(ConditionReason("Failed"), "True/DataLoss");
  EXPECT_EQ(store_.CountEvents("DataLoss"), 1);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
}

// Two communication failures on the same node exclude it: the status says so,
// and the next launch's pods cannot be scheduled there.
TEST_F(ReconcilerTest, ANodeWithTwoCollectiveFailuresIsExcluded) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  for (int failure = 1; failure <= 2; ++failure) {
    WorkerGroup& group = launcher_.groups.at(kKey);
    ASSERT_GE(group.workers.size(), 1u);
    group.workers[0].phase = WorkerPhase::kFailed;
    group.workers[0].exit_code = 4;
    group.workers[0].node_name = "gpu-node-7";
    ASSERT_TRUE(Pass().status.ok());
    EXPECT_EQ(ConditionReason("WorkerFailure"), "True/CollectiveFailure");
    EXPECT_EQ(Status()["collectiveFailuresByNode"]["gpu-node-7"], failure);
    ASSERT_TRUE(Pass().status.ok());  // relaunch
    launcher_.SetAll(kKey, WorkerPhase::kRunning);
  }
  EXPECT_EQ(Status()["excludedNodes"], nlohmann::json::array({"gpu-node-7"}));
  EXPECT_EQ(store_.CountEvents("NodeExcluded"), 1);
  EXPECT_EQ(Status()["restarts"], 2);
  ASSERT_EQ(launcher_.launches.size(), 3u);
  EXPECT_TRUE(launcher_.launches[1].excluded_nodes.empty());
  const LaunchSpec& third = launcher_.launches[2];
  EXPECT_EQ(third.excluded_nodes, std::vector<std::string>{"gpu-node-7"});
  const nlohmann::json pod = WorkerPodObject(third, 0, PodTemplateOptions{});
  const nlohmann::json& term =
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"][0];
  ASSERT_TRUE(term.contains("matchFields")) << pod.dump(2);
  EXPECT_EQ(term["matchFields"][0]["key"], "metadata.name");
  EXPECT_EQ(term["matchFields"][0]["operator"], "NotIn");
  EXPECT_EQ(term["matchFields"][0]["values"], nlohmann::json::array({"gpu-node-7"}));
}

// A GPU fault (worker exit 9: an uncorrectable ECC error) excludes its node
// at the first fault, and the event says why.
TEST_F(ReconcilerTest, AGpuFaultExcludesItsNodeAtOnce) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  WorkerGroup& group = launcher_.groups.at(kKey);
  ASSERT_GE(group.workers.size(), 1u);
  group.workers[0].phase = WorkerPhase::kFailed;
  group.workers[0].exit_code = 9;
  group.workers[0].node_name = "gpu-node-3";
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/DeviceFault");
  EXPECT_EQ(Status()["excludedNodes"], nlohmann::json::array({"gpu-node-3"}));
  EXPECT_EQ(Status()["restarts"], 1);
  ASSERT_EQ(store_.CountEvents("NodeExcluded"), 1);
  EXPECT_NE(store_.LastEventMessage("NodeExcluded").find("a GPU fault"), std::string::npos)
      << store_.LastEventMessage("NodeExcluded");
  ASSERT_TRUE(Pass().status.ok());  // relaunch
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].excluded_nodes, std::vector<std::string>{"gpu-node-3"});
}

// The planner is handed an inventory without the excluded nodes.
TEST_F(ReconcilerTest, ExcludedNodesAreLeftOutOfTheInventoryTheJobIsPlannedOn) {
  inventory_.inventory = testing::H100Cluster(1);
  inventory_.inventory.nodes_by_pool["h100"] = {{"gpu-node-0", 8, 8}};
  nlohmann::json job = LlamaJob();
  job["status"]["excludedNodes"] = nlohmann::json::array({"gpu-node-0"});
  store_.Put(job);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty()) << "its only node is excluded";
  EXPECT_EQ(ConditionReason("Planned"), "False/NoMatchingNodes");
  EXPECT_EQ(Status()["excludedNodes"], nlohmann::json::array({"gpu-node-0"}));
}

// A job that has run and lost a node it needs (drained, deleted, NotReady)
// waits for GPUs instead of turning Infeasible: Infeasible is final until the
// spec changes, so the node's return never woke it and the job, with its
// checkpoint, was lost.
TEST_F(ReconcilerTest, AJobThatHasRunWaitsForTheNodeItLost) {
  inventory_.inventory = H100Cluster(2);
  nlohmann::json job = LlamaJob();
  job["spec"]["resources"]["minGPUs"] = 16;
  store_.Put(job);
  LaunchAndRun();
  ASSERT_EQ(launcher_.launches[0].plan.layout.gpus(), 16);
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 137);
  inventory_.inventory = H100Cluster(1);  // its second node is gone
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_NE(Status()["phase"], "Infeasible") << Status().dump(2);
  EXPECT_EQ(ConditionReason("Infeasible"), "");
  EXPECT_EQ(ConditionReason("Planned"), "False/InsufficientGpus");

  inventory_.inventory = H100Cluster(2);  // the node is back
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].plan.layout.gpus(), 16);
}

// With every GPU it ran on still there, a job that has run and fits no
// layout (here a spec edit: at least 32 GPUs on 16) is Infeasible, not left
// waiting for nodes whose return would change nothing.
TEST_F(ReconcilerTest, AJobThatHasRunAndFitsNoLayoutOnItsGpusIsInfeasible) {
  inventory_.inventory = H100Cluster(2);
  nlohmann::json job = LlamaJob();
  job["spec"]["resources"]["minGPUs"] = 16;
  store_.Put(job);
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 137);
  job = store_.jobs[kKey];
  job["spec"]["resources"]["minGPUs"] = 32;
  job["metadata"]["generation"] = 2;
  store_.Put(job);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(ConditionReason("Infeasible"), "True/NoLayoutFits") << Status().dump(2);
}

// Exit code 6 without a stop from the controller: something else (a node
// drain) stopped the workers cleanly at a checkpoint. Not their fault.
TEST_F(ReconcilerTest, AStopTheControllerDidNotAskForRelaunchesWithoutCountingARestart) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/StoppedExternally");
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 1);
  EXPECT_EQ(Status().value("restarts", 0), 0);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 2u);
}

// A node drain or an eviction deletes a worker pod: its workers stop at a
// checkpoint while the pod terminates. That is no re-plan: the job says it
// was stopped externally, and relaunches without counting a restart.
TEST_F(ReconcilerTest, AnEvictionWhileThePodTerminatesIsAnExternalStopNotAReplan) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(Status()["phase"], "Running");
  launcher_.groups.at(kKey).stopping = true;  // a pod has a deletionTimestamp
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/StoppedExternally");
  EXPECT_EQ(ConditionReason("Replanning"), "");
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 1);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 1) << "one event per stop";
  EXPECT_EQ(Status()["replans"], 0);

  launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(Status()["restarts"], 0);
  EXPECT_EQ(Status()["replans"], 0);
}

// One StoppedExternally event per attempt: a drain on the next attempt is
// reported again, though the condition carried over says StoppedExternally.
TEST_F(ReconcilerTest, EachAttemptsExternalStopIsReported) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  for (int attempt = 1; attempt <= 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    ASSERT_TRUE(Pass().status.ok());
    ASSERT_EQ(Status()["phase"], "Running");
    launcher_.groups.at(kKey).stopping = true;
    ASSERT_TRUE(Pass().status.ok());
    EXPECT_EQ(store_.CountEvents("StoppedExternally"), attempt);
    EXPECT_EQ(Status()["stoppedExternallyAttempt"], attempt);
    launcher_.SetAll(kKey, WorkerPhase::kFailed, 6);
    ASSERT_TRUE(Pass().status.ok());  // removed
    ASSERT_TRUE(Pass().status.ok());  // relaunched
    ASSERT_EQ(launcher_.launches.size(), static_cast<size_t>(attempt + 1));
    launcher_.SetAll(kKey, WorkerPhase::kRunning);
  }
  EXPECT_EQ(Status()["restarts"], 0);
}

// The pods of a failure the controller counted and removed can outlive its
// record of the deletion (a rank stuck in a collective ignores SIGTERM for
// the grace period): seen again, terminating, they are the controller's own
// removal, and the failure's reason stays.
TEST_F(ReconcilerTest, ACountedFailuresPodsStillTerminatingAreNotAnExternalStop) {
  store_.Put(LlamaJob());
  LaunchAndRun();
  ASSERT_TRUE(Pass().status.ok());
  const WorkerGroup running = launcher_.groups.at(kKey);
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 4);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(ConditionReason("WorkerFailure"), "True/CollectiveFailure");
  ASSERT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  WorkerGroup terminating = running;  // back in the cache, being deleted
  terminating.stopping = true;
  launcher_.groups[kKey] = terminating;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("WorkerFailure"), "True/CollectiveFailure");
  EXPECT_EQ(ConditionReason("Replanning"), "");
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 0);
  EXPECT_EQ(Status()["phase"], "Pending");
}

// Without the cluster scheduler each job is planned alone against the free
// GPUs. A launch's pods take none until the scheduler binds them, and the pod
// cache shows them later still: the second of two jobs reconciled in turn was
// planned onto the GPUs the first had just been given (both launched, 16 of
// 16 GPUs each on a 16-GPU cluster), and neither gang could start whole.
TEST_F(ReconcilerTest, ASecondJobWaitsUntilTheFirstLaunchHoldsItsGpus) {
  inventory_.inventory = H100Cluster(2);  // 16 free
  store_.Put(LlamaJob("a"));
  store_.Put(LlamaJob("b"));
  ASSERT_TRUE(Pass("research/a").status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const int a_gpus = launcher_.launches[0].plan.layout.gpus();

  // The cache does not show a's pods yet: b must not plan on their GPUs.
  ASSERT_TRUE(Pass("research/b").status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(ConditionReason("Planned", "research/b"), "False/WaitingForOtherLaunch");
  EXPECT_EQ(Status("research/b")["phase"], "Pending");
  EXPECT_THAT(store_.LastEventMessage("WaitingForOtherLaunch"),
              ::testing::HasSubstr("TrainJob research/a's worker pods were just created"));

  // The cache shows them, not bound yet: still on their way.
  inventory_.inventory.unscheduled_trainjob_gpus["research/a"]["H100-SXM"] = a_gpus;
  ASSERT_TRUE(Pass("research/b").status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  std::string message;
  const nlohmann::json b_status = Status("research/b");
  for (const auto& c : b_status["conditions"]) {
    if (c["type"] == "Planned") message = c["message"].get<std::string>();
  }
  EXPECT_THAT(message, ::testing::HasSubstr("research/a's worker pods are not scheduled onto "
                                            "nodes yet"));
  EXPECT_EQ(store_.CountEvents("WaitingForOtherLaunch"), 1) << "one event while it waits";

  // Bound: they hold their GPUs, and b is planned against what is left.
  inventory_.inventory = H100Cluster(2, 16 - a_gpus);
  inventory_.inventory.trainjob_gpus["research/a"]["H100-SXM"] = a_gpus;
  ASSERT_TRUE(Pass("research/b").status.ok());
  EXPECT_NE(ConditionReason("Planned", "research/b"), "False/WaitingForOtherLaunch");
  if (launcher_.launches.size() == 2u) {
    EXPECT_LE(launcher_.launches[1].plan.layout.gpus(), 16 - a_gpus);
  } else {
    EXPECT_EQ(ConditionReason("Planned", "research/b"), "False/InsufficientGpus");
  }
}

// After a controller restart nothing remembers the launch, but the pods it
// created are in the cache: unscheduled worker pods of another job hold a
// job back when it may use their GPU type, and only then.
TEST_F(ReconcilerTest, UnscheduledWorkersOfAnotherJobHoldBackOnlyJobsOfTheirGpuType) {
  store_.Put(LlamaJob());
  inventory_.inventory.unscheduled_trainjob_gpus["research/bert"]["A100-80GB"] = 64;
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u) << "an H100-only job does not wait for A100 pods";

  store_.Put(LlamaJob("b"));
  inventory_.inventory.trainjob_gpus[kKey]["H100-SXM"] = launcher_.launches[0].plan.layout.gpus();
  inventory_.inventory.unscheduled_trainjob_gpus["research/bert"][""] = 8;  // no known type
  ASSERT_TRUE(Pass("research/b").status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(ConditionReason("Planned", "research/b"), "False/WaitingForOtherLaunch");
  EXPECT_THAT(store_.LastEventMessage("WaitingForOtherLaunch"),
              ::testing::HasSubstr("8 GPUs of TrainJob research/bert"));

  // Unscheduled since longer than any gang of ours may stay so (another
  // controller's pods, a stray labelled pod): no launch on its way.
  const int64_t bound_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(ReconcilerOptions{}.gang_scheduling_timeout)
          .count();
  inventory_.inventory.unscheduled_trainjob_since["research/bert"] =
      clock_.WallUnixSeconds() - bound_seconds - 1;
  ASSERT_TRUE(Pass("research/b").status.ok());
  EXPECT_EQ(launcher_.launches.size(), 2u);
}

// Nothing is held for a job that is gone: its launch no longer holds others
// back once it is deleted.
TEST_F(ReconcilerTest, ADeletedJobsLaunchHoldsNoOneBack) {
  inventory_.inventory = H100Cluster(2);
  store_.Put(LlamaJob("a"));
  store_.Put(LlamaJob("b"));
  ASSERT_TRUE(Pass("research/a").status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  nlohmann::json& a = store_.jobs["research/a"];
  a["metadata"]["deletionTimestamp"] = "2026-11-22T01:00:00Z";
  ASSERT_TRUE(Pass("research/a").status.ok());
  ASSERT_EQ(launcher_.groups.count("research/a"), 0u);
  ASSERT_TRUE(Pass("research/b").status.ok());
  EXPECT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].job.key(), "research/b");
}

// A gang some of whose pods no node takes (the GPUs they were planned on were
// taken meanwhile) never starts, while its bound pods hold their GPUs: after
// gang_scheduling_timeout it is removed and planned again, and that is the
// controller's own stop, not a restart or an eviction.
TEST_F(ReconcilerTest, AGangWithPodsNoNodeTakesIsRemovedAndPlannedAgain) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  WorkerGroup& group = launcher_.groups.at(kKey);
  ASSERT_GE(group.workers.size(), 2u);
  for (WorkerState& w : group.workers) {
    w.node_name = "node-" + std::to_string(w.node_rank);
    w.phase = WorkerPhase::kRunning;
  }
  group.workers[1].node_name = "";  // never bound
  group.workers[1].phase = WorkerPhase::kPending;
  const int expected = group.expected_workers;  // the group is gone once removed
  const auto timeout = ReconcilerOptions{}.gang_scheduling_timeout;

  ASSERT_TRUE(Pass().status.ok());  // first seen unscheduled now
  clock_.Advance(timeout - std::chrono::seconds(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  EXPECT_EQ(Status()["phase"], "Planning");

  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  ASSERT_EQ(store_.CountEvents("GangUnschedulable"), 1);
  EXPECT_THAT(store_.LastEventMessage("GangUnschedulable"),
              ::testing::HasSubstr("1 of " + std::to_string(expected) +
                                   " worker pods of attempt 1 were not scheduled onto a node "
                                   "within 300 s"));
  EXPECT_EQ(Status()["phase"], "Pending");

  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].attempt, 2);
  EXPECT_EQ(Status().value("restarts", 0), 0) << "not a failure";
  EXPECT_EQ(store_.CountEvents("StoppedExternally"), 0);
}

// Bound in time: the clock starts again when pods are unscheduled anew.
TEST_F(ReconcilerTest, AGangBoundWithinTheBoundIsKept) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  const auto timeout = ReconcilerOptions{}.gang_scheduling_timeout;
  ASSERT_TRUE(Pass().status.ok());  // all pending, no node
  clock_.Advance(timeout - std::chrono::seconds(1));
  launcher_.SetAll(kKey, WorkerPhase::kRunning);
  for (WorkerState& w : launcher_.groups.at(kKey).workers) w.node_name = "node";
  ASSERT_TRUE(Pass().status.ok());
  clock_.Advance(timeout);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  EXPECT_EQ(store_.CountEvents("GangUnschedulable"), 0);
  EXPECT_EQ(Status()["phase"], "Running");

  // A pod unscheduled again (rescheduled after its node went): a new count.
  launcher_.groups.at(kKey).workers[0].node_name = "";
  launcher_.groups.at(kKey).workers[0].phase = WorkerPhase::kPending;
  ASSERT_TRUE(Pass().status.ok());
  clock_.Advance(timeout - std::chrono::seconds(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 0);
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
}

// The count belongs to one gang: a gang that had pods unscheduled for a
// while and then failed does not hand its time to the next attempt's gang,
// which would be removed as soon as it was seen.
TEST_F(ReconcilerTest, TheNextAttemptsGangStartsItsOwnUnscheduledCount) {
  store_.Put(LlamaJob());
  ASSERT_TRUE(Pass().status.ok());
  const auto timeout = ReconcilerOptions{}.gang_scheduling_timeout;
  ASSERT_TRUE(Pass().status.ok());  // all pending, no node: counted from now
  clock_.Advance(timeout - std::chrono::seconds(10));
  launcher_.SetAll(kKey, WorkerPhase::kFailed, 1);  // the gang fails instead
  ASSERT_TRUE(Pass().status.ok());
  for (int i = 0; i < 5 && launcher_.launches.size() < 2u; ++i) {
    clock_.Advance(std::chrono::seconds(1));
    ASSERT_TRUE(Pass().status.ok());
  }
  ASSERT_EQ(launcher_.launches.size(), 2u);
  ASSERT_TRUE(Pass().status.ok());  // the new gang, its pods not scheduled yet
  clock_.Advance(std::chrono::seconds(60));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("GangUnschedulable"), 0);
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1) << "only the failed gang's removal";
}

// A step-time ratio kept in status.calibration is read back bounded: a
// 1e300 written there made every later plan of the job take "forever". A
// real one of hundreds (CPU workers against a GPU's prediction) stays.
TEST(PersistedStateTest, AKeptStepTimeRatioIsReadWithinBounds) {
  const nlohmann::json status = nlohmann::json::parse(R"({"calibration": {
      "H100-SXM": {"stepTimeRatio": 1e300}, "A100-SXM-80GB": {"stepTimeRatio": 1e-300},
      "L40S": {"stepTimeRatio": 250}, "H200": {"stepTimeRatio": -2}}})");
  const PersistedState state = ReadPersistedState(status);
  EXPECT_EQ(state.calibration.by_gpu_type.at("H100-SXM").step_time_ratio,
            planner::kMaxMeasuredStepTimeRatio);
  EXPECT_EQ(state.calibration.by_gpu_type.at("A100-SXM-80GB").step_time_ratio,
            planner::kMinMeasuredStepTimeRatio);
  EXPECT_EQ(state.calibration.by_gpu_type.at("L40S").step_time_ratio, 250);
  EXPECT_EQ(state.calibration.by_gpu_type.count("H200"), 0u);
}

// status.nextPlan written by an older controller can hold a tensor-
// parallel size the model cannot be split by (its planner checked only the
// heads): launched, every worker exits invalid-config and the job fails. The
// relaunch refuses it, and the job is planned afresh.
TEST(RecheckLayoutTest, RefusesATensorParallelSizeTheWorkersCannotSplit) {
  auto job = planner::ParseTrainJob(
      "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\nspec:\n"
      "  model: {layers: 32, hiddenSize: 4096, attentionHeads: 32, ffnHiddenSize: 11008,\n"
      "          ffnKind: swiglu, vocabSize: 32000, sequenceLength: 4096}\n"
      "  data: {tokens: 1e9}\n  training: {globalBatchSize: 64}\n  maxDuration: 30d\n"
      "  parallelism: {tensorParallel: 8}\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const planner::Inventory inventory = H100Cluster().inventory;
  planner::PlanOptions options;
  options.now_unix_seconds = 1795305600;
  auto planned = planner::Plan(*job, inventory, {}, options);
  ASSERT_TRUE(planned.ok() && planned->plan) << planned.status().ToString();
  const planner::Layout layout = planned->plan->layout;
  ASSERT_EQ(layout.tensor_parallel, 8);
  EXPECT_TRUE(RecheckLayout(*job, layout, inventory, {}, {}).ok());

  planner::JobSpec changed = *job;
  changed.model.ffn_hidden_size = 11004;  // 4 x 2751
  const auto refused = RecheckLayout(changed, layout, inventory, {}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("tensor parallel 8 must divide the FFN hidden size (11004)"));
}

}  // namespace
}  // namespace pacer::controller
