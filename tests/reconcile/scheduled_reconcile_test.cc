// The reconciler under the cluster scheduler (ReconcilerDeps::allocations):
// a job launches only when admitted and on exactly its allocation, stays
// Pending when rejected (with the advice on the TrainJob), waits for its
// reservation, and is resized by checkpoint-and-relaunch when its
// allocation changes, never with two gangs at once.
#include <gtest/gtest.h>

#include "core/clock.h"
#include "fakes.h"
#include "reconcile/cluster_scheduler.h"
#include "reconcile/reconciler.h"
#include "test_jobs.h"

namespace pacer::controller {
namespace {

using testing::FakeInventory;
using testing::FakeJobStore;
using testing::FakeLauncher;
using testing::FakeMetrics;
using testing::H100Cluster;
using testing::LlamaJob;

constexpr char kJobKey[] = "research/llama";

Allocation Admitted(int gpus) {
  Allocation a;
  a.admitted = true;
  a.gpus = gpus;
  a.gpu_type = "H100-SXM";
  a.planned_finish_unix_seconds = 1795305600 + 10 * 86400;
  return a;
}

class ScheduledReconcileTest : public ::testing::Test {
 protected:
  ScheduledReconcileTest() {
    inventory_.inventory = H100Cluster();
    store_.Put(LlamaJob());
  }
  ReconcileResult Pass() {
    if (!reconciler_) {
      ReconcilerDeps deps{&store_, &launcher_, &metrics_, &inventory_, &clock_, &board_};
      reconciler_ = std::make_unique<Reconciler>(deps, ReconcilerOptions{});
    }
    return reconciler_->Reconcile(kJobKey);
  }
  nlohmann::json Status() { return store_.StatusOf(kJobKey); }
  std::string ConditionReason(const std::string& type) {
    const nlohmann::json status = Status();
    for (const auto& c : status["conditions"]) {
      if (c["type"] == type)
        return c["status"].get<std::string>() + "/" + c["reason"].get<std::string>();
    }
    return "";
  }
  void Allocate(const Allocation& a) { board_.Publish({{kJobKey, a}}); }

  FakeClock clock_;
  FakeJobStore store_;
  FakeLauncher launcher_;
  FakeMetrics metrics_;
  FakeInventory inventory_;
  AllocationBoard board_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(ScheduledReconcileTest, NothingLaunchesBeforeTheSchedulerHasSeenTheJob) {
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/AwaitingSchedule");
}

TEST_F(ScheduledReconcileTest, AnAdmittedJobLaunchesOnExactlyItsAllocation) {
  // Not what it would pick alone on a free cluster (16): what the schedule says.
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.launches[0].plan.layout.gpus(), 32);
  EXPECT_EQ(launcher_.launches[0].plan.layout.global_batch(), 1024);
  EXPECT_EQ(ConditionReason("Admitted"), "True/Admitted");
  EXPECT_EQ(Status()["schedule"]["admitted"], true);
  EXPECT_EQ(Status()["schedule"]["allocatedGpus"], 32);
  EXPECT_EQ(Status()["schedule"]["gpuType"], "H100-SXM");
  EXPECT_EQ(Status()["schedule"]["plannedFinishTime"], "2026-12-02T00:00:00Z");
  EXPECT_EQ(store_.CountEvents("Admitted"), 1);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("Admitted"), 1) << "events on transitions only";
  EXPECT_EQ(launcher_.launches.size(), 1u);
}

// A restart after the deadline passed relaunches on the allocation, late,
// and says so, as without the cluster scheduler.
TEST_F(ScheduledReconcileTest, ARestartPastTheDeadlineRunsOnLateAndSaysSo) {
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  store_.jobs[kJobKey]["spec"]["maxDuration"] = "6h";
  clock_.Advance(std::chrono::hours(7));
  launcher_.SetAll(kJobKey, WorkerPhase::kFailed, 4);
  for (int i = 0; i < 3 && launcher_.launches.size() < 2; ++i) ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u) << Status().dump();
  EXPECT_EQ(launcher_.launches[1].plan.layout.gpus(), 32);
  EXPECT_EQ(ConditionReason("InvalidSpec"), "");
  EXPECT_EQ(ConditionReason("DeadlineAtRisk"), "True/DeadlineUnreachable");
  EXPECT_EQ(store_.CountEvents("DeadlineUnreachable"), 1);
}

