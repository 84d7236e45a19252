// pacer-controller's manager (daemon/controller_manager.h) against the test
// API server: the start and stop of its reconcile workers.
#include "daemon/controller_manager.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "kube_test_env.h"
#include "reconcile/reconciler.h"

// Last: cpprestsdk's macro U breaks headers included after it.
#include <cpprest/http_client.h>

namespace pacer::controller {
namespace {

// The HTTP status of GET /healthz on the manager's probe port; 0 when no
// answer came.
int Healthz(const ControllerManager& manager) {
  web::http::client::http_client_config config;
  config.set_timeout(std::chrono::seconds(30));  // generous: a loaded 2-core machine
  try {
    web::http::client::http_client client(
        "http://127.0.0.1:" + std::to_string(manager.probe_port()), config);
    return client.request(web::http::methods::GET, "/healthz").get().status_code();
  } catch (const std::exception&) {
    return 0;
  }
}

// A manager on the test API server, its ports picked free on loopback.
ManagerOptions TestOptions(const KubeConfig& kube) {
  ManagerOptions options;
  options.kube = kube;
  options.bind_address = "127.0.0.1";
  options.metrics_port = 0;
  options.probe_port = 0;
  options.identity = "manager-test";
  return options;
}

// The value of the sample `name` (no labels) on the manager's /metrics; -1
// when it is missing or no answer came.
double MetricValue(const ControllerManager& manager, const std::string& name) {
  web::http::client::http_client_config config;
  config.set_timeout(std::chrono::seconds(30));
  try {
    web::http::client::http_client client(
        "http://127.0.0.1:" + std::to_string(manager.metrics_port()), config);
    const std::string body =
        client.request(web::http::methods::GET, "/metrics").get().extract_string().get();
    const std::string prefix = "\n" + name + " ";
    const std::size_t at = body.find(prefix);
    if (at == std::string::npos) return -1;
    return std::stod(body.substr(at + prefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

ManagerOptions LivenessOptions(const KubeConfig& kube) {
  ManagerOptions options = TestOptions(kube);
  options.leader_elect = false;
  options.reconcile_max_silence = std::chrono::milliseconds(300);
  return options;
}

// Without --leader-election-namespace the Lease is in the controller pod's
// own namespace: the manifests fixed pacer-system in the args, and an
// overlay that moved the Deployment and its Role left the Lease behind
// (403, nothing reconciled).
TEST(LeaseNamespaceTest, ThePodsOwnNamespaceInAClusterElsePacerSystem) {
  KubeConfig in_cluster;
  in_cluster.context = "in-cluster";
  in_cluster.namespace_name = "ml-platform";
  EXPECT_EQ(LeaseNamespace("", in_cluster), "ml-platform");
  EXPECT_EQ(LeaseNamespace("elsewhere", in_cluster), "elsewhere");
  KubeConfig from_kubeconfig;
  from_kubeconfig.context = "dev";
  from_kubeconfig.namespace_name = "default";
  EXPECT_EQ(LeaseNamespace("", from_kubeconfig), "pacer-system");
}

// A leader with nothing to reconcile never finishes a reconcile; before,
// its liveness check failed once that silence outlasted the limit, and the
// kubelet restarted an idle controller over and over.
TEST_F(KubeTest, AnIdleLeaderStaysLive) {
  ControllerManager manager(LivenessOptions(Config()));
  ASSERT_TRUE(manager.Start().ok());
  ASSERT_TRUE(Eventually([&] { return manager.IsLeader(); }));
  // Several times the limit of silence, probed all along: at least three
  // probes, however long one takes on a loaded machine.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int probes = 0;
  while (probes < 3 || std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(Healthz(manager), 200) << "probe " << probes << " of an idle leader";
    ++probes;
  }
  manager.Stop();
}

// The check still catches a wedged worker: a reconcile held by an API
// server that never answers fails /healthz once the limit passes, and
// recovers when the reconcile ends.
TEST_F(KubeTest, AWorkerWedgedInAReconcileFailsLiveness) {
  nlohmann::json job = TrainJob("wedged");
  job["metadata"]["finalizers"] = {kFinalizer};
  ASSERT_TRUE(server_->CreateObject(TrainJobsPath(), job).ok());
  server_->HangRequests("PUT", "/trainjobs/wedged/status");
  ControllerManager manager(LivenessOptions(Config()));
  ASSERT_TRUE(manager.Start().ok());
  ASSERT_TRUE(Eventually([&] { return server_->HungRequestCount() == 1; }))
      << "the reconcile's status write is held";
  int last = 0;
  EXPECT_TRUE(Eventually([&] { return (last = Healthz(manager)) == 500; }))
      << "a worker held in a status write for longer than the limit: " << last;
  server_->StopHanging();
  EXPECT_TRUE(Eventually([&] { return Healthz(manager) == 200; }));
  manager.Stop();
}

// The leader elector's thread starts the workers, which wait for the first
// scheduler pass; a SIGTERM in that window (seen in CI under
// AddressSanitizer, where the pass is slow) stopped the workers before they
// existed, and the start then created threads nobody joined: std::terminate
// when the manager was destroyed.
TEST_F(KubeTest, AStopDuringTheFirstSchedulerPassJoinsEveryThreadTheStartCreates) {
  ManagerOptions options = TestOptions(Config());
  options.workers = 2;
  ControllerManager* self = nullptr;
  std::atomic<bool> first{true};
  std::promise<void> in_first_pass;
  options.scheduler_pass_hook = [&] {
    if (!first.exchange(false)) return;
    in_first_pass.set_value();
    self->Wait();  // returns once Stop() has begun
  };
  auto manager = std::make_unique<ControllerManager>(options);
  self = manager.get();
  ASSERT_TRUE(manager->Start().ok());
  ASSERT_EQ(in_first_pass.get_future().wait_for(kWait), std::future_status::ready)
      << "the manager became the leader and ran its first scheduler pass";

  std::thread stopper([&] { manager->Stop(); });
  stopper.join();
  EXPECT_FALSE(manager->IsLeader());
  EXPECT_EQ(manager->Wait(), ControllerManager::Exit::kStopped);
  manager.reset();  // every thread joined, or std::terminate here
}

// A new leader's first scheduler pass plans every job's curve afresh:
// seconds with hundreds of jobs. It ran on the leader elector's thread, so
// the Lease was not renewed meanwhile; past the renew deadline the leader
// stepped down and exited (and restarted into the same pass). Now the
// Lease is renewed while the first pass runs.
TEST_F(KubeTest, TheLeaseIsRenewedWhileTheFirstSchedulerPassRuns) {
  ManagerOptions options = TestOptions(Config());
  // Renewals every 100 ms; the deadlines generous (a loaded machine under a
  // sanitizer): the old code failed on the missing renewals, not on them.
  options.lease_duration = std::chrono::seconds(15);
  options.renew_deadline = std::chrono::seconds(10);
  options.retry_period = std::chrono::milliseconds(100);
  std::atomic<bool> first{true};
  std::promise<bool> renewed_during_pass;
  options.scheduler_pass_hook = [&] {
    if (!first.exchange(false)) return;
    // The pass lasts until the Lease was renewed twice, or kWait (the old
    // code: no renewal could happen while it ran, however long). Not a few
    // seconds: a renewal on a new TLS connection takes over 1 s under TSan.
    const int64_t puts = server_->RequestCount("PUT", "leases");
    renewed_during_pass.set_value(server_->WaitFor(
        [&] { return server_->RequestCount("PUT", "leases") >= puts + 2; }, kWait));
  };
  ControllerManager manager(options);
  ASSERT_TRUE(manager.Start().ok());
  std::future<bool> renewed = renewed_during_pass.get_future();
  ASSERT_EQ(renewed.wait_for(2 * kWait), std::future_status::ready) << "the first pass ran";
  EXPECT_TRUE(renewed.get()) << "the Lease was renewed while the first pass ran";
  EXPECT_TRUE(manager.IsLeader());
  manager.Stop();
  EXPECT_EQ(manager.Wait(), ControllerManager::Exit::kStopped);
}

// The Lease lost while Stop() still joins the workers (a scheduler pass in
// flight) is a loss, not Stop()'s own release: the client is fenced before
// anything else, so the pass cannot write after the standby took over. It
// used to be taken for the release, and nothing was fenced.
TEST_F(KubeTest, ALeaseLostWhileStoppingIsALossAndFencesTheClient) {
  ManagerOptions options = TestOptions(Config());
  options.lease_duration = std::chrono::seconds(3);
  options.renew_deadline = std::chrono::seconds(1);
  options.retry_period = std::chrono::milliseconds(100);
  std::atomic<bool> first{true};
  std::promise<void> in_pass;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  options.scheduler_pass_hook = [&] {
    if (!first.exchange(false)) return;
    in_pass.set_value();
    released.wait_for(2 * kWait);
  };
  ControllerManager manager(options);
  ASSERT_TRUE(manager.Start().ok());
  ASSERT_EQ(in_pass.get_future().wait_for(2 * kWait), std::future_status::ready);
  ASSERT_EQ(MetricValue(manager, "pacer_controller_leader"), 1);
  std::future<void> stopping = std::async(std::launch::async, [&] { manager.Stop(); });
  server_->FailNextRequests("", "leases", 503, 1000000);
  // Past the renew deadline the elector steps down; the pass still runs.
  const bool lost =
      Eventually([&] { return MetricValue(manager, "pacer_controller_leader") == 0; });
  release.set_value();
  ASSERT_EQ(stopping.wait_for(2 * kWait), std::future_status::ready);
  EXPECT_TRUE(lost) << "the lost-lease path (the fence first) did not run";
  EXPECT_EQ(manager.Wait(), ControllerManager::Exit::kLostLeadership);
}

// A reconcile that failed because the API server throttled it (429 with
// Retry-After) comes back when the server said, not after the backoff's
// first 5 ms: the retried status write is at least Retry-After later.
TEST_F(KubeTest, AReconcileTheServerThrottledIsRetriedAfterItsRetryAfter) {
  constexpr int kRetryAfterSeconds = 2;
  nlohmann::json job = TrainJob("throttled");
  // The finalizer is there already: adding it would be a change whose watch
  // event queues the job again at once, whatever the backoff said.
  job["metadata"]["finalizers"] = {kFinalizer};
  ASSERT_TRUE(server_->CreateObject(TrainJobsPath(), job).ok());
  server_->FailNextRequests("PUT", "/trainjobs/throttled/status", 429, 1, kRetryAfterSeconds);

  ManagerOptions options = TestOptions(Config());
  options.leader_elect = false;
  ControllerManager manager(options);
  ASSERT_TRUE(manager.Start().ok());
  std::vector<pacer::testing::AuditRecord> writes;
  ASSERT_TRUE(Eventually([&] {
    writes.clear();
    for (const pacer::testing::AuditRecord& r : server_->AuditLog()) {
      if (r.verb == "update" && r.subresource == "status" && r.name == "throttled") {
        writes.push_back(r);
      }
    }
    return writes.size() >= 2 && writes.back().code == 200;
  })) << "the status write is retried after the 429";
  manager.Stop();
  EXPECT_EQ(writes[0].code, 429);
  EXPECT_GE(writes[1].time - writes[0].time, std::chrono::seconds(kRetryAfterSeconds))
      << "retried " << std::chrono::duration<double>(writes[1].time - writes[0].time).count()
      << " s after the 429";
}

}  // namespace
}  // namespace pacer::controller
