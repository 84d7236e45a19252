// The pod launcher (daemon/pod_launcher.h) against the test API server: a
// workers' Service that is already there is used only when it is this
// TrainJob's; another's (an earlier TrainJob of the same name, deleted and
// waiting for the garbage collector, or a user's) stops the launch with a
// FailedPrecondition that says whose it is, and no pod is created.
#include "daemon/pod_launcher.h"

#include <chrono>
#include <string>

#include "core/cache_transforms.h"
#include "daemon/worker_pods.h"
#include "kube/informer.h"
#include "kube/resources.h"
#include "kube_test_env.h"
#include "pacer/planner/job_parser.h"

namespace pacer::controller {
namespace {

class PodLauncherTest : public KubeTest {
 protected:
  LaunchSpec Launch(const std::string& uid) {
    StatusOr<planner::JobSpec> job = planner::ParseTrainJob(R"(
apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: default}
spec:
  model: {parameters: 1.0e8, layers: 4, hiddenSize: 512, attentionHeads: 8, vocabSize: 32000,
          sequenceLength: 512}
  data: {tokens: 1e8}
  training: {globalBatchSize: 8, precision: bf16, optimizer: adamw}
)");
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    LaunchSpec launch;
    launch.job = JobRef{"default", "llama", uid, std::nullopt, std::nullopt};
    launch.spec = *job;
    planner::Layout& l = launch.plan.layout;
    l.gpu_type = "H100-SXM";
    l.pool = "h100";
    l.nodes = 1;
    l.gpus_per_node = 1;
    l.data_parallel = 1;
    l.micro_batch_size = 1;
    l.gradient_accumulation_steps = 8;
    launch.total_steps = 100;
    launch.checkpoint_interval_steps = 10;
    return launch;
  }

  // A Service of the workers' name, owned by `owner_uid` ("" = no owner).
  void PutService(const std::string& owner_uid) {
    nlohmann::json service = {
        {"apiVersion", "v1"},
        {"kind", "Service"},
        {"metadata", {{"name", WorkerServiceName("llama")}, {"namespace", "default"}}},
        {"spec", {{"clusterIP", "None"}, {"ports", {{{"name", "x"}, {"port", 1}}}}}}};
    if (!owner_uid.empty()) {
      service["metadata"]["ownerReferences"] = {{{"apiVersion", "pacer.dev/v1alpha1"},
                                                 {"kind", "TrainJob"},
                                                 {"name", "llama"},
                                                 {"uid", owner_uid},
                                                 {"controller", true}}};
    }
    ASSERT_TRUE(server_->CreateObject("/api/v1/namespaces/default/services", service).ok());
  }

  // One launch of the job, as the TrainJob of `uid`.
  Status LaunchAs(const std::string& uid) {
    Informer pods(client_.get(), kPods, "", InformerOptions{});  // Launch reads no cache
    PodLauncher launcher(client_.get(), &pods, PodTemplateOptions{});
    return launcher.Launch(Launch(uid));
  }