TEST_F(ScheduledReconcileTest, ARejectedJobIsNotLaunchedAndSaysWhatWouldAdmitIt) {
  Allocation rejected;
  rejected.gpu_type = "H100-SXM";
  rejected.message =
      "admitting it would make an admitted job miss its deadline; it would be admitted with a "
      "deadline of 2026-12-09T00:00:00Z or later";
  Allocate(rejected);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Admitted"), "False/Rejected");
  EXPECT_EQ(ConditionReason("Planned"), "False/Rejected");
  EXPECT_EQ(Status()["schedule"]["admitted"], false);
  ASSERT_EQ(store_.CountEvents("Rejected"), 1);
  EXPECT_NE(store_.events.back().message.find("deadline of 2026-12-09"), std::string::npos);

  // Admitted later (GPUs freed, or the user moved the deadline): it launches.
  Allocate(Admitted(16));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(ConditionReason("Admitted"), "True/Admitted");
}

// Admitted, but every node it may use is excluded: it waits, admitted,
// and says why (it was rejected, and came back as a new arrival).
TEST_F(ScheduledReconcileTest, AnAdmittedJobWithNoNodeLeftWaitsAdmittedAndSaysWhy) {
  Allocation none;
  none.admitted = true;
  none.message = "every node of an allowed GPU type is excluded for this job";
  Allocate(none);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(ConditionReason("Admitted"), "True/Admitted");
  EXPECT_EQ(ConditionReason("Planned"), "False/WaitingForReservedGpus");
  bool said = false;
  const nlohmann::json status = Status();
  for (const auto& c : status["conditions"]) {
    said |= c["type"] == "Planned" &&
            c["message"].get<std::string>().find("is excluded") != std::string::npos;
  }
  EXPECT_TRUE(said) << status;
  EXPECT_FALSE(status["schedule"].contains("gpuType")) << "no pool to name";
  // In its pool, but no layout there runs it now: said so, not "its
  // reserved GPUs start when GPUs free up".
  Allocation stuck = Admitted(0);
  stuck.message = "no layout of H100-SXM runs this job now: needs more memory";
  Allocate(stuck);
  ASSERT_TRUE(Pass().status.ok());
  const nlohmann::json waiting = Status();
  bool named = false;
  for (const auto& c : waiting["conditions"]) {
    named |= c["type"] == "Planned" &&
             c["message"].get<std::string>().find("no layout of H100-SXM") != std::string::npos;
  }
  EXPECT_TRUE(named) << waiting;

  // Running when its last node was excluded: it stops, and says why (not
  // that its GPUs went to jobs with deadlines).
  Allocate(Admitted(16));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  Allocate(none);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  ASSERT_FALSE(store_.events.empty());
  EXPECT_NE(store_.events.back().message.find("is excluded"), std::string::npos)
      << store_.events.back().message;
}

TEST_F(ScheduledReconcileTest, AnAdmittedJobWaitsForItsReservedGpus) {
  Allocation later = Admitted(0);
  later.next_start_unix_seconds = 1795305600 + 3600;
  Allocate(later);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(Status()["phase"], "Pending");
  EXPECT_EQ(ConditionReason("Planned"), "False/WaitingForReservedGpus");
  EXPECT_EQ(Status()["schedule"]["nextStartTime"], "2026-11-22T01:00:00Z");
}

TEST_F(ScheduledReconcileTest, AnAllocationThatIsNotFreeYetWaitsInsteadOfLaunchingSmaller) {
  inventory_.inventory = H100Cluster(16, 8);  // another job still stops at a checkpoint
  Allocate(Admitted(16));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_TRUE(launcher_.launches.empty());
  EXPECT_EQ(ConditionReason("Planned"), "False/WaitingForAllocatedGpus");
  inventory_.inventory = H100Cluster(16, 16);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.launches[0].plan.layout.gpus(), 16);
}

