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

namespace pacer::controller {
namespace {

// The leader elector's thread starts the workers and runs the first
// scheduler pass before it starts them; a SIGTERM in that window (seen in
// CI under AddressSanitizer, where the pass is slow) stopped the workers
// before they existed, and the start then created threads nobody joined:
// std::terminate when the manager was destroyed.
TEST_F(KubeTest, AStopDuringTheFirstSchedulerPassJoinsEveryThreadTheStartCreates) {
  ManagerOptions options;
  options.kube = Config();
  options.bind_address = "127.0.0.1";
  options.metrics_port = 0;
  options.probe_port = 0;
  options.workers = 2;
  options.identity = "manager-test";
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

  ManagerOptions options;
  options.kube = Config();
  options.bind_address = "127.0.0.1";
  options.metrics_port = 0;
  options.probe_port = 0;
  options.identity = "manager-test";
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