  size_t PodCount() const { return server_->ListObjects("/api/v1/namespaces/default/pods").size(); }
};

TEST_F(PodLauncherTest, ItsOwnServiceFromAnEarlierAttemptIsUsed) {
  PutService("uid-now");
  const Status launched = LaunchAs("uid-now");
  EXPECT_TRUE(launched.ok()) << launched.ToString();
  EXPECT_EQ(PodCount(), 1u);
}

TEST_F(PodLauncherTest, AnEarlierTrainJobsServiceStopsTheLaunchAndSaysWhose) {
  PutService("uid-before");
  const Status launched = LaunchAs("uid-now");
  EXPECT_EQ(launched.code(), StatusCode::kFailedPrecondition) << launched.ToString();
  EXPECT_NE(launched.message().find("belongs to an earlier TrainJob named llama (uid uid-before)"),
            std::string::npos)
      << launched.message();
  EXPECT_EQ(PodCount(), 0u) << "no worker is launched onto a Service about to be deleted";
}

TEST_F(PodLauncherTest, AUsersServiceOfThatNameStopsTheLaunchAndSaysWhatToDo) {
  PutService("");
  const Status launched = LaunchAs("uid-now");
  EXPECT_EQ(launched.code(), StatusCode::kFailedPrecondition) << launched.ToString();
  EXPECT_NE(launched.message().find("is in the way"), std::string::npos) << launched.message();
  EXPECT_NE(launched.message().find("delete or rename that Service"), std::string::npos);
  EXPECT_EQ(PodCount(), 0u);
}

// RBAC made by hand for an earlier version grants no get on Services: the
// Service is reused unchecked, as before, rather than every relaunch being
// refused.
TEST_F(PodLauncherTest, WithoutTheRightToReadTheServiceItIsReusedAsBefore) {
  PutService("uid-before");
  server_->FailNextRequests("GET", "/services/" + WorkerServiceName("llama"), 403, 1);
  const Status launched = LaunchAs("uid-now");
  EXPECT_TRUE(launched.ok()) << launched.ToString();
  EXPECT_EQ(PodCount(), 1u);
}

// A graceful stop (a re-plan's) that fails half-way, before the informer
// has seen the deletions: the group is stopping already. The reconciler
// told a failed stop from one under way by this, and took the controller's
// own half-done stop for one that never happened (later reported as a
// drain).
TEST_F(PodLauncherTest, AGracefulStopThatFailedHalfWayIsStoppingBeforeTheCacheShowsIt) {
  Informer pods(client_.get(), kPods, "", InformerOptions{});
  pods.Start();
  ASSERT_TRUE(pods.WaitForSync(kWait));
  PodLauncher launcher(client_.get(), &pods, PodTemplateOptions{});
  LaunchSpec spec = Launch("uid-now");
  spec.plan.layout.nodes = 2;
  spec.plan.layout.gradient_accumulation_steps = 4;
  ASSERT_TRUE(launcher.Launch(spec).ok());
  // The cache shows both pods, then lags: it sees no deletion after this.
  ASSERT_TRUE(Eventually([&] { return pods.ListByLabel(kJobLabel, "llama").size() >= 2; }));
  ASSERT_EQ(pods.ListByLabel(kJobLabel, "llama").size(), 2u);
  pods.Stop();
  StatusOr<std::optional<WorkerGroup>> before = launcher.Observe(spec.job);
  ASSERT_TRUE(before.ok() && before->has_value());
  ASSERT_FALSE((*before)->stopping);

  server_->FailNextRequests("DELETE", WorkerPodName("llama", spec.attempt, 1), 503, 1);
  const Status stopped = launcher.Stop(spec.job, StopMode::kGraceful);
  ASSERT_FALSE(stopped.ok()) << "the second pod's deletion failed";
  StatusOr<std::optional<WorkerGroup>> after = launcher.Observe(spec.job);
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_TRUE((*after)->stopping);
  EXPECT_EQ(launcher.TerminatingWorkers(spec.job), 1);
}

// A deleted TrainJob's Stop(kRemove) left an expectation that nothing
// observed again: one per TrainJob name ever deleted, for the life of the
// process. Expired ones are swept when a launch or stop adds another.
TEST_F(PodLauncherTest, ADeletedJobsExpectationsDoNotOutliveTheirTimeout) {
  Informer pods(client_.get(), kPods, "", InformerOptions{});
  FakeClock clock;
  PodLauncher launcher(client_.get(), &pods, PodTemplateOptions{}, &clock);
  for (int i = 0; i < 5; ++i) {
    const JobRef deleted{"default", "gone-" + std::to_string(i), "", std::nullopt, std::nullopt};
    ASSERT_TRUE(launcher.Stop(deleted, StopMode::kRemove).ok());
  }
  EXPECT_EQ(launcher.TrackedJobs(), 5u) << "within the timeout they stay (the cache may lag)";
  clock.Advance(std::chrono::minutes(3));
  ASSERT_TRUE(launcher.Launch(Launch("uid-now")).ok());
  EXPECT_EQ(launcher.TrackedJobs(), 1u) << "only the launch's own";
}

// Observe says what the workers were launched with: from the launch's
// expectations before the cache shows the pods, then from their annotations
// (a restarted controller has only those).
TEST_F(PodLauncherTest, ObserveSaysWhatSpecTheWorkersWereLaunchedWith) {
  Informer pods(client_.get(), kPods, "", InformerOptions{});
  PodLauncher launcher(client_.get(), &pods, PodTemplateOptions{});
  LaunchSpec spec = Launch("uid-now");
  spec.spec_hash = "0123456789abcdef";
  spec.plan_unix_seconds = 1'795'000'000;
  ASSERT_TRUE(launcher.Launch(spec).ok());
  StatusOr<std::optional<WorkerGroup>> early = launcher.Observe(spec.job);
  ASSERT_TRUE(early.ok() && early->has_value());
  EXPECT_EQ((*early)->spec_hash, "0123456789abcdef");
  EXPECT_EQ((*early)->total_steps, std::optional<int64_t>(100));
  EXPECT_EQ((*early)->launch_unix_seconds, std::optional<int64_t>(1'795'000'000));

  pods.Start();
  ASSERT_TRUE(pods.WaitForSync(kWait));
  PodLauncher restarted(client_.get(), &pods, PodTemplateOptions{});  // no expectations
  StatusOr<std::optional<WorkerGroup>> seen = restarted.Observe(spec.job);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((*seen)->spec_hash, "0123456789abcdef");
  EXPECT_EQ((*seen)->total_steps, std::optional<int64_t>(100));
  EXPECT_EQ((*seen)->launch_unix_seconds, std::optional<int64_t>(1'795'000'000));
  pods.Stop();
}

// The pod cache can lag: a watch whose connection died without a word is
// noticed only at its inactivity limit, after the launch's expectations
// expired. A launch decided on that cache started a second gang beside the
// running one; a live LIST before the launch refuses it (retryable).
TEST_F(PodLauncherTest, ALaunchBesideAGangTheCacheMissedIsRefused) {
  Informer pods(client_.get(), kPods, "", InformerOptions{});
  pods.Start();
  ASSERT_TRUE(pods.WaitForSync(kWait));
  pods.Stop();  // it sees nothing from now on
  PodLauncher launcher(client_.get(), &pods, PodTemplateOptions{});
  LaunchSpec first = Launch("uid-now");
  ASSERT_TRUE(launcher.Launch(first).ok());
  ASSERT_TRUE(launcher.Launch(first).ok()) << "the same attempt again is the same pods";

  LaunchSpec second = first;
  second.attempt = first.attempt + 1;
  const Status refused = launcher.Launch(second);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find(WorkerPodName("llama", first.attempt, 0)), std::string::npos)
      << refused.message();
  EXPECT_FALSE(server_
                   ->GetObject("/api/v1/namespaces/default/pods/" +
                               WorkerPodName("llama", second.attempt, 0))
                   .ok())
      << "no pod of the second attempt";

  // Once the first gang is being deleted, the next attempt may start.
  ASSERT_TRUE(launcher.Stop(first.job, StopMode::kRemove).ok());
  EXPECT_TRUE(launcher.Launch(second).ok());
}

// A re-created TrainJob's first attempt has the pod names of the earlier
// one's first attempt: their Create answered AlreadyExists, which counted as
// created, and the new job adopted the earlier job's pods while the cache
// lagged. The launch waits until they are gone, and says so on the TrainJob
// (FailedPrecondition is the reconciler's LaunchRefused: a condition and an
// event; Unavailable was a reconcile error only the controller's log showed).
TEST_F(PodLauncherTest, ALaunchBesideAnEarlierTrainJobsPodsOfTheSameNameWaits) {
  ASSERT_TRUE(LaunchAs("uid-old").ok());
  ASSERT_EQ(PodCount(), 1u);
  const Status refused = LaunchAs("uid-new");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_NE(refused.message().find(WorkerPodName("llama", Launch("uid-new").attempt, 0) +
                                   " belongs to an earlier TrainJob"),
            std::string::npos)
      << refused.message();
  StatusOr<nlohmann::json> pod = server_->GetObject(
      "/api/v1/namespaces/default/pods/" + WorkerPodName("llama", Launch("uid-new").attempt, 0));
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["metadata"]["ownerReferences"][0]["uid"], "uid-old");
}

// Pods of an earlier TrainJob of the same name (deleted and re-created while
// they terminate) are not the new TrainJob's workers: after its launch
// expectations expired, the new job took finished ones over as a launch
// whose status write was lost, and was Succeeded with no step run. Read
// through the controller's own pod cache (TrimPodForCache kept no owner).
TEST_F(PodLauncherTest, AnEarlierTrainJobsPodsAreNotTheWorkersOfANewOne) {
  const nlohmann::json pod = {{"apiVersion", "v1"},
                              {"kind", "Pod"},
                              {"metadata",
                               {{"name", WorkerPodName("llama", 3, 0)},
                                {"namespace", "default"},
                                {"labels", {{kJobLabel, "llama"}, {kAttemptLabel, "3"}}},
                                {"annotations", {{kNodesAnnotation, "1"}}},
                                {"ownerReferences",
                                 {{{"apiVersion", "pacer.dev/v1alpha1"},
                                   {"kind", "TrainJob"},
                                   {"name", "llama"},
                                   {"uid", "uid-old"},
                                   {"controller", true}}}}}},
                              {"spec", {{"containers", {{{"name", "worker"}, {"image", "w"}}}}}},
                              {"status", {{"phase", "Succeeded"}}}};
  ASSERT_TRUE(server_->CreateObject("/api/v1/namespaces/default/pods", pod).ok());
  InformerOptions options;
  options.index_label = kJobLabel;
  options.transform = TrimPodForCache;
  Informer pods(client_.get(), kPods, "", options);
  pods.Start();
  ASSERT_TRUE(pods.WaitForSync(std::chrono::seconds(30)));
  PodLauncher launcher(client_.get(), &pods, PodTemplateOptions{});

  StatusOr<std::optional<WorkerGroup>> mine =
      launcher.Observe(JobRef{"default", "llama", "uid-new", std::nullopt, std::nullopt});
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_FALSE(mine->has_value()) << "the new TrainJob took the old one's pods over";

  StatusOr<std::optional<WorkerGroup>> theirs =
      launcher.Observe(JobRef{"default", "llama", "uid-old", std::nullopt, std::nullopt});
  ASSERT_TRUE(theirs.ok() && theirs->has_value());
  EXPECT_EQ((*theirs)->attempt, 3);
  EXPECT_EQ((*theirs)->Count(WorkerPhase::kSucceeded), 1);
  pods.Stop();
}

}  // namespace
}  // namespace pacer::controller