TEST_F(ScheduledReconcileTest, AShrunkAllocationStopsAtACheckpointAndRelaunchesOnTheNewSize) {
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(Status()["phase"], "Running");

  Allocate(Admitted(16));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  EXPECT_EQ(Status()["phase"], "Replanning");
  EXPECT_EQ(ConditionReason("Replanning"), "True/Resizing");
  ASSERT_EQ(store_.CountEvents("Shrinking"), 1);
  EXPECT_NE(store_.events.back().message.find("16 GPUs instead of 32"), std::string::npos)
      << store_.events.back().message;
  EXPECT_EQ(launcher_.launches.size(), 1u) << "no second gang while the first stops";

  // The workers checkpoint and exit (code 6); the old gang is removed, then
  // the new size launches from the checkpoint.
  launcher_.SetAll(kJobKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  EXPECT_EQ(launcher_.launches.size(), 1u);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].plan.layout.gpus(), 16);
  EXPECT_EQ(launcher_.launches[1].attempt, 2);
  EXPECT_EQ(launcher_.launches[1].plan.layout.global_batch(), 1024);
  EXPECT_EQ(Status()["restarts"], 0) << "a resize is not a failure";

  // Grown back later: a Growing event.
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(store_.CountEvents("Growing"), 1);
}

// A resize's status write lost (a conflict), and the old gang gone before
// the next pass: the relaunch's pass still writes what the resize decided
// (replans, lastReplanTime); it counted neither before.
TEST_F(ScheduledReconcileTest, AResizeWhoseStatusWriteFailedIsStillCountedAfterItsPodsAreGone) {
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(Status()["phase"], "Running");
  ASSERT_FALSE(Status().contains("lastReplanTime"));

  Allocate(Admitted(16));
  store_.fail_next_status_writes = 1;
  (void)Pass();
  ASSERT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  ASSERT_EQ(Status()["phase"], "Running") << "the status write was lost";
  launcher_.groups.erase(kJobKey);  // checkpointed, exited and removed meanwhile

  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].plan.layout.gpus(), 16);
  EXPECT_EQ(Status()["replans"], 1);
  EXPECT_TRUE(Status().contains("lastReplanTime")) << Status().dump(2);
  EXPECT_EQ(Status()["restarts"], 0);
}

// When no node of its type is schedulable (all cordoned), the scheduler
// gives a running job another type's GPUs, often as many. Counting only
// GPUs, the job kept running on the old type while the schedule counted it
// on the new one, keeping those GPUs from every other job.
TEST_F(ScheduledReconcileTest, AnAllocationOfAnotherGpuTypeMovesTheJobEvenAtTheSameCount) {
  planner::NodePool a100 = inventory_.inventory.inventory.node_pools[0];
  a100.name = "a100";
  a100.gpu_type = "A100-80GB";
  inventory_.inventory.inventory.node_pools.push_back(a100);
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 1u);
  ASSERT_EQ(launcher_.launches[0].plan.layout.gpu_type, "H100-SXM");
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(Status()["phase"], "Running");

  Allocation moved = Admitted(32);
  moved.gpu_type = "a100-80gb";  // another spelling of the same catalog GPU
  Allocate(moved);
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  EXPECT_EQ(Status()["phase"], "Replanning");
  EXPECT_EQ(ConditionReason("Replanning"), "True/Resizing");
  ASSERT_EQ(store_.CountEvents("Moving"), 1);
  EXPECT_NE(store_.events.back().message.find(
                "gives it 32 a100-80gb GPUs instead of 32 H100-SXM (no schedulable H100-SXM"),
            std::string::npos)
      << store_.events.back().message;

  launcher_.SetAll(kJobKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_EQ(launcher_.launches[1].plan.layout.gpu_type, "A100-80GB");
  EXPECT_EQ(launcher_.launches[1].plan.layout.gpus(), 32);

  // Running there, the same type in another spelling is no move.
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.CountStops(StopMode::kGraceful), 1);
  EXPECT_EQ(Status()["phase"], "Running");
}

// Between attempts (after a resize or a failure) the old gang's pods are
// still terminating, and that pass writes the status too. It kept no
// Admitted condition, so the scheduler read an admitted job as a new
// arrival: without its remembered share it could be rejected on a loaded
// pool, and "once True it stays True" did not hold.
TEST_F(ScheduledReconcileTest, AdmissionSurvivesThePassWhileTheOldWorkersTerminate) {
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(ConditionReason("Admitted"), "True/Admitted");

  Allocate(Admitted(16));
  ASSERT_TRUE(Pass().status.ok());  // a graceful stop at a checkpoint
  launcher_.SetAll(kJobKey, WorkerPhase::kFailed, 6);
  ASSERT_TRUE(Pass().status.ok());  // the old gang is removed
  ASSERT_EQ(launcher_.CountStops(StopMode::kRemove), 1);
  launcher_.terminating[kJobKey] = 2;  // ... and its pods are not gone yet
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(ConditionReason("Planned"), "False/PreviousWorkersTerminating");
  EXPECT_EQ(ConditionReason("Admitted"), "True/Admitted");
  nlohmann::json object = LlamaJob();
  object["status"] = Status();
  const std::optional<ScheduledJob> seen = ClusterScheduler::JobFromObject(object, 1795305600);
  ASSERT_TRUE(seen.has_value());
  EXPECT_TRUE(seen->admitted) << "the scheduler sees the job as admitted still";
  EXPECT_EQ(store_.CountEvents("Admitted"), 1) << "no second Admitted event";
}

// A Succeeded job whose data grows is a new arrival for the scheduler: the
// admission it had covered the finished work, and carried over, it let any
// amount of added work take GPUs reserved for other deadlines untested.
TEST_F(ScheduledReconcileTest, ASucceededJobGivenMoreStepsIsANewArrivalForTheScheduler) {
  Allocate(Admitted(32));
  ASSERT_TRUE(Pass().status.ok());
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  ASSERT_TRUE(Pass().status.ok());
  launcher_.SetAll(kJobKey, WorkerPhase::kSucceeded, 0);
  ASSERT_TRUE(Pass().status.ok());
  ASSERT_EQ(Status()["phase"], "Succeeded");
  ASSERT_EQ(ConditionReason("Admitted"), "True/Admitted");
  board_.Publish({});  // the scheduler's next pass leaves finished jobs out

  nlohmann::json& job = store_.jobs[kJobKey];
  job["spec"]["data"]["tokens"] = 280e9;
  job["metadata"]["generation"] = 2;
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(ConditionReason("Replanning"), "True/SpecChanged");
  EXPECT_EQ(ConditionReason("Admitted"), "") << Status().dump(2);
  nlohmann::json object = job;
  object["status"] = Status();
  const std::optional<ScheduledJob> seen = ClusterScheduler::JobFromObject(object, 1795305600);
  ASSERT_TRUE(seen.has_value());
  EXPECT_FALSE(seen->admitted) << "the added steps are tested for admission";
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.launches.size(), 1u) << "nothing launches before the scheduler admits it";
  EXPECT_EQ(ConditionReason("Planned"), "False/AwaitingSchedule");
}

// The shared schedule sizes jobs: a job measured slower than predicted is
// not re-planned alone onto GPUs that may be reserved for another deadline.
TEST_F(ScheduledReconcileTest, ASlowJobIsNotReplannedAloneUnderTheScheduler) {
  Allocate(Admitted(16));
  ASSERT_TRUE(Pass().status.ok());
  launcher_.SetAll(kJobKey, WorkerPhase::kRunning);
  const double predicted = launcher_.launches[0].plan.step.step_seconds;
  metrics_.measurements[kJobKey] = Measurement{predicted * 2.0, 500, 1.0};
  clock_.Advance(std::chrono::hours(3));
  ASSERT_TRUE(Pass().status.ok());
  EXPECT_EQ(launcher_.stops.size(), 0u);
  EXPECT_EQ(Status()["phase"], "Running");
  EXPECT_EQ(ConditionReason("DeadlineAtRisk").substr(0, 4), "True");
  // Its status carries the measured speed the next scheduler pass sizes it with.
  EXPECT_NEAR(Status()["measuredStepSeconds"].get<double>(), predicted * 2.0, 1e-3);
}

}  // namespace
}  // namespace pacer::controller
